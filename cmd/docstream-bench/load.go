package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docstream/docstream/documents"
)

// loadSpec is one load scenario against one server.
type loadSpec struct {
	Streams int           // concurrent streams
	Ramp    time.Duration // streams start evenly over Ramp; 0 starts them all at once
	// Stagger > 0 delays stream i's start by a further i/Streams of
	// Stagger: streams whose agents write a line every Stagger then write
	// at instants spread evenly over that interval. Without it, when
	// Ramp/Streams is a multiple of the interval every stream's lines fall
	// due at the same instants, a burst of Streams lines each interval.
	Stagger time.Duration
	Prompt  string        // e.g. "bench:300 every=10ms"
	Events  int           // timestamped deltas each stream must deliver
	Timeout time.Duration // for the whole scenario
	// Hold > 0 makes the streams idle: each stops reading after Hold deltas
	// and holds its connection until every stream got there; the server's
	// RSS is sampled then and the streams are closed.
	Hold int
	// KeepDeltas keeps each stream's deltas (Deltas) for writing out.
	KeepDeltas bool
	// Runs > 1 has each stream post Runs requests, one after another.
	Runs int
	// URLs, when set, are servers the streams go to in turn (stream i to
	// URLs[i mod len]) instead of the one runLoad is given.
	URLs []string
}

// loadResult is what the client measured.
type loadResult struct {
	Streams  int
	Requests int      // Streams × Runs
	OK       int      // requests that delivered every delta and the end
	Errors   []string // the first few failures
	Events   int      // timestamped deltas received in all
	Lat      dist     // receive time minus emit time, per delta
	TTH      dist     // request sent → response headers
	TTFD     dist     // request sent → first delta
	Wall     time.Duration
	RSSBase  int64 // server RSS before the scenario
	RSSPeak  int64 // highest server RSS sampled during it (idle: while held)
	// RSSActive is the highest RSS sampled while every stream was open and
	// none had ended (0 when that never happened, e.g. in a burst).
	RSSActive int64
	RSSEnd    int64 // server RSS once every stream has ended
	Rate      float64
	CPU       time.Duration // the server's CPU time during the scenario
	// Alloc and GCs are the bytes the server's Go heap allocated and the
	// collections it ran during the scenario (-1: not known).
	Alloc, GCs int64
	Complete   bool
	// Deltas are each stream's deltas, in the order of the streams' starts,
	// when the spec keeps them.
	Deltas []streamDeltas
}

// deltasHeader is the first line of a -latencies file.
const deltasHeader = "case\tserver\tround\tstream\tdelta\temit_unix_ns\tlatency_ns\n"

// writeDeltas writes r's deltas to w, one line each: the case's key, the
// server, the round and the stream (from 0, streams in the order of their
// starts), the delta's place in its stream (from 1), when it was emitted
// and its latency.
func writeDeltas(w io.Writer, key, server string, round int, r *loadResult) error {
	var b []byte
	for s, d := range r.Deltas {
		for i, lat := range d.Lat {
			b = fmt.Appendf(b[:0], "%s\t%s\t%d\t%d\t%d\t%d\t%d\n", key, server, round, s, i+1, d.Emit[i], lat)
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
	}
	return nil
}

// streamDeltas are one stream's deltas: the instant each was emitted
// (Unix nanoseconds) and its latency, in arrival order.
type streamDeltas struct {
	Emit, Lat []int64
}

// AllocPerEvent is the server's heap allocation per delivered delta, or -1.
func (r *loadResult) AllocPerEvent() float64 {
	if r.Alloc < 0 || r.Events == 0 {
		return -1
	}
	return float64(r.Alloc) / float64(r.Events)
}

// runtimeCounters reads the server's total heap allocation and number of
// collections from its /metrics (the Go collector's counters).
func runtimeCounters(client *http.Client, url string) (alloc, gcs int64, err error) {
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	alloc, gcs = -1, -1
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
		switch {
		case perr != nil:
		case name == "go_memstats_alloc_bytes_total":
			alloc = int64(f)
		case name == "go_gc_duration_seconds_count":
			gcs = int64(f)
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if alloc < 0 || gcs < 0 {
		return 0, 0, fmt.Errorf("%s/metrics has no go_memstats_alloc_bytes_total or go_gc_duration_seconds_count", url)
	}
	return alloc, gcs, nil
}

// CPUPerEvent is the server's CPU time per delivered delta.
func (r *loadResult) CPUPerEvent() time.Duration {
	if r.Events == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Events)
}

// CPUPerRequest is the server's CPU time per request.
func (r *loadResult) CPUPerRequest() time.Duration {
	if r.Requests == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Requests)
}

// RSSPerStream is the server's RSS growth per stream while all of them
// were open (else at the peak).
func (r *loadResult) RSSPerStream() float64 {
	top := r.RSSActive
	if top == 0 {
		top = r.RSSPeak
	}
	if r.Streams == 0 || top == 0 {
		return 0
	}
	return float64(top-r.RSSBase) / float64(r.Streams)
}

type streamResult struct {
	tth, ttfd time.Duration
	lat       []int64
	emit      []int64 // with KeepDeltas: each delta's emit instant
	done      bool
	err       error
	end       time.Time
	errDoc    string // the last event that carried an errorCode, clipped
}

// runLoad drives spec against the server at url and samples the RSS of pid
// (none when pid is 0).
func runLoad(ctx context.Context, url string, pid int, spec loadSpec) *loadResult {
	ctx, cancel := context.WithTimeout(ctx, spec.Timeout)
	defer cancel()
	tr := &http.Transport{
		MaxIdleConnsPerHost: spec.Streams + 16,
		DisableCompression:  true,
		ForceAttemptHTTP2:   false,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	body, _ := json.Marshal(map[string]any{"prompt": spec.Prompt, "stream": true})

	perStream := max(spec.Runs, 1)
	res := &loadResult{Streams: spec.Streams, Requests: spec.Streams * perStream, Alloc: -1, GCs: -1}
	var cpu0 time.Duration
	var alloc0, gcs0 int64
	var countersErr error
	if pid > 0 {
		res.RSSBase, _ = rssBytes(pid)
		cpu0, _ = cpuOf(pid)
		alloc0, gcs0, countersErr = runtimeCounters(client, url)
	}
	var opened, ended atomic.Int64 // streams that got their headers, streams that ended
	sampleStop := make(chan struct{})
	sampleDone := make(chan struct{})
	var peakMu sync.Mutex
	go func() {
		defer close(sampleDone)
		if pid <= 0 || spec.Hold > 0 {
			return
		}
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sampleStop:
				return
			case <-t.C:
				all := opened.Load() == int64(spec.Streams) && ended.Load() == 0
				if v, err := rssBytes(pid); err == nil {
					peakMu.Lock()
					res.RSSPeak = max(res.RSSPeak, v)
					if all && opened.Load() == int64(spec.Streams) && ended.Load() == 0 {
						res.RSSActive = max(res.RSSActive, v)
					}
					peakMu.Unlock()
				}
			}
		}
	}()

	results := make([]streamResult, res.Requests)
	var wg sync.WaitGroup
	held := make(chan struct{}, spec.Streams)
	release := make(chan struct{})
	start := make(chan struct{})
	t0 := time.Now()
	for i := range spec.Streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine := results[i*perStream : (i+1)*perStream]
			<-start
			if at := spec.startAt(i); at > 0 {
				select {
				case <-time.After(time.Until(t0.Add(at))):
				case <-ctx.Done():
					mine[0].err = ctx.Err()
					return
				}
			}
			to := url
			if len(spec.URLs) > 0 {
				to = spec.URLs[i%len(spec.URLs)]
			}
			for j := range mine {
				runStream(ctx, client, to, body, spec, &mine[j], held, release, &opened)
			}
			ended.Add(1)
		}()
	}
	close(start)
	if spec.Hold > 0 {
		// Wait until every stream holds (or failed), let the server settle,
		// sample, then let the streams go.
		got := 0
		finished := make(chan struct{})
		go func() { wg.Wait(); close(finished) }()
	wait:
		for got < spec.Streams {
			select {
			case <-held:
				got++
			case <-finished:
				break wait
			case <-ctx.Done():
				break wait
			}
		}
		time.Sleep(500 * time.Millisecond)
		if pid > 0 {
			for i := 0; i < 5; i++ {
				if v, err := rssBytes(pid); err == nil {
					res.RSSPeak = max(res.RSSPeak, v)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		res.Complete = got == spec.Streams
		close(release)
	}
	wg.Wait()
	close(sampleStop)
	<-sampleDone
	if pid > 0 {
		res.RSSEnd, _ = rssBytes(pid)
		if c, err := cpuOf(pid); err == nil {
			res.CPU = c - cpu0
		}
		if a, g, err := runtimeCounters(client, url); err == nil && countersErr == nil {
			res.Alloc, res.GCs = a-alloc0, g-gcs0
		}
	}
	var last time.Time
	var lat, tth, ttfd []int64
	for _, r := range results {
		if r.end.After(last) {
			last = r.end
		}
		lat = append(lat, r.lat...)
		if spec.KeepDeltas {
			res.Deltas = append(res.Deltas, streamDeltas{Emit: r.emit, Lat: r.lat})
		}
		if r.tth > 0 {
			tth = append(tth, int64(r.tth))
		}
		if r.ttfd > 0 {
			ttfd = append(ttfd, int64(r.ttfd))
		}
		res.Events += len(r.lat)
		switch {
		case r.err != nil:
			if len(res.Errors) < 5 {
				res.Errors = append(res.Errors, r.err.Error())
			}
		case spec.Hold > 0 || (r.done && len(r.lat) == spec.Events):
			res.OK++
		default:
			if len(res.Errors) < 5 {
				msg := fmt.Sprintf("stream ended after %d of %d deltas (end seen: %v)", len(r.lat), spec.Events, r.done)
				if r.errDoc != "" {
					msg += "; error: " + r.errDoc
				}
				res.Errors = append(res.Errors, msg)
			}
		}
	}
	if spec.Hold == 0 {
		res.Complete = res.OK == res.Requests
	}
	res.Wall = last.Sub(t0)
	if res.Wall > 0 {
		res.Rate = float64(res.Events) / res.Wall.Seconds()
	}
	res.Lat, res.TTH, res.TTFD = newDist(lat), newDist(tth), newDist(ttfd)
	return res
}

// startAt is when stream i starts, after the scenario's start.
func (spec loadSpec) startAt(i int) time.Duration {
	if spec.Streams == 0 {
		return 0
	}
	return time.Duration(i) * (spec.Ramp + spec.Stagger) / time.Duration(spec.Streams)
}

// runStream posts one streaming request and records what arrives.
func runStream(ctx context.Context, client *http.Client, url string, body []byte, spec loadSpec, r *streamResult, held chan<- struct{}, release <-chan struct{}, opened *atomic.Int64) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer func() { r.end = time.Now() }()
	t0 := time.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat?stream=true", bytes.NewReader(body))
	if err != nil {
		r.err = err
		return
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := client.Do(req)
	if err != nil {
		r.err = err
		return
	}
	defer resp.Body.Close()
	r.tth = time.Since(t0)
	opened.Add(1)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.err = fmt.Errorf("status %d: %s", resp.StatusCode, bytes.TrimSpace(b))
		return
	}
	if spec.Events > 0 {
		r.lat = make([]int64, 0, spec.Events)
	}
	err = readSSE(resp.Body, func(name string, data []byte) bool {
		now := time.Now()
		if ts, ok := eventTS(name, data); ok {
			if len(r.lat) == 0 {
				r.ttfd = now.Sub(t0)
			}
			r.lat = append(r.lat, now.UnixNano()-ts)
			if spec.KeepDeltas {
				r.emit = append(r.emit, ts)
			}
			if spec.Hold > 0 && len(r.lat) == spec.Hold {
				held <- struct{}{}
				select {
				case <-release:
				case <-ctx.Done():
				}
				return false
			}
		}
		if isDone(name, data) {
			r.done = true
		}
		if bytes.Contains(data, []byte(`"errorCode"`)) {
			r.errDoc = string(data[:min(len(data), 300)])
		}
		return true
	})
	if err != nil && !(spec.Hold > 0 && len(r.lat) >= spec.Hold) {
		r.err = err
	}
}

// readSSE parses an SSE stream and calls fn for every event with its name
// ("" when unnamed) and data (valid only during the call) until the stream
// ends, fn returns false, or reading fails. Comments are skipped.
func readSSE(body io.Reader, fn func(name string, data []byte) bool) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var name string
	var data, long []byte
	hasData := false
	for {
		line, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			long = append(long[:0], line...)
			for err == bufio.ErrBufferFull {
				line, err = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
		line = bytes.TrimSuffix(line[:len(line)-1], []byte("\r"))
		switch {
		case len(line) == 0:
			if hasData || name != "" {
				if !fn(name, data) {
					return nil
				}
			}
			name, data, hasData = "", data[:0], false
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				name = eventName(value)
			case "data":
				if hasData {
					data = append(data, '\n')
				}
				data = append(data, value...)
				hasData = true
			}
		}
	}
}

// rounds are the results of one case's rounds on one server.
type rounds []*loadResult

// stat returns the median over the rounds of f, and its minimum and
// maximum.
func (rs rounds) stat(f func(*loadResult) float64) (med, lo, hi float64) {
	if len(rs) == 0 {
		return 0, 0, 0
	}
	v := make([]float64, len(rs))
	for i, r := range rs {
		v[i] = f(r)
	}
	slices.Sort(v)
	n := len(v)
	med = v[n/2]
	if n%2 == 0 {
		med = (v[n/2-1] + v[n/2]) / 2
	}
	return med, v[0], v[n-1]
}

// dur is stat for durations.
func (rs rounds) dur(f func(*loadResult) time.Duration) (med, lo, hi time.Duration) {
	m, l, h := rs.stat(func(r *loadResult) float64 { return float64(f(r)) })
	return time.Duration(m), time.Duration(l), time.Duration(h)
}

// complete reports whether every round delivered everything.
func (rs rounds) complete() bool {
	for _, r := range rs {
		if !r.Complete {
			return false
		}
	}
	return len(rs) > 0
}

// summary says how complete the rounds were.
func (rs rounds) summary() string {
	ok, streams, events := 0, 0, 0
	var errs []string
	for _, r := range rs {
		ok += r.OK
		streams += r.Requests
		events += r.Events
		errs = append(errs, r.Errors...)
	}
	s := fmt.Sprintf("%d/%d requests complete, %d events", ok, streams, events)
	if len(errs) > 0 {
		s += "; " + errs[0]
	}
	return s
}

// eventNames avoids an allocation per event for the names that occur.
var eventNames = []string{documents.EventContentDelta, documents.EventDocumentStart, documents.EventDocumentEnd,
	documents.EventResponseStart, documents.EventDone, documents.EventToolCallStart, documents.EventToolCallArguments,
	documents.EventToolResult, documents.EventThinkingDelta}

func eventName(b []byte) string {
	for _, n := range eventNames {
		if string(b) == n {
			return n
		}
	}
	return string(b)
}
