package gateway

import (
	"errors"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestOffStack checks that offStack returns once f has run and raises f's
// panic again on the caller's goroutine, with its value, so that the
// handler's recovery (a 500, or net/http's own for ErrAbortHandler) sees
// it as before.
func TestOffStack(t *testing.T) {
	ran := false
	offStack(func() { ran = true })
	if !ran {
		t.Fatal("offStack returned before f ran")
	}
	boom := errors.New("boom")
	for _, want := range []any{boom, http.ErrAbortHandler, "text"} {
		got := func() (p any) {
			defer func() { p = recover() }()
			offStack(func() { panic(want) })
			return nil
		}()
		if got != want {
			t.Errorf("recovered %v, want the panic of f, %v", got, want)
		}
	}
}

// goroutineID is the id runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := strings.Cut(strings.TrimPrefix(string(buf), "goroutine "), " ")
	return id
}

// TestOffStackReuse checks that calls one after another run on the same
// waiting goroutine, also after one panicked, and that a burst of
// concurrent calls leaves at most maxStackIdle goroutines waiting.
func TestOffStackReuse(t *testing.T) {
	// Other tests' servers may take the waiting goroutine between two
	// calls here, and another then runs the next: most calls reuse one.
	ran := map[string]bool{}
	for range 10 {
		offStack(func() { ran[goroutineID()] = true })
	}
	if len(ran) > 3 || ran[goroutineID()] {
		t.Errorf("10 calls one after another ran on goroutines %v (the caller is %s): want one or two others", ran, goroutineID())
	}
	func() {
		defer func() { recover() }()
		offStack(func() { panic("boom") })
	}()
	after := false
	offStack(func() { after = true })
	if !after {
		t.Fatal("no call ran after a panic")
	}

	release := make(chan struct{})
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			offStack(func() { <-release })
		}()
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	if n := waiting(&stackIdle); n < 1 || n > maxStackIdle {
		t.Errorf("%d goroutines wait for calls after a burst of 100; want 1 to %d", n, maxStackIdle)
	}
}

// TestStackWorkers checks the waiting workers: the one that waited least
// is taken first, and one whose wait ends after a call took it learns that
// it must run the call.
func TestStackWorkers(t *testing.T) {
	var ws stackWorkers
	a, b := &stackWorker{}, &stackWorker{}
	if !ws.push(a) || !ws.push(b) || waiting(&ws) != 2 {
		t.Fatal("two workers do not wait")
	}
	if ws.pop() != b {
		t.Error("the worker that waited least was not taken first")
	}
	if ws.remove(b) {
		t.Error("a worker taken by a call could leave")
	}
	if !ws.remove(a) || waiting(&ws) != 0 || ws.pop() != nil {
		t.Error("a waiting worker could not leave")
	}
	for range maxStackIdle {
		ws.push(&stackWorker{})
	}
	if ws.push(a) {
		t.Errorf("more than %d workers wait", maxStackIdle)
	}
}

// waiting is how many workers wait in ws.
func waiting(ws *stackWorkers) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	return len(ws.idle)
}

// TestGoWarm checks that goWarm runs f without waiting for it, on the
// goroutine that offStack's last call ran on, and that the goroutine waits
// for the next call once f returns.
func TestGoWarm(t *testing.T) {
	var prev string
	offStack(func() { prev = goroutineID() })
	release, got := make(chan struct{}), make(chan string, 1)
	goWarm(func() {
		<-release // goWarm has returned before this
		got <- goroutineID()
	})
	close(release)
	// Other tests may take the waiting goroutine first.
	if id := <-got; id != prev {
		t.Logf("goWarm ran on goroutine %s, offStack's last call on %s", id, prev)
	}
	same := 0
	for range 10 {
		offStack(func() { prev = goroutineID() })
		// The goroutine counts as waiting just after offStack returns.
		for deadline := time.Now().Add(time.Second); waiting(&stackIdle) == 0 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
		goWarm(func() { got <- goroutineID() })
		if <-got == prev {
			same++
		}
	}
	if same < 5 {
		t.Errorf("goWarm ran on offStack's last goroutine %d times of 10, want most", same)
	}
}
