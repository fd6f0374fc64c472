package main

import (
	"math"
	"os"
	"sync/atomic"
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
// descriptor reaches it, and it goes when that is closed. Its window's mu
// guards every field: all its methods run under it.
type spillFile struct {
	store      *spillStore
	f          *os.File // nil until the first byte spills, and after close
	start, end int64
	closed     bool
	block      []byte // the last block read for byteAt
	blockAt    int64  // its offset; -1: none
}

// write appends b, the stream's bytes from offset end on, then gives up
// its oldest bytes past the bounds. A file that cannot be made or written
// keeps nothing more: its bytes count as dropped, as a window's. Caller
// holds the window's mu.
func (sp *spillFile) write(b []byte) {
	if !sp.closed && sp.f == nil {
		f, err := openUnlinked(sp.store.dir)
		if err != nil {
			logf("spill: %v; the stream's oldest bytes are dropped instead", err)
			sp.closed = true
		} else {
			sp.f, sp.blockAt = f, -1
		}
	}
	if sp.closed {
		sp.end += int64(len(b))
		sp.start = sp.end
		return
	}
	if _, err := sp.f.WriteAt(b, sp.end); err != nil {
		logf("spill: %v; the stream's oldest bytes are dropped instead", err)
		sp.close()
		sp.end += int64(len(b))
		sp.start = sp.end
		return
	}
	sp.end += int64(len(b))
	sp.store.used.Add(int64(len(b)))
	sp.store.recheck(int64(len(b)))
	sp.bound()
}

// bound gives up the oldest bytes past the stream's bound and the
// server's: a quarter of a bound at a time, so holes are punched seldom.
// Past the server's, this stream gives up its own bytes, all of them if
// need be.
func (sp *spillFile) bound() {
	per := sp.store.streamBytes
	if per > 0 && sp.end-sp.start > per {
		sp.giveUp(sp.end - per + per/4)
	}
	limit := sp.store.limit.Load()
	if over := sp.store.used.Load() - limit; over > 0 {
		sp.giveUp(min(sp.start+max(over, limit/4), sp.end))
	}
}

// giveUp drops the kept bytes before upTo and frees their blocks.
func (sp *spillFile) giveUp(upTo int64) {
	if upTo <= sp.start {
		return
	}
	n := min(upTo, sp.end) - sp.start
	if n > 0 {
		sp.store.used.Add(-n)
		if sp.f != nil {
			// Failing to free the blocks loses nothing that is still
			// reachable; the space comes back when the file is closed.
			_ = punchHole(sp.f, sp.start, n)
		}
	}
	sp.start = upTo
	if sp.blockAt >= 0 && sp.blockAt < upTo {
		sp.blockAt = -1
	}
}

// kept is the range the file still holds.
func (sp *spillFile) kept() (start, end int64) { return sp.start, sp.end }

// readAt copies the kept bytes at offset at into b. A read that fails
// leaves zeros and is logged: the bytes are on a disk that failed.
func (sp *spillFile) readAt(b []byte, at int64) {
	if sp.f == nil {
		clear(b)
		return
	}
	if _, err := sp.f.ReadAt(b, at); err != nil {
		clear(b)
		logf("spill: read %d bytes at %d: %v", len(b), at, err)
	}
}

// byteAt is the kept byte at offset p, read a block at a time.
func (sp *spillFile) byteAt(p int64) byte {
	if sp.blockAt < 0 || p < sp.blockAt || p >= sp.blockAt+int64(len(sp.block)) {
		from := max(sp.start, p-spillReadBytes/2)
		to := min(sp.end, from+spillReadBytes)
		if cap(sp.block) < spillReadBytes {
			sp.block = make([]byte, spillReadBytes)
		}
		sp.block = sp.block[:to-from]
		sp.readAt(sp.block, from)
		sp.blockAt = from
	}
	return sp.block[p-sp.blockAt]
}

// close closes the file, which goes with it, and gives its bytes back to
// the server's bound. The stream keeps nothing more on disk.
func (sp *spillFile) close() {
	sp.giveUp(sp.end)
	sp.closed, sp.block = true, nil
	if sp.f != nil {
		_ = sp.f.Close() // an unlinked file: closing it is removing it
		sp.f = nil
	}
}
