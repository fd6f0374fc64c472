package main

import (
	"cmp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// windowMemory is what a set of output windows hold together, and its
// bound: the process has one (theProcess.windows), which every job's
// windows join; a test may make its own. newWindow lists each window it
// makes, the windows count their chunk bytes into used, and enforce evicts
// past the bound. The zero value is ready to use, with no bound.
type windowMemory struct {
	used  atomic.Int64 // bytes in the chunks of every live window made here
	limit atomic.Int64 // MCP_EXEC_MEMORY_LIMIT; 0: no bound

	// mu guards all, live and lastGC, and makes one eviction at a time.
	// Lock order: mu, then a window's mu (enforce has windows drop their
	// oldest bytes under it); never mu while a window's mu is held.
	mu     sync.Mutex
	all    []weak.Pointer[window] // every window made, while it lives (dead ones until the next compaction)
	live   int                    // len(all) after the last compaction
	lastGC time.Time              // when enforce last collected garbage

	arm atomic.Pointer[func()] // sets limit, once, before the first window (setBound); nil: none to set
}

// setLimit bounds the bytes the windows hold together (0: none).
func (m *windowMemory) setLimit(bytes int64) { m.limit.Store(bytes) }

// setBound has bound called once, when the first window is made, and its
// answer bound the bytes the windows hold together (0: none): a process
// that runs no job never reads what the bound is made of.
func (m *windowMemory) setBound(bound func() int64) {
	arm := sync.OnceFunc(func() { m.setLimit(bound()) })
	m.arm.Store(&arm)
}

// held is what the windows hold now.
func (m *windowMemory) held() int64 { return m.used.Load() }

// newWindow returns an empty window, counted here, that retains at most the
// last limit bytes, and also the first headLimit bytes (0: none).
func (m *windowMemory) newWindow(limit, headLimit int) *window {
	if arm := m.arm.Load(); arm != nil {
		(*arm)() // once; every caller waits until the bound is set
	}
	win := makeWindow(limit, headLimit, &m.used)
	m.mu.Lock()
	if len(m.all) >= 2*m.live+1024 { // amortized: the list would grow with every job ever run
		m.compact()
	}
	m.all = append(m.all, weak.Make(win))
	m.mu.Unlock()
	return win
}

// compact drops, in place, the pointers of all whose windows are gone.
// Caller holds m.mu.
func (m *windowMemory) compact() {
	live := m.all[:0]
	for _, p := range m.all {
		if p.Value() != nil {
			live = append(live, p)
		}
	}
	clear(m.all[len(live):]) // let the dead pointers go
	m.all, m.live = live, len(live)
}

// enforceGCInterval spaces the garbage collections enforce asks for:
// windows of delivered jobs count until they are collected.
const enforceGCInterval = time.Second

// enforce keeps the windows within the bound: past it, it lets garbage go
// first, then drops the oldest bytes of the largest windows until they
// hold a tenth less than the bound. A pump calls it after each read; under
// the bound it costs two atomic loads.
func (m *windowMemory) enforce() {
	limit := m.limit.Load()
	if limit <= 0 || m.used.Load() <= limit {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.used.Load() <= limit {
		return // another pump got here first
	}
	if time.Since(m.lastGC) > enforceGCInterval {
		m.lastGC = time.Now()
		runtime.GC() // the windows of jobs already delivered go, and their counts with them
		if m.used.Load() <= limit {
			return
		}
	}
	m.compact()
	strong := make([]*window, 0, len(m.all))
	for _, p := range m.all {
		if w := p.Value(); w != nil {
			strong = append(strong, w)
		}
	}
	slices.SortFunc(strong, func(a, b *window) int { return cmp.Compare(b.held.bytes.Load(), a.held.bytes.Load()) })
	target := limit - limit/10
	for _, w := range strong {
		over := m.used.Load() - target
		if over <= 0 {
			break
		}
		w.dropOldest(over)
	}
}
