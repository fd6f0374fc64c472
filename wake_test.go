package main

import (
	"context"
	"sync/atomic"
	"testing"
	"time"
)

// TestProgress: a waiter with an interval reports while it blocks, with
// counters 1, 2, 3 …, and never after it returned.
func TestProgress(t *testing.T) {
	t.Parallel()
	reg := newRegistry(testConfig())
	j := startJob(t, reg, "sleep 0.3")
	var counters []int
	var returned, late atomic.Bool
	w := &waiter{ctx: context.Background(), interval: 50 * time.Millisecond, reporter: progressFunc(func(n int, message string) {
		if returned.Load() {
			late.Store(true)
		}
		if message == "" {
			t.Errorf("progress %d without a message", n)
		}
		counters = append(counters, n)
	})}
	claimed, err := waitIDs(reg, w, []string{j.id}, time.Now().Add(jobDeadline), false)
	returned.Store(true)
	if err != nil || claimed[j.id] != j {
		t.Fatalf("wait: %v, %v", claimed, err)
	}
	if len(counters) < 2 {
		t.Fatalf("%d progress reports during a 300 ms wait with a 50 ms interval, want at least 2", len(counters))
	}
	for i, n := range counters {
		if n != i+1 {
			t.Errorf("progress counters %v, want 1, 2, 3, …", counters)
			break
		}
	}
	// Anything reporting after the wait returned would run on the waiting
	// goroutine, which has returned: a late report can only come from a bug
	// that keeps a timer alive. Another job's full run gives it the chance.
	collect(t, reg, startJob(t, reg, "sleep 0.2"))
	if late.Load() {
		t.Errorf("a progress report arrived after the wait returned")
	}
}

// progressFunc is a progressReporter made of a function, for tests.
type progressFunc func(n int, message string)

// progress calls f.
func (f progressFunc) progress(n int, message string) { f(n, message) }
