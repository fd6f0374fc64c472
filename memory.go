package main

import (
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

const (
	// trimQuietDuration is how long requests must pause before memory a
	// burst freed is handed back to the system.
	trimQuietDuration = time.Second
	// trimMinBytes is how much must have been allocated since the last
	// trim for another to be worth a collection.
	trimMinBytes = 16 << 20
	// trimRechecks and trimMinFreeBytes bound the looks after a trim: free
	// heap above the floor is handed back again.
	trimRechecks     = 10
	trimMinFreeBytes = 512 << 10
)

// activityClock tells trimWhenIdle when requests finish without a goroutine
// hand-off per request: a finished request stamps the time, and only the
// first one after the trimmer parked wakes it. While requests keep coming
// the trimmer sleeps on its own timer and reads the stamp when it wakes.
type activityClock struct {
	startedAt time.Time    // the monotonic origin of lastNanos
	lastNanos atomic.Int64 // nanoseconds after startedAt when the newest request finished
	parked    atomic.Bool  // the trimmer waits on wake for the next request
	wake      chan struct{}
	// wake is 1-buffered: it carries the first request after a park, sent
	// only by the touch that cleared parked, so it never holds a stale one.
	stopped chan struct{} // closed by stop: the trimmer returns
}

// newActivityClock returns a clock whose trimmer is not parked yet.
func newActivityClock() *activityClock {
	return &activityClock{startedAt: time.Now(), wake: make(chan struct{}, 1), stopped: make(chan struct{})}
}

// touch records that a request finished. Any goroutine may call it; it
// never blocks. A nil clock records nothing.
func (c *activityClock) touch() {
	if c == nil {
		return
	}
	c.lastNanos.Store(int64(time.Since(c.startedAt)))
	if c.parked.CompareAndSwap(true, false) {
		nudge(c.wake)
	}
}

// stop ends the trimmer; call it once.
func (c *activityClock) stop() { close(c.stopped) }

// awaitRequest parks the trimmer until a request finishes after seen (a
// stamp it read before), and reports false once the clock is stopped.
func (c *activityClock) awaitRequest(seen int64) bool {
	c.parked.Store(true)
	// A request that finished before parked was set sent no wake: look.
	if c.lastNanos.Load() != seen && c.parked.CompareAndSwap(true, false) {
		return true
	}
	// Otherwise a touch that comes (or came: it cleared parked before the
	// look above) sends the wake.
	select {
	case <-c.wake:
		return true
	case <-c.stopped:
		return false
	}
}

// awaitQuiet sleeps until quiet has passed since the newest request and
// returns that request's stamp, or reports false once the clock is stopped.
func (c *activityClock) awaitQuiet(quiet time.Duration) (int64, bool) {
	for {
		last := c.lastNanos.Load()
		left := quiet - (time.Since(c.startedAt) - time.Duration(last))
		if left <= 0 {
			return last, true
		}
		if !c.sleep(left) {
			return 0, false
		}
	}
}

// sleep waits d, and reports false if the clock stopped meanwhile.
func (c *activityClock) sleep(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.stopped:
		return false
	}
}

// trimWhenIdle hands memory a burst of work freed back to the system once
// requests pause for trimQuietDuration. The runtime would otherwise keep
// the burst's heap until its next collection, which an idle server may not
// start for minutes. After a trim it looks again (recheckTrim), because the
// burst's last frees can land after it. It costs a few collections per
// burst and nothing while the server is idle; it returns once c is stopped.
func trimWhenIdle(c *activityClock) {
	var trimmedAt uint64 // bytes allocated in all when memory was last handed back
	var seen int64       // the stamp of the newest request the trimmer has looked after
	for c.awaitRequest(seen) {
		for {
			last, ok := c.awaitQuiet(trimQuietDuration)
			if !ok {
				return
			}
			seen = last
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.TotalAlloc-trimmedAt < trimMinBytes {
				break
			}
			trimmedAt = m.TotalAlloc
			returnMemory()
			if recheckTrim(c, seen) {
				break
			}
		}
	}
}

// recheckTrim looks at the heap each quiet second, trimRechecks times, and
// hands free memory above the floor back again. It reports false as soon
// as a request finished after seen (or the clock stopped).
func recheckTrim(c *activityClock, seen int64) bool {
	var m runtime.MemStats
	for i := 0; i < trimRechecks; i++ {
		if !c.sleep(trimQuietDuration) || c.lastNanos.Load() != seen {
			return false
		}
		if runtime.ReadMemStats(&m); heapFreeBytes(&m) >= trimMinFreeBytes {
			debug.FreeOSMemory()
		}
	}
	return true
}

// returnMemory collects garbage and hands free heap back to the system.
func returnMemory() {
	runtime.GC() // the first collection only moves sync.Pool buffers to its victim cache
	debug.FreeOSMemory()
}

// heapFreeBytes is heap memory free for reuse and not yet returned to the
// system: what FreeOSMemory would hand back.
func heapFreeBytes(m *runtime.MemStats) uint64 { return m.HeapIdle - m.HeapReleased }

// runtimeHeadroomBytes is what the runtime may hold beyond the windows'
// bound: the server's own work and the garbage a collection has not yet
// taken.
const runtimeHeadroomBytes = 8 << 20

// limitRuntimeMemory gives the Go runtime a soft memory limit a little
// above the windows' bound (windowsBound bytes; 0: none), so it collects
// the chunks the bound frees before the heap doubles with them. A limit
// set with GOMEMLIMIT wins.
func limitRuntimeMemory(windowsBound int64, gomemlimitSet bool) {
	if windowsBound <= 0 || gomemlimitSet {
		return
	}
	debug.SetMemoryLimit(windowsBound + windowsBound/8 + runtimeHeadroomBytes)
}
