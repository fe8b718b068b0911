package runs

import (
	"fmt"
	"sync"
	"testing"

	"github.com/docstream/docstream/documents"
	"github.com/docstream/docstream/sse"
)

// since returns the events the log keeps after the given id, whether it is
// closed, and false when some after the id were dropped.
func since(l *Log, after int) (frames []sse.Frame, closed, ok bool) {
	ok = l.Keeps(after)
	l.mu.Lock()
	after = max(after, l.first-1)
	l.mu.Unlock()
	f, closed, _ := l.Next(after)
	for ; f.ID != 0; f, closed, _ = l.Next(f.ID) {
		frames = append(frames, f)
	}
	return frames, closed, ok
}

func TestLogBoundsAndReplay(t *testing.T) {
	l := NewLog(3, 0)
	for i := 0; i < 5; i++ {
		if id := l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"}); id != i+1 {
			t.Fatalf("id %d, want %d", id, i+1)
		}
	}
	frames, closed, ok := since(l, 0)
	if ok || closed {
		t.Errorf("events 1-2 were dropped: ok must be false; closed %v", closed)
	}
	if len(frames) != 3 || frames[0].ID != 3 || frames[2].ID != 5 {
		t.Fatalf("frames %+v", frames)
	}
	if frames, _, ok = since(l, 3); !ok || len(frames) != 2 || frames[0].ID != 4 {
		t.Errorf("since 3: ok %v %+v", ok, frames)
	}
	if frames, _, _ = since(l, 5); len(frames) != 0 {
		t.Errorf("since the last id: %+v", frames)
	}
	l.Close()
	if id := l.Append(documents.Done{}); id != 0 {
		t.Errorf("append after close gave id %d", id)
	}
	if _, closed, _ := since(l, 5); !closed {
		t.Errorf("not closed")
	}
}

// TestLogSinceKeepsDroppedFrames: the frames a reader took stay as they
// were when the log drops them later; they used to be cleared under it.
func TestLogSinceKeepsDroppedFrames(t *testing.T) {
	l := NewLog(3, 0)
	for i := 0; i < 3; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"})
	}
	frames, _, _ := since(l, 0)
	for i := 0; i < 3; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "y"})
	}
	for i, f := range frames {
		if f.ID != i+1 || f.Name != documents.EventContentDelta {
			t.Fatalf("frame %d is now %d %q", i, f.ID, f.Name)
		}
	}
}

func TestLogByteBound(t *testing.T) {
	l := NewLog(0, 100)
	big := string(make([]byte, 60))
	l.Append(documents.ThinkingDelta{Delta: big})
	l.Append(documents.ThinkingDelta{Delta: big})
	frames, _, _ := since(l, 0)
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
	check := func(last, id int) bool {
		if id != last+1 {
			t.Errorf("got id %d after %d", id, last)
			return false
		}
		return true
	}
	for range 2 {
		wg.Go(func() {
			wake, stop := l.Watch()
			defer stop()
			last := 0
			for {
				f, closed, _ := l.Next(last)
				if f.ID != 0 {
					if !check(last, f.ID) {
						return
					}
					last = f.ID
					continue
				}
				if closed {
					break
				}
				<-wake
			}
			if last != n {
				t.Errorf("reader of Next saw %d events, want %d", last, n)
			}
		})
	}
	for i := 0; i < n; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: "x"})
	}
	l.Close()
	wg.Wait()
}

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
		if _, _, ok := l.Next(after); ok != want {
			t.Errorf("Next(%d) ok = %v, Keeps says %v", after, ok, want)
		}
	}
}

func ExampleLog() {
	log := NewLog(0, 0)
	log.Append(documents.ResponseStart{ID: "chat_1", Model: "auto", Mode: "agent"})
	log.Append(documents.Done{ID: "chat_1", Status: documents.StatusCompleted})
	log.Close()
	f, closed, ok := log.Next(1)
	fmt.Println(f.ID, f.Name, closed, ok)
	// Output:
	// 2 done true true
}

// TestLogAcrossBlocks checks ids and bounds over many blocks of events,
// dropping from the front while appending.
func TestLogAcrossBlocks(t *testing.T) {
	l := NewLog(37, 0)
	for i := 1; i <= 200; i++ {
		l.Append(documents.ContentDelta{DocumentID: "doc_001", Delta: fmt.Sprint(i)})
		if i <= blockLen && len(l.blocks) != 1 {
			t.Fatalf("%d events are held in %d blocks", i, len(l.blocks))
		}
		frames, _, _ := since(l, 0)
		if want := min(i, 37); len(frames) != want || frames[len(frames)-1].ID != i || frames[0].ID != i-want+1 {
			t.Fatalf("after %d appends: %d frames, %d..%d", i, len(frames), frames[0].ID, frames[len(frames)-1].ID)
		}
		for j, f := range frames {
			g, _, ok := l.Next(f.ID - 1)
			if !ok || g.ID != f.ID || string(g.Data) != string(f.Data) || j > 0 && g.ID != frames[j-1].ID+1 {
				t.Fatalf("after %d appends: Next(%d) = %d %s, ok %v", i, f.ID-1, g.ID, g.Data, ok)
			}
		}
	}
	if n := len(l.blocks); n > 4 {
		t.Errorf("%d blocks hold 37 events", n)
	}
}
