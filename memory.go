package main

import (
	"runtime"
	"runtime/debug"
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

// trimWhenIdle hands memory a burst of work freed back to the system once
// requests pause. The runtime would otherwise keep the burst's heap until
// its next collection, which an idle server may not start for minutes.
// After a trim it looks again (recheckTrim), because the burst's last frees
// can land after it. It costs a few collections per burst and nothing while
// the server is idle.
func trimWhenIdle(activity <-chan struct{}) {
	var trimmedAt uint64 // bytes allocated in all when memory was last handed back
	for range activity {
		for {
			for waitFor(activity, trimQuietDuration) {
			}
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.TotalAlloc-trimmedAt < trimMinBytes {
				break
			}
			trimmedAt = m.TotalAlloc
			returnMemory()
			if recheckTrim(activity) {
				break
			}
		}
	}
}

// recheckTrim looks at the heap each quiet second, trimRechecks times, and
// hands free memory above the floor back again. It reports false as soon
// as a request finishes meanwhile.
func recheckTrim(activity <-chan struct{}) bool {
	var m runtime.MemStats
	for i := 0; i < trimRechecks; i++ {
		if waitFor(activity, trimQuietDuration) {
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
