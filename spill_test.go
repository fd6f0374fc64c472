package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// ---------------------------------------------------------------------------
// spill.go, and the window reading through its spill
// ---------------------------------------------------------------------------

// spillWindow is a window of limit bytes (and headLimit kept first bytes)
// that spills into a fresh store in a test directory, bounded per stream
// by streamBytes and in all by limit (0: no bound).
func spillWindow(t *testing.T, limit, headLimit int, streamBytes, all int64) (*window, *spillStore) {
	t.Helper()
	store := &spillStore{}
	store.configure(t.TempDir(), false, streamBytes, all)
	w := makeWindow(limit, headLimit, new(atomic.Int64))
	w.spillTo(store.forStream())
	t.Cleanup(func() { dropAndAwaitClosed(t, w) })
	return w, store
}

// dropAndAwaitClosed drops w's spill and waits until its writer closed the
// file and ended.
func dropAndAwaitClosed(t *testing.T, w *window) {
	t.Helper()
	w.dropSpill()
	awaitFlushed(t, w.spill)
	if w.spill.f != nil {
		t.Error("the spill file is still open after its writer ended")
	}
}

// awaitFlushed waits until sp's writer has nothing left to do, nor is due
// to start.
func awaitFlushed(t *testing.T, sp *spillFile) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		sp.mu.Lock()
		busy := sp.flushing || sp.lingering
		sp.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the spill's writer is still at work after 20 s")
		}
		time.Sleep(time.Millisecond)
	}
}

// numberedLines is the output of `seq 1 n`.
func numberedLines(n int) []byte {
	var b bytes.Buffer
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	return b.Bytes()
}

// writeInPieces writes all to w in pieces of random sizes, through both of
// its writers: Write, and reserve and commit as a pump uses them.
func writeInPieces(w *window, all []byte, rng *rand.Rand) {
	for len(all) > 0 {
		n := min(len(all), 1+rng.IntN(3*windowChunkBytes))
		if rng.IntN(2) == 0 {
			if room := w.reserve(n); room != nil {
				k := copy(room, all[:min(n, len(room))])
				w.commit(k)
				all = all[k:]
				continue
			}
		}
		_, _ = w.Write(all[:n])
		all = all[n:]
	}
}

// TestWindowSpillReadsEveryByte: with spill, every read form reaches every
// byte ever written, at its offset, as if the window held them all, though
// the ring holds a fraction of them.
func TestWindowSpillReadsEveryByte(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(1, 2))
	all := numberedLines(200000) // 1.3 MB through a 200 KB ring
	w, _ := spillWindow(t, 200<<10, 0, 1<<30, 0)
	writeInPieces(w, all, rng)
	total := int64(len(all))

	a := w.readAll(0)
	if a.offset != 0 || a.truncated || a.dropped != 0 || !bytes.Equal(a.data, all) {
		t.Fatalf("readAll: offset %d truncated %v dropped %d, %d of %d bytes", a.offset, a.truncated, a.dropped, len(a.data), total)
	}
	for range 200 {
		from := rng.Int64N(total)
		length := rng.Int64N(100 << 10)
		s := w.readRange(from, length, true, 0)
		want := all[from:min(total, from+length)]
		if s.offset != from || s.truncated || !bytes.Equal(s.data, want) {
			t.Fatalf("readRange(%d, %d): offset %d truncated %v, data differs", from, length, s.offset, s.truncated)
		}
	}
	tail := w.readTail(150000, 0) // lines 50001..200000: mostly spilled
	if want := all[bytes.Index(all, []byte("\n50001\n"))+1:]; tail.truncated || !bytes.Equal(tail.data, want) {
		t.Fatalf("readTail: offset %d truncated %v, %d bytes, want %d", tail.offset, tail.truncated, len(tail.data), len(want))
	}
	ends := w.readAll(4096) // a cut read: its gap is exact, its ends from the spill and the ring
	if ends.offset != 0 || !bytes.Equal(ends.data, all[:len(ends.data)]) || !bytes.Equal(ends.tail, all[ends.tailOffset:]) ||
		ends.omitted != ends.tailOffset-int64(len(ends.data)) {
		t.Fatalf("cut readAll: data %d bytes, gap %d at %d, tail at %d", len(ends.data), ends.omitted, len(ends.data), ends.tailOffset)
	}
}

// TestWindowSpillGrepsEveryLine: a grep from the start finds a line only
// the spill holds, at its offset, and says nothing was dropped.
func TestWindowSpillGrepsEveryLine(t *testing.T) {
	t.Parallel()
	all := numberedLines(100000)
	w, _ := spillWindow(t, 64<<10, 0, 1<<30, 0)
	writeInPieces(w, all, rand.New(rand.NewPCG(3, 4)))
	g := grepWindow(w, &grepSpec{re: regexp.MustCompile("^1234$"), max: 5}, true, 1<<20)
	g.showDropped()
	at := int64(bytes.Index(all, []byte("\n1234\n")) + 1)
	if len(g.Matches) != 1 || g.Matches[0].Offset != at || g.MatchCount != 1 || *g.Dropped != 0 || g.Note != "" {
		t.Fatalf("grep: %+v dropped %d note %q; want one match at %d, nothing dropped", g.Matches, *g.Dropped, g.Note, at)
	}
}

// TestWindowSpillBoundCountsDroppedAsTheWindowDoes: past the per-stream
// bound the oldest spilled bytes go, in quarters of the bound, and reads
// count what they asked for that is gone exactly as 1.0 counts a window's.
func TestWindowSpillBoundCountsDroppedAsTheWindowDoes(t *testing.T) {
	t.Parallel()
	const ring, bound = 64 << 10, 256 << 10
	all := numberedLines(200000)
	total := int64(len(all))
	w, store := spillWindow(t, ring, 0, bound, 0)
	writeInPieces(w, all, rand.New(rand.NewPCG(5, 6)))
	first, _ := w.stats()
	if first < total-ring-bound || first > total-ring-bound+bound/4 {
		t.Fatalf("oldest byte kept at %d of %d; want within a quarter bound after %d", first, total, total-ring-bound)
	}
	if used := store.used.Load(); used > bound {
		t.Fatalf("the store counts %d bytes kept; the bound is %d", used, bound)
	}
	for _, tc := range []struct{ from, length, dropped int64 }{{0, 10, 10}, {first - 5, 10, 5}, {first, 10, 0}, {first - 100, -1, 100}} {
		s := w.readRange(tc.from, tc.length, true, 0)
		if s.dropped != tc.dropped || s.truncated != (tc.dropped > 0) || s.offset != max(tc.from, first) ||
			!bytes.Equal(s.data, all[s.offset:s.offset+int64(len(s.data))]) {
			t.Errorf("readRange(%d, %d): offset %d dropped %d truncated %v; want dropped %d", tc.from, tc.length, s.offset, s.dropped, s.truncated, tc.dropped)
		}
	}
	g := grepWindow(w, &grepSpec{re: regexp.MustCompile("^1$"), max: 5}, true, 1<<20)
	g.showDropped()
	if g.MatchCount != 0 || *g.Dropped != first || !strings.Contains(g.Note, fmt.Sprintf("before offset %d cannot be seen", first)) {
		t.Fatalf("grep past the bound: count %d dropped %d note %q; want dropped %d and a sentence", g.MatchCount, *g.Dropped, g.Note, first)
	}
}

// TestSpillLimitIsServerWide: streams of one store keep no more than its
// limit together, though each is under its own bound.
func TestSpillLimitIsServerWide(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	store := &spillStore{}
	store.configure(t.TempDir(), false, 1<<30, limit)
	all := numberedLines(100000)
	for i := range 3 {
		w := makeWindow(32<<10, 0, new(atomic.Int64))
		w.spillTo(store.forStream())
		defer dropAndAwaitClosed(t, w)
		writeInPieces(w, all, rand.New(rand.NewPCG(7, uint64(i))))
		if used := store.used.Load(); used > limit {
			t.Fatalf("after stream %d the store keeps %d bytes; its limit is %d", i, used, limit)
		}
		first, _ := w.stats()
		if s := w.readRange(first, -1, true, 0); !bytes.Equal(s.data, all[first:]) {
			t.Fatalf("stream %d: what is kept from %d is not the stream's bytes", i, first)
		}
	}
	if store.used.Load() == 0 {
		t.Fatal("nothing was kept: the limit was never reached")
	}
}

// TestWindowSpillKeepsWhatTheMemoryBoundFrees: bytes the memory bound takes
// out of the ring are spilled first, so nothing is lost to it either.
func TestWindowSpillKeepsWhatTheMemoryBoundFrees(t *testing.T) {
	t.Parallel()
	all := numberedLines(100000)
	w, _ := spillWindow(t, 512<<10, 0, 1<<30, 0)
	_, _ = w.Write(all[:400<<10])
	w.dropOldest(256 << 10)
	if held := w.held.bytes.Load(); held > 200<<10 {
		t.Fatalf("the ring still holds %d bytes after dropOldest", held)
	}
	_, _ = w.Write(all[400<<10:])
	if a := w.readAll(0); a.offset != 0 || a.dropped != 0 || !bytes.Equal(a.data, all) {
		t.Fatalf("readAll after the memory bound: offset %d dropped %d, %d bytes of %d", a.offset, a.dropped, len(a.data), len(all))
	}
}

// TestDropSpillGivesItsBytesBack: a forgotten job's spill closes its file
// and gives its bytes back to the server's count; reads then see them
// dropped, as the ring's.
func TestDropSpillGivesItsBytesBack(t *testing.T) {
	t.Parallel()
	all := numberedLines(50000)
	w, store := spillWindow(t, 16<<10, 0, 1<<30, 0)
	_, _ = w.Write(all)
	awaitFlushed(t, w.spill)
	if store.used.Load() == 0 || w.spill.f == nil {
		t.Fatal("nothing spilled")
	}
	dropAndAwaitClosed(t, w)
	if used, queued := store.used.Load(), store.queued.Load(); used != 0 || queued != 0 {
		t.Fatalf("the store still counts %d bytes kept, %d queued", used, queued)
	}
	want := int64(len(all)) - 16<<10
	if s := w.readRange(0, 10, true, 0); s.dropped != 10 || s.offset != want {
		t.Fatalf("after dropSpill: offset %d dropped %d; want the ring's start %d and 10 dropped", s.offset, s.dropped, want)
	}
	_, _ = w.Write(all[:100]) // a closed spill takes nothing more, and breaks nothing
	if start, total := w.stats(); total-start != 16<<10 {
		t.Fatalf("after a write to a closed spill the window holds [%d, %d)", start, total)
	}
}

// TestSpillFileHasNoName: a spill file is mode 0600 and has no link: no
// path reaches it, so no job can open it by a name.
func TestSpillFileHasNoName(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	f, err := openUnlinked(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode().Perm() != 0o600 || st.Nlink != 0 {
		t.Fatalf("spill file: mode %o, %d links; want 0600 and none", fi.Mode().Perm(), st.Nlink)
	}
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("the spill directory lists %v", names)
	}
}

// TestSpillDirIsPrivateAndOutsideTheRoots: auto's directory is the
// server's own (0700) and never under MCP_EXEC_ROOTS, even when the first
// base is.
func TestSpillDirIsPrivateAndOutsideTheRoots(t *testing.T) {
	t.Parallel()
	root, other := t.TempDir(), t.TempDir()
	inside := filepath.Join(root, "tmp")
	if err := os.Mkdir(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := spillDir([]string{inside, other}, []string{root})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(dir) != other || fi.Mode().Perm() != 0o700 {
		t.Fatalf("spill directory %s mode %o; want one of %s's own, 0700", dir, fi.Mode().Perm(), other)
	}
	if _, err := spillDir([]string{inside}, []string{root}); err == nil || !strings.Contains(err.Error(), "MCP_EXEC_SPILL") {
		t.Fatalf("every base inside the roots: %v; want a refusal naming MCP_EXEC_SPILL", err)
	}
}

// TestSpillSettings: spill is auto under the agent profile and off
// outside it; a directory inside the roots and malformed sizes are refused
// with what is allowed.
func TestSpillSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env   []string
		spill string
	}{{nil, spillOff}, {[]string{"MCP_EXEC_PROFILE=agent"}, spillAuto}, {[]string{"MCP_EXEC_PROFILE=agent", "MCP_EXEC_SPILL=off"}, spillOff}} {
		c, err := loadConfig(tc.env)
		if err != nil || c.spill != tc.spill || c.spillBytes != 1<<30 || c.spillLimit != memoryLimitAuto {
			t.Errorf("%v: spill %q bytes %d limit %d (%v); want %q, 1 GiB, auto", tc.env, c.spill, c.spillBytes, c.spillLimit, err, tc.spill)
		}
	}
	root := t.TempDir()
	for _, tc := range []struct {
		kv      []string
		mention string
	}{
		{[]string{"MCP_EXEC_SPILL=" + root, "MCP_EXEC_ROOTS=" + root}, "inside MCP_EXEC_ROOTS"},
		{[]string{"MCP_EXEC_SPILL=/no/such/dir"}, "auto, off or an existing directory"},
		{[]string{"MCP_EXEC_SPILL_BYTES=lots"}, "size of at least 1"},
		{[]string{"MCP_EXEC_SPILL_BYTES=0"}, "size of at least 1"},
		{[]string{"MCP_EXEC_SPILL_LIMIT=-1"}, "auto, 0 or a size"},
	} {
		name, _, _ := strings.Cut(tc.kv[0], "=")
		if _, err := loadConfig(tc.kv); err == nil || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%v: %v; want an error naming %s and %q", tc.kv, err, name, tc.mention)
		}
	}
}

// TestSpillWriteNeverWaitsForTheDisk: a disk that does not answer slows no
// job: writes queue in memory up to the bound, then the oldest queued bytes
// go (counted as dropped); what is queued is readable before it reaches
// the file, and after.
func TestSpillWriteNeverWaitsForTheDisk(t *testing.T) {
	t.Parallel()
	release := make(chan struct{}) // closed: the disk answers again
	store := &spillStore{queueBytes: 1 << 20}
	store.configure(t.TempDir(), false, 1<<30, 0)
	store.writeAt = func(f *os.File, b []byte, at int64) error {
		<-release
		_, err := f.WriteAt(b, at)
		return err
	}
	w := makeWindow(64<<10, 0, new(atomic.Int64))
	w.spillTo(store.forStream())
	t.Cleanup(func() { dropAndAwaitClosed(t, w) })
	all := numberedLines(1000000) // 6.9 MB
	wrote := make(chan struct{})  // closed when every Write returned
	go func() {
		writeInPieces(w, all, rand.New(rand.NewPCG(9, 10)))
		close(wrote)
	}()
	select {
	case <-wrote:
	case <-time.After(20 * time.Second):
		close(release)
		t.Fatal("writing to the window waited for the disk")
	}
	total := int64(len(all))
	first, _ := w.stats()
	if kept := total - 64<<10 - first; kept < 1<<20-2*spillBlockBytes || kept > 1<<20 {
		t.Errorf("%d bytes kept past the window with a 1 MiB queue and a stuck disk", kept)
	}
	check := func(when string) {
		s := w.readRange(0, -1, true, 0)
		if s.offset != first || s.dropped != first || !bytes.Equal(s.data, all[first:]) {
			t.Fatalf("%s: offset %d dropped %d, %d bytes; want everything from %d", when, s.offset, s.dropped, len(s.data), first)
		}
	}
	check("queued")
	close(release)
	awaitFlushed(t, w.spill)
	if q := store.queued.Load(); q != 0 {
		t.Fatalf("%d bytes still queued after the writer ended", q)
	}
	check("written")
}

// TestSpillWriteErrorDropsAsTheWindowWould: a disk that fails (full)
// costs the spilled bytes, counted as dropped as 1.0 counts a window's,
// and nothing else: the window keeps working and the store's counts go
// back to 0.
func TestSpillWriteErrorDropsAsTheWindowWould(t *testing.T) {
	t.Parallel()
	store := &spillStore{}
	store.configure(t.TempDir(), false, 1<<30, 0)
	store.writeAt = func(*os.File, []byte, int64) error { return syscall.ENOSPC }
	w := makeWindow(64<<10, 0, new(atomic.Int64))
	w.spillTo(store.forStream())
	t.Cleanup(func() { dropAndAwaitClosed(t, w) })
	all := numberedLines(300000)
	writeInPieces(w, all, rand.New(rand.NewPCG(11, 12)))
	awaitFlushed(t, w.spill)
	writeInPieces(w, all[:1000], rand.New(rand.NewPCG(13, 14))) // after the failure, too
	all = append(all, all[:1000]...)
	total := int64(len(all))
	s := w.readRange(0, -1, true, 0)
	if s.offset != total-64<<10 || s.dropped != s.offset || !bytes.Equal(s.data, all[s.offset:]) {
		t.Fatalf("after a failed spill: offset %d dropped %d; want the window's %d bytes, the rest dropped", s.offset, s.dropped, 64<<10)
	}
	if used, queued := store.used.Load(), store.queued.Load(); used != 0 || queued != 0 {
		t.Fatalf("the store counts %d bytes kept and %d queued after the failure", used, queued)
	}
}
