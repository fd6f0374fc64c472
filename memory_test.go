package main

import (
	"runtime"
	"testing"
)

// TestTrimAfterBurstThatEndsDuringRechecks: a big request that finishes
// while trimWhenIdle is still re-checking after an earlier trim must be
// trimmed too, with no further request. The full soak saw its baseline stay
// ~100 MiB: the rechecks ended on that request's activity and the memory it
// left was counted as already trimmed. Not parallel: it counts forced
// collections, which other tests also make.
func TestTrimAfterBurstThatEndsDuringRechecks(t *testing.T) {
	activity := newActivityClock()
	go trimWhenIdle(activity)
	defer activity.stop()
	forced := func() uint32 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.NumForcedGC
	}
	burst := func() {
		for i := 0; i < 2*trimMinBytes/(64<<10); i++ {
			sink = make([]byte, 64<<10)
		}
		activity.touch()
	}
	before := forced()
	burst()
	// A trim is two forced collections: runtime.GC and debug.FreeOSMemory.
	eventually(t, 10*trimQuietDuration, "the first burst is trimmed", func() bool { return forced() >= before+2 })
	before = forced()
	burst() // while the trim re-checks each quiet second
	eventually(t, 10*trimQuietDuration, "the second burst is trimmed with no further request", func() bool { return forced() >= before+2 })
}
