package sse

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/docstream/docstream/documents"
)

func TestLogBoundsAndReplay(t *testing.T) {
	l := NewLog(3, 0)
	for i := 0; i < 5; i++ {
		if id := l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"}); id != i+1 {
			t.Fatalf("id %d, want %d", id, i+1)
		}
	}
	frames, closed, _, ok := l.Since(0)
	if ok || closed {
		t.Errorf("events 1-2 were dropped: ok must be false; closed %v", closed)
	}
	if len(frames) != 3 || frames[0].ID != 3 || frames[2].ID != 5 {
		t.Fatalf("frames %+v", frames)
	}
	if frames, _, _, ok = l.Since(3); !ok || len(frames) != 2 || frames[0].ID != 4 {
		t.Errorf("since 3: ok %v %+v", ok, frames)
	}
	if frames, _, _, _ = l.Since(5); len(frames) != 0 {
		t.Errorf("since the last id: %+v", frames)
	}
	l.Close()
	if id := l.Append(documents.Done{}); id != 0 {
		t.Errorf("append after close gave id %d", id)
	}
	if _, closed, _, _ := l.Since(5); !closed {
		t.Errorf("not closed")
	}
}

func TestLogByteBound(t *testing.T) {
	l := NewLog(0, 100)
	big := string(make([]byte, 60))
	l.Append(documents.ThinkingDelta{Delta: big})
	l.Append(documents.ThinkingDelta{Delta: big})
	frames, _, _, _ := l.Since(0)
	if len(frames) != 1 || frames[0].ID != 2 {
		t.Errorf("the byte bound should keep only the last event: %d frames", len(frames))
	}
}

// TestLogSubscribers checks that concurrent readers each see every event
// once and in order while a writer appends.
func TestLogSubscribers(t *testing.T) {
	l := NewLog(0, 0)
	const n = 2000
	var wg sync.WaitGroup
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				frames, closed, more, _ := l.Since(last)
				for _, f := range frames {
					if f.ID != last+1 {
						t.Errorf("got id %d after %d", f.ID, last)
						return
					}
					last = f.ID
				}
				if len(frames) == 0 {
					if closed {
						break
					}
					<-more
				}
			}
			if last != n {
				t.Errorf("reader saw %d events, want %d", last, n)
			}
		}()
	}
	for i := 0; i < n; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"})
	}
	l.Close()
	wg.Wait()
}

// testSink records what a log offers it; it takes frames while accept says so.
type testSink struct {
	mu        sync.Mutex
	accept    bool
	delivered []int
	offered   []int
	unflushed []int // delivered frames not flushed yet
	flushes   int   // the flushes of frames taken unflushed (Flush calls with some)
	kicks     int
}

func (s *testSink) Deliver(f Frame, flush bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.offered = append(s.offered, f.ID)
	if s.accept {
		s.delivered = append(s.delivered, f.ID)
		s.unflushed = append(s.unflushed, f.ID)
		if flush {
			s.unflushed = s.unflushed[:0]
		}
	}
	return s.accept
}

func (s *testSink) Flush() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.unflushed) > 0 {
		s.flushes++
		s.unflushed = s.unflushed[:0]
	}
}

func (s *testSink) Kick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kicks++
}

func TestLogSink(t *testing.T) {
	l := NewLog(0, 0)
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "before"})
	s := &testSink{accept: true}
	if !l.SetSink(s) {
		t.Fatal("SetSink on a log without a sink refused")
	}
	if l.SetSink(&testSink{}) {
		t.Fatal("a second sink was accepted")
	}
	// Frames appended before the sink was set are read, not offered.
	if frames, closed, ok := l.Read(0); len(frames) != 1 || frames[0].ID != 1 || closed || !ok {
		t.Fatalf("Read(0) = %+v, %v, %v", frames, closed, ok)
	}
	_, _, more, _ := l.Since(1) // another subscriber waits as before
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "a"})
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "b"})
	select {
	case <-more:
	default:
		t.Error("a subscriber waiting with Since was not woken")
	}
	s.mu.Lock()
	if got := s.delivered; len(got) != 2 || got[0] != 2 || got[1] != 3 || s.kicks != 0 {
		t.Errorf("delivered %v, kicks %d; want [2 3] and no kick", got, s.kicks)
	}
	s.accept = false
	s.mu.Unlock()
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "c"})
	s.mu.Lock()
	if s.kicks != 1 || s.offered[len(s.offered)-1] != 4 {
		t.Errorf("a refused frame: offered %v, kicks %d; want 4 offered and one kick", s.offered, s.kicks)
	}
	s.mu.Unlock()
	if frames, _, _ := l.Read(3); len(frames) != 1 || frames[0].ID != 4 {
		t.Errorf("Read(3) after a refusal = %+v", frames)
	}
	l.Close()
	s.mu.Lock()
	if s.kicks != 2 {
		t.Errorf("Close kicked the sink %d times in all, want 2", s.kicks)
	}
	s.mu.Unlock()
	if _, closed, _ := l.Read(4); !closed {
		t.Error("Read after Close: not closed")
	}
	if !l.SetSink(nil) || !l.SetSink(&testSink{}) {
		t.Error("after SetSink(nil) another sink must be accepted")
	}
}

// TestLogHold checks that frames appended while the producer holds are not
// offered to the sink, which is kicked to read them instead, and that
// frames are offered again once the hold is released.
func TestLogHold(t *testing.T) {
	l := NewLog(0, 0)
	s := &testSink{accept: true}
	l.SetSink(s)
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "a"}) // offered
	l.Hold(true)
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "b"})
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "c"})
	l.Hold(true) // still more
	s.mu.Lock()
	if len(s.offered) != 1 || s.kicks != 2 {
		t.Errorf("while held: offered %v, kicks %d; want [1] and 2 kicks", s.offered, s.kicks)
	}
	s.mu.Unlock()
	if frames, _, _ := l.Read(1); len(frames) != 2 || frames[0].ID != 2 || frames[1].ID != 3 {
		t.Errorf("the held frames are not there to read: %+v", frames)
	}
	l.Hold(false)
	l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "d"})
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := s.delivered; len(got) != 2 || got[0] != 1 || got[1] != 4 || s.kicks != 2 {
		t.Errorf("after the hold: delivered %v, kicks %d; want [1 4] and still 2 kicks", got, s.kicks)
	}
}

// TestLogSinkOrder appends from one goroutine while a sink takes every
// other frame and a reader catches up on the rest: together they see every
// id once, in order.
func TestLogSinkOrder(t *testing.T) {
	l := NewLog(0, 0)
	var mu sync.Mutex
	seen := []int{}
	last := 0
	kick := make(chan struct{}, 1)
	sink := &funcSink{
		deliver: func(f Frame) bool {
			mu.Lock()
			defer mu.Unlock()
			if f.ID != last+1 || f.ID%2 == 0 {
				return false
			}
			seen = append(seen, f.ID)
			last = f.ID
			return true
		},
		kick: func() {
			select {
			case kick <- struct{}{}:
			default:
			}
		},
	}
	l.SetSink(sink)
	const n = 2000
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			mu.Lock()
			frames, closed, _ := l.Read(last)
			for _, f := range frames {
				seen = append(seen, f.ID)
				last = f.ID
			}
			mu.Unlock()
			if closed && len(frames) == 0 {
				return
			}
			if len(frames) == 0 {
				<-kick
			}
		}
	}()
	for i := 0; i < n; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"})
	}
	l.Close()
	<-done
	if len(seen) != n {
		t.Fatalf("saw %d frames, want %d", len(seen), n)
	}
	for i, id := range seen {
		if id != i+1 {
			t.Fatalf("frame %d has id %d", i, id)
		}
	}
}

type funcSink struct {
	deliver func(Frame) bool
	kick    func()
}

func (s *funcSink) Deliver(f Frame, _ bool) bool { return s.deliver(f) }
func (s *funcSink) Flush()                       {}
func (s *funcSink) Kick()                        { s.kick() }

// TestLogChunks checks that the frames a log hands out are the events'
// encodings, whatever their size and escaping, that a frame handed out
// stays intact while the log grows and drops, and that dropped chunks are
// let go.
func TestLogChunks(t *testing.T) {
	l := NewLog(50, 0)
	var evs []documents.Event
	for i := 0; i < 400; i++ {
		var ev documents.Event
		switch i % 5 {
		case 0:
			ev = documents.ContentDelta{DocumentID: "doc_001", Delta: strings.Repeat("\x01\"", i)} // escapes past the estimate
		case 1:
			ev = documents.ThinkingDelta{Delta: "step " + strconv.Itoa(i)}
		case 2:
			ev = documents.DocumentStart{ID: "doc_002", Type: documents.TypeText, Sequence: i}
		case 3:
			ev = documents.ContentDelta{DocumentID: "doc_002", Delta: strings.Repeat("y", 40<<10)} // larger than a chunk
		default:
			ev = documents.ContentDelta{DocumentID: "doc_003", Delta: "z"}
		}
		evs = append(evs, ev)
	}
	check := func(f Frame) {
		t.Helper()
		ev := evs[f.ID-1]
		want, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if f.Name != ev.Name() || string(f.Data) != string(want) {
			t.Fatalf("frame %d: %s %.80q, want %s %.80q", f.ID, f.Name, f.Data, ev.Name(), want)
		}
		if cap(f.Data) != len(f.Data) {
			t.Fatalf("frame %d: data has room after it (cap %d, len %d)", f.ID, cap(f.Data), len(f.Data))
		}
	}
	var kept []Frame
	for i, ev := range evs {
		if id := l.Append(ev); id != i+1 {
			t.Fatalf("id %d, want %d", id, i+1)
		}
		frames, _, _ := l.Read(i)
		if len(frames) != 1 {
			t.Fatalf("Read(%d) gave %d frames", i, len(frames))
		}
		check(frames[0])
		if i%37 == 0 {
			kept = append(kept, frames[0])
		}
	}
	for _, f := range kept {
		check(f)
	}
	frames, _, ok := l.Read(0)
	if ok || len(frames) != 50 || frames[0].ID != 351 {
		t.Fatalf("Read(0): %d frames from %d, ok %v", len(frames), frames[0].ID, ok)
	}
	for _, f := range frames {
		check(f)
	}
	l.mu.Lock()
	chunks := len(l.chunks)
	l.mu.Unlock()
	if chunks > 40 {
		t.Errorf("the log holds %d chunks for 50 events: dropped ones are kept", chunks)
	}
}

// BenchmarkLogAppendMany appends to many logs in turn, as a gateway with
// many slow streams does: each append finds its log cold in the cache.
func BenchmarkLogAppendMany(b *testing.B) {
	const logs = 4096
	ls := make([]*Log, logs)
	reset := func() {
		for i := range ls {
			ls[i] = NewLog(0, 0)
			ls[i].Append(documents.DocumentStart{ID: "doc_001", Type: documents.TypeText, Sequence: 1})
		}
	}
	reset()
	ev := documents.ContentDelta{DocumentID: "doc_001", Delta: " a word"}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if ls[i%logs].Append(ev) == 0 {
			b.Fatal("not appended")
		}
		if i++; i%(logs*64) == 0 {
			b.StopTimer()
			reset()
			b.StartTimer()
		}
	}
}

// TestLogCloseClips checks that a closed log keeps no room for appends and
// that its frames, read before and after, are unchanged.
func TestLogCloseClips(t *testing.T) {
	l := NewLog(0, 0)
	for i := 0; i < 300; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "word " + strconv.Itoa(i)})
	}
	before, _, _ := l.Read(0)
	l.mu.Lock()
	roomy := cap(l.tail) > len(l.tail) && cap(l.ents) > len(l.ents)
	l.mu.Unlock()
	if !roomy {
		t.Fatal("the log had no room to give back; the test checks nothing")
	}
	l.Close()
	l.mu.Lock()
	tail, ents := cap(l.tail)-len(l.tail), cap(l.ents)-len(l.ents)
	l.mu.Unlock()
	if tail != 0 || ents != 0 {
		t.Errorf("a closed log keeps room: %d bytes in its chunk, %d entries in its index", tail, ents)
	}
	after, closed, _ := l.Read(0)
	if !closed || len(after) != len(before) {
		t.Fatalf("after Close: %d frames (closed %v), want %d", len(after), closed, len(before))
	}
	for i := range after {
		if after[i].ID != before[i].ID || after[i].Name != before[i].Name || string(after[i].Data) != string(before[i].Data) {
			t.Fatalf("frame %d changed: %s %q, was %s %q", i+1, after[i].Name, after[i].Data, before[i].Name, before[i].Data)
		}
	}
	if l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "late"}) != 0 {
		t.Error("a closed log took an event")
	}
}

// TestLogKeeps checks Keeps against what the log still holds.
func TestLogKeeps(t *testing.T) {
	l := NewLog(3, 0)
	if !l.Keeps(0) || !l.Keeps(-1) {
		t.Error("an empty log does not keep what follows 0")
	}
	for i := 0; i < 5; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"})
	}
	// Events 3, 4 and 5 are kept.
	for after, want := range map[int]bool{0: false, 1: false, 2: true, 4: true, 5: true, 9: true} {
		if got := l.Keeps(after); got != want {
			t.Errorf("Keeps(%d) = %v, want %v", after, got, want)
		}
		if _, _, ok := l.Read(after); ok != want {
			t.Errorf("Read(%d) ok = %v, Keeps says %v", after, ok, want)
		}
	}
}

// TestLogBatch checks that the frames of a batch are offered without a
// flush each and flushed once, at its end or at Flush, and that a batch
// the sink took nothing of asks for no flush.
func TestLogBatch(t *testing.T) {
	l := NewLog(0, 0)
	s := &testSink{accept: true}
	l.SetSink(s)
	check := func(step string, delivered, unflushed []int, flushes int) {
		t.Helper()
		s.mu.Lock()
		defer s.mu.Unlock()
		if !slices.Equal(s.delivered, delivered) || !slices.Equal(s.unflushed, unflushed) || s.flushes != flushes {
			t.Errorf("%s: delivered %v, unflushed %v, %d flushes; want %v, %v, %d",
				step, s.delivered, s.unflushed, s.flushes, delivered, unflushed, flushes)
		}
	}
	delta := func() { l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"}) }
	delta()
	check("outside a batch", []int{1}, []int{}, 0)
	_, _, more, _ := l.Since(1)
	l.Batch(true)
	delta()
	delta()
	check("in a batch", []int{1, 2, 3}, []int{2, 3}, 0)
	// Readers get the batch once it ends.
	if frames, _, _ := l.Read(1); len(frames) != 0 {
		t.Errorf("a reader got %d frames of an open batch", len(frames))
	}
	select {
	case <-more:
		t.Error("a subscriber was woken for an open batch")
	default:
	}
	l.Batch(false)
	check("at its end", []int{1, 2, 3}, []int{}, 1)
	if frames, _, _ := l.Read(1); len(frames) != 2 {
		t.Errorf("after the batch a reader got %d frames, want 2", len(frames))
	}
	select {
	case <-more:
	default:
		t.Error("a subscriber was not woken at the batch's end")
	}
	l.Batch(true)
	delta()
	l.Flush()
	check("Flush in a batch", []int{1, 2, 3, 4}, []int{}, 2)
	delta()
	l.Batch(false)
	check("after Flush", []int{1, 2, 3, 4, 5}, []int{}, 3)
	l.Batch(true)
	l.Batch(false)
	l.Flush()
	check("an empty batch", []int{1, 2, 3, 4, 5}, []int{}, 3)
	// A frame the sink refuses is read by its goroutine, which is kicked
	// once the batch ends and flushes what it writes; the batch's end asks
	// for no flush.
	s.mu.Lock()
	s.accept = false
	s.mu.Unlock()
	l.Batch(true)
	delta()
	delta()
	if s.kicks != 0 {
		t.Errorf("kicked %d times in an open batch", s.kicks)
	}
	l.Batch(false)
	check("refused", []int{1, 2, 3, 4, 5}, []int{}, 3)
	if s.kicks != 1 {
		t.Errorf("%d kicks for a refused batch, want 1", s.kicks)
	}
	if frames, _, _ := l.Read(5); len(frames) != 2 {
		t.Errorf("the refused batch: a reader got %d frames, want 2", len(frames))
	}
	// While held the sink is not offered a batch's frames: it is kicked
	// to read them at the batch's end.
	s.accept = true
	l.Hold(true)
	l.Batch(true)
	delta()
	l.Batch(false)
	l.Hold(false)
	check("held", []int{1, 2, 3, 4, 5}, []int{}, 3)
	if s.kicks != 2 {
		t.Errorf("%d kicks in all after a held batch, want 2", s.kicks)
	}
	// Close shows what an unended batch holds.
	l.Batch(true)
	delta()
	l.Close()
	if frames, closed, _ := l.Read(8); len(frames) != 1 || !closed {
		t.Errorf("after Close: %d frames, closed %v; want the batch's one and closed", len(frames), closed)
	}
}
