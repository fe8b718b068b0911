package gateway

import (
	"bufio"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSourceQueueOrder checks that a clock's queue gives its sources back
// in the order of their next line, whatever the order they were put in,
// and lets go of one taken off it.
func TestSourceQueueOrder(t *testing.T) {
	base := time.Now()
	q := &sourceQueue{every: time.Millisecond}
	var srcs []*benchSource
	for _, ms := range []int{30, 10, 50, 20, 40, 60} {
		s := &benchSource{next: base.Add(time.Duration(ms) * time.Millisecond)}
		srcs = append(srcs, s)
		q.insert(s)
	}
	q.remove(srcs[2]) // 50
	if srcs[2].queued {
		t.Error("a source taken off the queue says it is queued")
	}
	var got []int
	for len(q.srcs) > 0 {
		got = append(got, int(q.pop().next.Sub(base)/time.Millisecond))
	}
	if want := []int{10, 20, 30, 40, 60}; !slices.Equal(got, want) {
		t.Errorf("popped %v, want %v", got, want)
	}
}

// TestBenchClock runs paced sources of two periods on the clock: each
// writes its whole transcript, its deltas in order, and a source cancelled
// while it waits an hour for its next line is closed at once.
func TestBenchClock(t *testing.T) {
	type out struct {
		lines []string
		err   error
	}
	start := func(prompt string) (stop func(), done <-chan struct{}, lines <-chan out) {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		ch := make(chan out, 1)
		go func() {
			var o out
			sc := bufio.NewScanner(r)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				o.lines = append(o.lines, sc.Text())
			}
			o.err = sc.Err()
			r.Close()
			ch <- o
		}()
		stop, done = StartBenchSource(w, prompt, t.TempDir())
		return stop, done, ch
	}
	var waits []<-chan out
	for _, p := range []string{"bench:12 every=2ms", "bench:7 every=3ms", "bench:9 every=2ms"} {
		_, _, lines := start(p)
		waits = append(waits, lines)
	}
	stop, done, idle := start("bench:5 every=1h")
	for i, want := range []int{12, 7, 9} {
		select {
		case o := <-waits[i]:
			deltas, last := 0, int64(0)
			for _, l := range o.lines {
				if !strings.Contains(l, `"timestamp_ms"`) {
					continue
				}
				deltas++
				_, mark, _ := strings.Cut(l, "[ts:")
				ts, err := strconv.ParseInt(mark[:strings.IndexByte(mark, ']')], 10, 64)
				if err != nil || ts < last {
					t.Errorf("source %d: delta %d is marked %q after %d", i, deltas, mark, last)
				}
				last = ts
			}
			if o.err != nil || deltas != want || !strings.Contains(o.lines[len(o.lines)-1], `"type":"result"`) {
				t.Errorf("source %d: %d deltas (want %d), last line %q, err %v", i, deltas, want, o.lines[len(o.lines)-1], o.err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("source %d did not end", i)
		}
	}
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a cancelled source waiting for its next line was not closed")
	}
	if o := <-idle; len(o.lines) != 3 {
		t.Errorf("the cancelled source wrote %d lines, want its head and first delta (3)", len(o.lines))
	}
}
