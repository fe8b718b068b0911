package gateway

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

// heapFloor keeps the garbage collector's heap goal at or above a floor.
// With GOGC's default of 100 the goal is twice the live heap, and a gateway
// serving a few streams has a live heap of a few MiB: it would collect
// several times a second, and every collection delays the events in flight.
// Below the floor the collector runs as if GOGC were higher; once the live
// heap reaches half the floor, GOGC is back at its own value and the floor
// costs nothing.
type heapFloor struct {
	floor   uint64
	base    int // the GOGC value in effect when the floor was set
	stopped atomic.Bool
	sample  []metrics.Sample
}

// startHeapFloor adjusts GOGC after every collection so that the heap goal
// stays at least floor bytes, until the returned function is called. It
// does nothing when floor is 0 or GC is off (GOGC=off).
func startHeapFloor(floor uint64) (stop func()) {
	base := debug.SetGCPercent(100)
	debug.SetGCPercent(base)
	if floor == 0 || base < 0 {
		return func() {}
	}
	h := &heapFloor{floor: floor, base: base, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	h.adjust()
	h.arm()
	return func() {
		if h.stopped.CompareAndSwap(false, true) {
			debug.SetGCPercent(h.base)
		}
	}
}

// gcSentinel is garbage the moment it is made: its finalizer runs once per
// collection.
type gcSentinel struct{ _ *heapFloor }

// arm makes a sentinel whose finalizer adjusts GOGC after the next
// collection and arms the next one.
func (h *heapFloor) arm() {
	s := &gcSentinel{}
	runtime.SetFinalizer(s, func(*gcSentinel) {
		if h.stopped.Load() {
			return
		}
		h.adjust()
		h.arm()
	})
}

// adjust sets GOGC from the live heap of the last collection.
func (h *heapFloor) adjust() {
	metrics.Read(h.sample)
	live := uint64(0)
	if h.sample[0].Value.Kind() == metrics.KindUint64 {
		live = h.sample[0].Value.Uint64()
	}
	debug.SetGCPercent(floorPercent(live, h.floor, h.base))
}

// floorPercent is the GOGC that makes the heap goal of a live heap at least
// floor, and never less than base. The runtime's own minimum goal, 4 MiB
// scaled by GOGC/100, must not pass the floor either: a tiny live heap gets
// the GOGC whose minimum goal is the floor.
func floorPercent(live, floor uint64, base int) int {
	if live >= floor {
		return base
	}
	limit := float64(floor) / (4 << 20) * 100
	p := limit
	if live > 0 {
		p = min(limit, (float64(floor)/float64(live)-1)*100)
	}
	if p > math.MaxInt32 {
		p = math.MaxInt32
	}
	return max(base, int(p))
}
