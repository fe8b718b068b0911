package main

import (
	"bytes"
	"math"
	"slices"
	"time"
)

// percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of
// sorted values, 0 for none.
func percentile(sorted []int64, p float64) int64 {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	rank = min(max(rank, 1), n)
	return sorted[rank-1]
}

// dist is a sorted sample of durations in nanoseconds.
type dist []int64

func newDist(v []int64) dist {
	d := slices.Clone(v)
	slices.Sort(d)
	return d
}

func (d dist) p(p float64) time.Duration { return time.Duration(percentile(d, p)) }

func (d dist) max() time.Duration {
	if len(d) == 0 {
		return 0
	}
	return time.Duration(d[len(d)-1])
}

var tsMark = []byte("[ts:")

// parseTS returns the emit time N of the first "[ts:N]" in b.
func parseTS(b []byte) (int64, bool) {
	i := bytes.Index(b, tsMark)
	if i < 0 {
		return 0, false
	}
	b = b[i+len(tsMark):]
	var n int64
	digits := 0
	for _, c := range b {
		if c == ']' {
			return n, digits > 0
		}
		if c < '0' || c > '9' || digits >= 19 {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		digits++
	}
	return 0, false
}

// eventTS returns the emit timestamp an SSE event carries: Docstream's
// content_delta events, and the relay's unnamed events that are a
// timestamped assistant delta line (not the final flush, which repeats every
// mark, and not the result).
func eventTS(name string, data []byte) (int64, bool) {
	switch name {
	case "content_delta":
		return parseTS(data)
	case "":
		if bytes.HasPrefix(data, []byte(`{"type":"assistant"`)) && bytes.Contains(data, []byte(`"timestamp_ms":`)) {
			return parseTS(data)
		}
	}
	return 0, false
}

// isDone reports whether an SSE event ends the stream: Docstream's done
// event, or the relay's copy of the agent's result line.
func isDone(name string, data []byte) bool {
	return name == "done" || (name == "" && bytes.HasPrefix(data, []byte(`{"type":"result"`)))
}
