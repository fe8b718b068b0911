package gateway

import (
	"strconv"
	"testing"
	"time"
)

// TestLimiterSweep checks that the limiters of idle clients are dropped
// once there are many, at most once per limiterSweepEvery, and that the
// map is bounded even when every client is recent.
func TestLimiterSweep(t *testing.T) {
	a := newAuthenticator(AuthConfig{RatePerMinute: 60, Burst: 1})
	idle := time.Now().Add(-2 * limiterIdle)
	fill := func(n int, seen time.Time, prefix string) {
		for i := range n {
			e := &limiterEntry{seen: seen}
			a.limiters[prefix+strconv.Itoa(i)] = e
		}
	}
	fill(maxLimiters+1, idle, "old-")
	if ok, _ := a.allow("new-1"); !ok {
		t.Fatal("a new client was refused")
	}
	if n := len(a.limiters); n != 1 {
		t.Fatalf("after a sweep %d limiters are held, want the new client's alone", n)
	}
	// Within limiterSweepEvery no new sweep: the next client does not pay
	// for reading them all again.
	fill(maxLimiters+1, idle, "old2-")
	if ok, _ := a.allow("new-2"); !ok {
		t.Fatal("a new client was refused")
	}
	if n := len(a.limiters); n != maxLimiters+3 {
		t.Errorf("%d limiters held, want %d (no sweep before %s)", n, maxLimiters+3, limiterSweepEvery)
	}
	a.nextSweep = time.Now().Add(-time.Second)
	if ok, _ := a.allow("new-3"); !ok || len(a.limiters) != 3 {
		t.Errorf("the sweep once due: %d limiters held, want 3", len(a.limiters))
	}
	// Recent clients past the hard bound: the map starts over.
	fill(hardLimiters+1, time.Now(), "busy-")
	if ok, _ := a.allow("new-4"); !ok || len(a.limiters) != 1 {
		t.Errorf("past the hard bound: %d limiters held, want 1", len(a.limiters))
	}
	// A known client keeps its limit: its second request within the burst
	// of one is refused.
	if ok, _ := a.allow("new-4"); ok {
		t.Errorf("a second request within a burst of 1 passed")
	}
}
