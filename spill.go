package main

import (
	"math"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// spillStore is where the bytes that leave the windows go when spill is on
// (MCP_EXEC_SPILL): one private directory per process, a bound per stream
// and one for the whole server. The zero value spills nothing.
type spillStore struct {
	dir         string // where the streams' files are made; "" spills nothing
	ownDir      bool   // dir was made by the server (auto), and goes at shutdown
	streamBytes int64  // MCP_EXEC_SPILL_BYTES: what one stream keeps at most
	autoLimit   bool   // the limit follows the free space where dir is

	limit   atomic.Int64 // bytes every stream's file may keep together
	used    atomic.Int64 // bytes every stream's file keeps now
	written atomic.Int64 // bytes written since the free space was last read
	queued  atomic.Int64 // bytes waiting in memory for their writer, every stream's

	// queueBytes bounds queued (0: spillQueueBytes); writeAt writes a
	// block (nil: the file's WriteAt). Tests set them, before any write.
	queueBytes int64
	writeAt    func(f *os.File, b []byte, at int64) error
}

// spillQueueBytes is how much may wait in memory for a disk slower than
// the jobs writing, all streams together; past it a stream gives up its
// oldest waiting bytes rather than slow its job.
const spillQueueBytes = 64 << 20

// spillBlockBytes is the most one queued block holds: a window's chunk
// (window.go checks they are equal), so a chunk handed over (take) and a
// block take each other's place.
const spillBlockBytes = 64 << 10

// spillFreeBlocks is how many written blocks are kept for reuse: a pool
// the collector empties would have every block of a fast stream
// allocated, and faulted in, anew.
const spillFreeBlocks = 256

// spillBlocks carries blocks free for reuse, at most spillFreeBlocks.
var spillBlocks = make(chan *[spillBlockBytes]byte, spillFreeBlocks)

// newSpillBlock is a free block: a reused one, or a new one.
func newSpillBlock() *[spillBlockBytes]byte {
	select {
	case b := <-spillBlocks:
		return b
	default:
		return new([spillBlockBytes]byte)
	}
}

// spillRecheckBytes is how much is spilled between two reads of the free
// space under an automatic limit.
const spillRecheckBytes = 64 << 20

// spillReadBytes is the block a spilled stream's byte-at-a-time reads
// (a tail's walk back over lines) are served from.
const spillReadBytes = 64 << 10

// configure makes the store spill into dir (made, private, when own),
// keeping at most streamBytes per stream and limit bytes in all (0: no
// bound; below 0: a quarter of the free space where dir is, read now and as
// it fills). Call it once, before the first window is made.
func (s *spillStore) configure(dir string, own bool, streamBytes, limit int64) {
	s.dir, s.ownDir, s.streamBytes = dir, own, streamBytes
	switch {
	case limit < 0:
		s.autoLimit = true
		limit = freeBytes(dir) / 4
	case limit == 0:
		limit = math.MaxInt64
	}
	s.limit.Store(limit)
}

// remove removes the server's own directory; for shutdown. The files in it
// have no names, so it is empty.
func (s *spillStore) remove() {
	if s.ownDir && s.dir != "" {
		_ = os.Remove(s.dir) // best effort: an empty leftover directory holds nothing
	}
}

// forStream returns the spill of one new stream, or nil when spill is off.
func (s *spillStore) forStream() *spillFile {
	if s.dir == "" {
		return nil
	}
	return &spillFile{store: s}
}

// recheck lowers or raises the automatic limit to a quarter of the space
// that would be free without what the spill keeps, every
// spillRecheckBytes written.
func (s *spillStore) recheck(n int64) {
	if !s.autoLimit || s.written.Add(n) < spillRecheckBytes {
		return
	}
	s.written.Store(0)
	s.limit.Store((freeBytes(s.dir) + s.used.Load()) / 4)
}

// spillFile holds the bytes one stream's window let go, at their stream
// offsets: the file's byte p is the stream's byte p, and [start, end) is
// what it still keeps (the bytes before start were given up to a bound; on
// Linux their blocks are freed). The file has no name: only the server's
// descriptor reaches it, and it goes when that is closed.
//
// A write only queues the bytes in memory: a goroutine of the file's own
// (flush) makes the file, writes them and frees given-up blocks, so a job
// is never slowed by the disk, and no system call is made under a lock.
type spillFile struct {
	store *spillStore

	// mu guards the fields below. It is taken under the window's mu, and
	// nothing is taken under it; the flusher never holds it across a
	// system call but a reader's pread.
	mu         sync.Mutex
	start, end int64
	queued     []spillBlock // the bytes [written, end), oldest first, not yet in the file
	written    int64        // the bytes before it are in the file, or given up
	punched    int64        // the blocks before it are freed
	f          *os.File     // nil until flush made it, and after it closed it
	closed     bool         // keeps nothing more; flush closes the file
	flushing   bool         // a flush goroutine is at work
	lingering  bool         // a kick is due
	block      []byte       // the last block read for byteAt
	blockAt    int64        // its offset; -1: none
}

// spillBlock is bytes of the stream from offset at, queued for the file.
type spillBlock struct {
	at int64
	b  []byte // a pooled block's, or a window chunk handed over (take)
}

// end is the stream offset just past b.
func (b spillBlock) end() int64 { return b.at + int64(len(b.b)) }

// recycle gives b's storage back to the pool, when it has a block's size.
func (b spillBlock) recycle() {
	if cap(b.b) == spillBlockBytes {
		select {
		case spillBlocks <- (*[spillBlockBytes]byte)(b.b[:spillBlockBytes]):
		default: // enough kept: the collector takes it
		}
	}
}

// write queues b, the stream's next bytes, for the file, and gives up the
// oldest kept bytes past the bounds. It never waits for the disk.
func (sp *spillFile) write(b []byte) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		sp.end += int64(len(b))
		sp.start, sp.written, sp.punched = sp.end, sp.end, sp.end
		return
	}
	for len(b) > 0 {
		buf := newSpillBlock()
		n := copy(buf[:], b)
		b = b[n:]
		sp.queue(buf[:n])
	}
}

// take queues chunk, the stream's next bytes, as it is, and returns
// storage of the same length for the window to use in its place: the
// window's oldest chunk goes to the file without a copy. Caller holds the
// window's mu.
func (sp *spillFile) take(chunk []byte) []byte {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.closed {
		sp.end += int64(len(chunk))
		sp.start, sp.written, sp.punched = sp.end, sp.end, sp.end
		return chunk
	}
	sp.queue(chunk)
	return newSpillBlock()[:len(chunk)]
}

// queue appends b, whose storage it now owns, to what flush writes.
// Caller holds sp.mu.
func (sp *spillFile) queue(b []byte) {
	sp.queued = append(sp.queued, spillBlock{at: sp.end, b: b})
	sp.end += int64(len(b))
	sp.store.used.Add(int64(len(b)))
	sp.store.queued.Add(int64(len(b)))
	sp.bound()
	switch {
	case sp.flushing:
	case sp.end-sp.written >= spillBatchBytes:
		sp.flushing = true
		go sp.flush()
	case !sp.lingering:
		// A few bytes wait a moment for more: one writer's run then
		// writes a batch, instead of a goroutine woken per block.
		sp.lingering = true
		time.AfterFunc(spillLingerDuration, sp.kick)
	}
}

// spillBatchBytes is how much a stream queues before its writer starts at
// once; less waits spillLingerDuration.
const spillBatchBytes = 16 * spillBlockBytes

// spillLingerDuration is how long queued bytes short of a batch wait.
const spillLingerDuration = 50 * time.Millisecond

// kick starts the writer for what lingered in the queue.
func (sp *spillFile) kick() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.lingering = false
	if !sp.flushing && (len(sp.queued) > 0 || sp.closed && sp.f != nil) {
		sp.flushing = true
		go sp.flush()
	}
}

// endsAt reports whether the spill holds the stream up to offset p.
func (sp *spillFile) endsAt(p int64) bool {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.end == p
}

// bound gives up the oldest bytes past the stream's bound and the
// server's: a quarter of a bound at a time, so holes are punched seldom.
// Past the server's, this stream gives up its own bytes, all of them if
// need be. Past what may wait in memory, it gives up its oldest waiting
// bytes: the disk is slower than the job, and the job must not wait.
// Caller holds sp.mu.
func (sp *spillFile) bound() {
	per := sp.store.streamBytes
	if per > 0 && sp.end-sp.start > per {
		sp.giveUp(sp.end - per + per/4)
	}
	limit := sp.store.limit.Load()
	if over := sp.store.used.Load() - limit; over > 0 {
		sp.giveUp(min(sp.start+max(over, limit/4), sp.end))
	}
	most := sp.store.queueBytes
	if most <= 0 {
		most = spillQueueBytes
	}
	for sp.store.queued.Load() > most && len(sp.queued) > 1 {
		sp.giveUp(sp.queued[0].end())
	}
}

// giveUp drops the kept bytes before upTo, and the queued blocks that hold
// nothing else; flush frees their blocks in the file. Caller holds sp.mu.
func (sp *spillFile) giveUp(upTo int64) {
	if upTo <= sp.start {
		return
	}
	upTo = min(upTo, sp.end)
	sp.store.used.Add(-(upTo - sp.start))
	sp.start = upTo
	drop := 0
	for drop < len(sp.queued) && sp.queued[drop].end() <= upTo {
		sp.store.queued.Add(-int64(len(sp.queued[drop].b)))
		drop++
	}
	// Not back to the pool: flush may be writing the first of them.
	sp.queued = sp.queued[drop:]
	sp.written = max(sp.written, min(upTo, sp.end))
	if len(sp.queued) > 0 {
		sp.written = min(sp.written, sp.queued[0].at)
	}
	if sp.blockAt >= 0 && sp.blockAt < upTo {
		sp.blockAt = -1
	}
}

// flush is the file's writer: it makes the file, writes the queued blocks
// in order, frees the blocks of given-up bytes and, once the spill is
// closed, closes the file; it ends when nothing is left to do.
func (sp *spillFile) flush() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	for {
		if sp.closed {
			if f := sp.f; f != nil {
				sp.f = nil
				sp.mu.Unlock()
				_ = f.Close() // an unlinked file: closing it removes it
				sp.mu.Lock()
			}
			sp.flushing = false
			return
		}
		if sp.f == nil {
			sp.mu.Unlock()
			f, err := openUnlinked(sp.store.dir)
			sp.mu.Lock()
			if err != nil {
				sp.fail(err)
				continue
			}
			sp.f, sp.blockAt = f, -1
		}
		if to := min(sp.start, sp.written); sp.punched < to {
			from, f := sp.punched, sp.f
			sp.punched = to
			sp.mu.Unlock()
			// Failing to free the blocks loses nothing still reachable;
			// the space comes back when the file is closed.
			_ = punchHole(f, from, to-from)
			sp.mu.Lock()
			continue
		}
		if len(sp.queued) == 0 {
			sp.flushing = false
			return
		}
		blk, f := sp.queued[0], sp.f
		sp.mu.Unlock()
		err := sp.store.write(f, blk.b, blk.at)
		sp.store.recheck(int64(len(blk.b)))
		sp.mu.Lock()
		if err != nil {
			sp.fail(err)
			continue
		}
		if len(sp.queued) > 0 && sp.queued[0].at == blk.at {
			sp.queued = sp.queued[1:]
			sp.store.queued.Add(-int64(len(blk.b)))
		}
		sp.written = max(sp.written, blk.end())
		if len(sp.queued) > 0 {
			sp.written = min(sp.written, sp.queued[0].at)
		}
		blk.recycle() // no reader holds it: they copy under mu
	}
}

// write writes b at offset at of f.
func (s *spillStore) write(f *os.File, b []byte, at int64) error {
	if s.writeAt != nil {
		return s.writeAt(f, b, at)
	}
	_, err := f.WriteAt(b, at)
	return err
}

// fail gives up everything after a file error: the stream keeps nothing
// more on disk, its bytes count as dropped, as a window's, and flush
// closes the file. Caller holds sp.mu, which it lets go to say so on
// stderr.
func (sp *spillFile) fail(err error) {
	sp.closeLocked()
	sp.mu.Unlock()
	logf("spill: %v; the stream's oldest bytes are dropped instead", err)
	sp.mu.Lock()
}

// kept is the range the spill still holds.
func (sp *spillFile) kept() (start, end int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return sp.start, sp.end
}

// readAt copies the kept bytes at offset at into b: from the file, or from
// the queue for what is not written yet. A read that fails leaves zeros
// and is logged: the bytes are on a disk that failed.
func (sp *spillFile) readAt(b []byte, at int64) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.readLocked(b, at)
}

// readLocked is readAt for a caller holding sp.mu.
func (sp *spillFile) readLocked(b []byte, at int64) {
	if k := min(int64(len(b)), sp.written-at); k > 0 {
		sp.pread(b[:k], at)
		b, at = b[k:], at+k
	}
	i := sort.Search(len(sp.queued), func(i int) bool { return sp.queued[i].end() > at })
	for ; len(b) > 0 && i < len(sp.queued); i++ {
		blk := sp.queued[i]
		k := copy(b, blk.b[at-blk.at:])
		b, at = b[k:], at+int64(k)
	}
	clear(b) // past the end: the caller asked for what is not kept
}

// pread reads b at offset at of the file.
func (sp *spillFile) pread(b []byte, at int64) {
	if sp.f == nil {
		clear(b)
		return
	}
	if _, err := sp.f.ReadAt(b, at); err != nil {
		clear(b)
		// Said by another goroutine: the caller holds locks.
		go logf("spill: read %d bytes at %d: %v", len(b), at, err)
	}
}

// byteAt is the kept byte at offset p, read a block at a time.
func (sp *spillFile) byteAt(p int64) byte {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.blockAt < 0 || p < sp.blockAt || p >= sp.blockAt+int64(len(sp.block)) {
		from := max(sp.start, p-spillReadBytes/2)
		to := min(sp.end, from+spillReadBytes)
		if cap(sp.block) < spillReadBytes {
			sp.block = make([]byte, spillReadBytes)
		}
		sp.block = sp.block[:to-from]
		sp.readLocked(sp.block, from)
		sp.blockAt = from
	}
	return sp.block[p-sp.blockAt]
}

// close gives up what the spill keeps and has its file closed, which
// removes it. The stream keeps nothing more on disk. It makes no system
// call: any lock may be held.
func (sp *spillFile) close() {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	sp.closeLocked()
}

// closeLocked is close for a caller holding sp.mu.
func (sp *spillFile) closeLocked() {
	sp.giveUp(sp.end)
	sp.closed, sp.block = true, nil
	if !sp.flushing && sp.f != nil {
		sp.flushing = true
		go sp.flush()
	}
}
