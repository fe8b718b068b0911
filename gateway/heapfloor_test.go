package gateway

import (
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestFloorPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		live, floor uint64
		base, want  int
	}{
		{live: 4 * mib, floor: 32 * mib, base: 100, want: 700}, // goal 4×8 = 32 MiB
		{live: 1 * mib, floor: 32 * mib, base: 100, want: 800}, // the minimum goal 4 MiB×8 is the floor
		{live: 16 * mib, floor: 32 * mib, base: 100, want: 100},
		{live: 12 * mib, floor: 32 * mib, base: 100, want: 166},
		{live: 64 * mib, floor: 32 * mib, base: 100, want: 100},
		{live: 64 * mib, floor: 32 * mib, base: 300, want: 300},
		{live: 8 * mib, floor: 32 * mib, base: 500, want: 500}, // a higher GOGC is kept
		{live: 0, floor: 32 * mib, base: 100, want: 800},       // unknown: the minimum goal is the floor
		{live: 1 * mib, floor: 2 * mib, base: 100, want: 100},  // a floor under the minimum goal changes nothing
	} {
		if got := floorPercent(c.live, c.floor, c.base); got != c.want {
			t.Errorf("floorPercent(%d MiB, %d MiB, %d) = %d, want %d", c.live/mib, c.floor/mib, c.base, got, c.want)
		}
	}
}

// TestHeapFloorFollowsCollections checks, on the real runtime, that GOGC is
// raised while the live heap is far below the floor, is set again after
// collections, and is restored on stop.
func TestHeapFloorFollowsCollections(t *testing.T) {
	base := debug.SetGCPercent(100)
	defer debug.SetGCPercent(base)
	stop := startHeapFloor(1 << 40)
	if p := debug.SetGCPercent(100); p <= 100 {
		t.Fatalf("GOGC with a 1 TiB floor = %d, want far above 100", p)
	}
	// After the next collections the finalizer sets it again.
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
		p := debug.SetGCPercent(100)
		if p > 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GOGC stayed at %d after collections; the floor was not applied again", p)
		}
	}
	stop()
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC after stop = %d, want the base 100", p)
	}
	// Stopped: collections leave GOGC alone.
	runtime.GC()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	if p := debug.SetGCPercent(100); p != 100 {
		t.Fatalf("GOGC changed to %d after stop", p)
	}
	if stop := startHeapFloor(0); debug.SetGCPercent(100) != 100 {
		stop()
		t.Fatal("a floor of 0 changed GOGC")
	}
}
