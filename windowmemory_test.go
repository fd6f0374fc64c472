package main

import (
	"runtime"
	"testing"
)

// TestWindowsStayWithinTheMemoryBound: past MCP_EXEC_MEMORY_LIMIT the
// oldest bytes of the largest windows go first; what is left reads exactly
// as before, and what went counts as dropped, with totals exact.
func TestWindowsStayWithinTheMemoryBound(t *testing.T) {
	t.Parallel()
	const bound = 4 << 20
	var m windowMemory // its own: other tests' windows do not count
	m.setLimit(bound)
	var windows []*window
	for i := 0; i < 20; i++ {
		windows = append(windows, m.newWindow(1<<20, 0))
	}
	chunk := make([]byte, 64<<10)
	for round := 0; round < 16; round++ { // 1 MiB into each, interleaved
		for _, w := range windows {
			_, total := w.stats()
			for k := range chunk {
				chunk[k] = byte((total + int64(k)) % 251)
			}
			_, _ = w.Write(chunk)
			m.enforce()
			if held := m.held(); held > bound+int64(len(windows))*windowChunkBytes {
				t.Fatalf("windows hold %d bytes, over the bound of %d", held, bound)
			}
		}
	}
	for i, w := range windows {
		s := w.readAll(0)
		if s.total != 1<<20 || s.offset+int64(len(s.data)) != s.total || (s.offset > 0) != s.truncated || s.dropped != s.offset {
			t.Fatalf("window %d: offset %d, %d bytes, total %d, truncated %v, dropped %d", i, s.offset, len(s.data), s.total, s.truncated, s.dropped)
		}
		for k, b := range s.data {
			if b != byte((s.offset+int64(k))%251) {
				t.Fatalf("window %d: byte at %d is %d", i, s.offset+int64(k), b)
			}
		}
	}
	runtime.KeepAlive(windows)
}

// TestMemoryBoundFreesFullRings: a full ring's oldest bytes share the chunk
// being written; the bound still frees the chunks after it (it freed
// nothing from full windows, and the bound was overrun).
func TestMemoryBoundFreesFullRings(t *testing.T) {
	t.Parallel()
	var m windowMemory
	var windows []*window
	for i := 0; i < 8; i++ {
		w := m.newWindow(1<<20, 0)
		_, _ = w.Write(make([]byte, 1500000)) // wrapped: the ring is full
		windows = append(windows, w)
	}
	m.setLimit(2 << 20)
	m.enforce()
	if held := m.held(); held > 2<<20 {
		t.Errorf("full windows hold %d bytes after the bound of %d", held, 2<<20)
	}
	for _, w := range windows {
		if s := w.readAll(0); s.total != 1500000 || s.offset+int64(len(s.data)) != s.total || !s.truncated {
			t.Errorf("offset %d, %d bytes, total %d", s.offset, len(s.data), s.total)
		}
	}
	runtime.KeepAlive(windows)
}

// TestWindowListForgetsDeadWindows: the memory bound's list of windows is
// compacted as windows are made, so it does not grow with every job ever
// run (it did, until a bound was hit).
func TestWindowListForgetsDeadWindows(t *testing.T) {
	t.Parallel()
	var m windowMemory
	for i := 0; i < 5000; i++ {
		_ = m.newWindow(1024, 0) // garbage at once
	}
	runtime.GC()
	for i := 0; i < 5000; i++ {
		_ = m.newWindow(1024, 0)
	}
	m.mu.Lock()
	n := len(m.all)
	m.mu.Unlock()
	if n > 8000 {
		t.Errorf("%d windows listed after 10,000 made and dropped", n)
	}
}
