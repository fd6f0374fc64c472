package main

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// windowChunkBytes is the unit a window allocates once its stream shows
// volume. Chunks are never copied while the job lives, so a filling window
// makes no garbage; they are freed only to keep all windows within the
// memory bound (windowMemory.enforce).
const windowChunkBytes = 64 << 10

// A chunk handed to the spill is replaced by one of its blocks: both
// sizes must be one (each line fails to compile when it would be negative).
const (
	_ = uint(windowChunkBytes - spillBlockBytes)
	_ = uint(spillBlockBytes - windowChunkBytes)
)

// window keeps the last limit bytes one stream wrote, addressed by absolute
// byte offsets from the start of the stream. Its storage grows with what the
// stream actually wrote, so a quiet stream costs nothing, and becomes a ring
// once it reaches limit. All methods are safe for concurrent use; readers get
// copies, never the internal storage.
type window struct {
	limit     int  // maximum retained bytes, fixed at creation
	headLimit int  // the stream's first bytes kept even after the ring moves on
	masks     bool // its bytes come masked: slices count the markers (set before the first write)

	// mu guards the fields below it, but for held (set at creation, its
	// count atomic). It is taken while the windowMemory's mu is held
	// (enforce calls dropOldest), so nothing under it takes that lock.
	mu sync.Mutex
	// chunks hold the ring: ring position q (the byte at absolute offset p
	// has q = p % limit) lives in chunks[q/windowChunkBytes]. A chunk is
	// allocated when first written; only the first grows gradually.
	chunks [][]byte
	total  int64 // bytes ever written
	lines  int64 // newlines ever written
	// hidden is how many of the oldest retained bytes a reservation is
	// about to overwrite; readers do not see them until the commit.
	hidden int64
	// reserved is the storage handed out by reserve, until commit.
	reserved []byte
	// head holds the stream's first bytes, up to headLimit: [0, len(head)).
	head []byte
	// floor is where the memory bound cut the stream: bytes before it were
	// dropped early, as the ring drops bytes, and are counted as dropped.
	floor int64
	held  *windowHeld // the bytes its chunks hold, for the memory bound
	// spill, when not nil, takes every byte before the ring overwrites or
	// frees it, so readers reach the bytes it still keeps as if the ring
	// held them: the window's reachable start is the spill's.
	spill *spillFile
}

// windowHeld counts one window's chunk bytes. It lives apart from the
// window, so the window's cleanup can subtract them once it is garbage.
type windowHeld struct {
	bytes atomic.Int64  // chunk bytes the window holds now
	all   *atomic.Int64 // what every window counted with it holds (its windowMemory's)
}

// makeWindow returns an empty window that retains at most the last limit
// bytes, and also the first headLimit bytes (0: none), and counts its chunk
// bytes into all (not nil) too, for as long as it lives. Jobs' windows
// come from newWindow, which also bounds them.
func makeWindow(limit, headLimit int, all *atomic.Int64) *window {
	if limit < 1 {
		limit = 1
	}
	win := &window{limit: limit, headLimit: max(headLimit, 0), held: &windowHeld{all: all}}
	// Garbage holds nothing: when the window goes, so does its count.
	runtime.AddCleanup(win, func(h *windowHeld) { h.all.Add(-h.bytes.Load()) }, win.held)
	return win
}

// spillTo makes the window give the bytes that leave its ring to sp
// instead of dropping them (nil: drop them). Call it before the first
// write.
func (w *window) spillTo(sp *spillFile) {
	if sp == nil {
		return
	}
	w.mu.Lock()
	w.spill = sp
	w.mu.Unlock()
	// A window nobody reads any more takes its file with it; dropSpill
	// closes it sooner when its job is forgotten.
	runtime.AddCleanup(w, func(sp *spillFile) { sp.close() }, sp)
}

// dropSpill closes the window's spill: what it kept is dropped, as if the
// ring had overwritten it, and its file goes.
func (w *window) dropSpill() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.spill != nil {
		w.spill.close()
	}
}

// spillUpTo gives the spill the ring's bytes from where it ends up to
// offset to, before the ring overwrites or frees them. Caller holds w.mu.
func (w *window) spillUpTo(to int64) {
	sp := w.spill
	if sp == nil {
		return
	}
	for _, from := sp.kept(); from < to; {
		q := int(from % int64(w.limit))
		c := w.chunks[q/windowChunkBytes][q%windowChunkBytes:]
		c = c[:min(int64(len(c)), to-from)]
		sp.write(c)
		from += int64(len(c))
	}
}

// keepHead copies what of p, written at absolute offset at, falls in the
// head. Caller holds w.mu.
func (w *window) keepHead(at int64, p []byte) {
	if at >= int64(w.headLimit) || at != int64(len(w.head)) {
		return
	}
	w.head = append(w.head, p[:min(len(p), w.headLimit-len(w.head))]...)
	if len(w.head) == w.headLimit {
		// Full: it never grows again, so it must not end inside a
		// character. Shorter by a few bytes, it stops being at its limit,
		// and the check above keeps it from growing: at != len(head).
		w.head = trimPartialRune(w.head)
	}
}

// Write appends p to the stream, dropping the oldest bytes beyond the limit.
// It never fails and never blocks on anything but the window's own lock.
func (w *window) Write(p []byte) (int, error) {
	n := len(p)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepHead(w.total, p)
	w.lines += int64(bytes.Count(p, newline))
	if len(p) > w.limit && w.spill == nil {
		// Only the last limit bytes can survive; skip the rest outright.
		w.total += int64(len(p) - w.limit)
		p = p[len(p)-w.limit:]
	}
	for len(p) > 0 {
		room := w.room(int(w.total%int64(w.limit)), len(p))
		w.spillUpTo(w.total + int64(min(len(room), len(p))) - int64(w.limit))
		c := copy(room, p)
		p = p[c:]
		w.total += int64(c)
	}
	return n, nil
}

// room returns the storage from ring position q to the end of its chunk,
// allocating or growing the chunk so it can take up to want bytes.
// Caller holds w.mu.
func (w *window) room(q, want int) []byte {
	i, off := q/windowChunkBytes, q%windowChunkBytes
	for len(w.chunks) <= i {
		w.chunks = append(w.chunks, nil)
	}
	c := w.chunks[i]
	full := min(windowChunkBytes, w.limit-i*windowChunkBytes)
	if len(c) < full && off+want > len(c) {
		size := full
		if i == 0 { // a stream that wrote little so far gets little memory
			size = min(full, max(2*len(c), off+want, 256))
		}
		grown := make([]byte, size)
		copy(grown, c)
		w.account(int64(size - len(c)))
		w.chunks[i], c = grown, grown
	}
	return c[off:]
}

// slice is one answer to a read: the raw bytes of [offset, offset+len(data))
// plus the accounting a client needs to page on.
type slice struct {
	data      []byte
	offset    int64 // absolute offset of data[0]
	total     int64 // bytes the stream ever wrote
	truncated bool  // the request reached into dropped bytes
	dropped   int64 // requested bytes that were already dropped

	// A slice with a gap (the kept head, then the window; or a read too big
	// for its reply, of which only the ends were copied) also has the bytes
	// after the gap; omitted counts the bytes between the two, and cut how
	// many of those are still retained but were not copied.
	omitted    int64
	tail       []byte
	tailOffset int64
	cut        int64
}

// copyEnds fills s with [from, to): all of it, or, when that is longer than
// 2*limit bytes (limit > 0), only its first and last limit bytes, cut on
// character boundaries, with the gap between them. A reply can never carry
// more than limit bytes of a stream, so a big window is not copied whole
// only to be cut. Caller holds w.mu.
func (w *window) copyEnds(s *slice, from, to, limit int64) {
	s.offset = from
	if limit <= 0 || to-from <= 2*limit {
		s.data = w.copyRange(from, to)
		return
	}
	s.data = trimPartialRune(w.copyRange(from, from+limit))
	s.tail, s.tailOffset = w.copyTail(to-limit, to)
	s.omitted = s.tailOffset - (from + int64(len(s.data)))
	s.cut = s.omitted
}

// copyTail copies [from, to) without the bytes at its start that continue a
// character begun before from.
func (w *window) copyTail(from, to int64) ([]byte, int64) {
	b := w.copyRange(from, to)
	rest := skipContinuation(b)
	return rest, from + int64(len(b)-len(rest))
}

// skipContinuation drops the bytes at the start of b that continue a
// character begun before it.
func skipContinuation(b []byte) []byte {
	skip := 0
	for skip < len(b) && skip < utf8.UTFMax-1 && !utf8.RuneStart(b[skip]) {
		skip++
	}
	return b[skip:]
}

// trimPartialRune drops an incomplete character from the end of b.
func trimPartialRune(b []byte) []byte {
	for k := 1; k < utf8.UTFMax && k <= len(b); k++ {
		if utf8.RuneStart(b[len(b)-k]) {
			if !utf8.FullRune(b[len(b)-k:]) {
				return b[:len(b)-k]
			}
			break
		}
	}
	return b
}

// span returns the range [start, total) the ring and its spill retain,
// under the caller's lock.
func (w *window) span() (start, total int64) {
	start = w.ringStart()
	if sp := w.spill; sp != nil {
		if kept, end := sp.kept(); end >= start {
			start = min(start, kept)
		}
	}
	return start, w.total
}

// ringStart is the oldest byte the ring itself retains. Caller holds w.mu.
func (w *window) ringStart() int64 {
	return max(max(0, w.total-int64(w.limit))+w.hidden, w.floor)
}

// contiguous returns the start of the longest retained range that ends at
// total: the ring's start, or 0 when the kept head reaches the ring. Caller
// holds w.mu.
func (w *window) contiguous() (from, total int64) {
	start, total := w.span()
	if int64(len(w.head)) >= start {
		return 0, total
	}
	return start, total
}

// reserve returns storage for the next bytes of the stream, at most max, so
// a pump can read straight into the window instead of copying. It returns
// nil while the window is still small (Write grows it then). The oldest
// bytes the storage overlaps are hidden from readers until commit. One
// writer at a time: every reserve must be followed by commit before the next
// reserve or Write.
func (w *window) reserve(max int) []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	q := int(w.total % int64(w.limit))
	i, off := q/windowChunkBytes, q%windowChunkBytes
	full := min(windowChunkBytes, w.limit-i*windowChunkBytes)
	if i == 0 && (len(w.chunks) == 0 || len(w.chunks[0]) < full) {
		return nil // the first chunk grows with the stream: no big storage yet
	}
	c := w.room(q, full-off)
	c = c[:min(len(c), max)]
	if w.total >= int64(w.limit) {
		oldest := w.total - int64(w.limit) // the byte at ring position q
		if sp := w.spill; sp != nil && off == 0 && sp.endsAt(oldest) {
			// The whole chunk holds the oldest bytes: it goes to the spill
			// as it is, and fresh storage takes its place. The bytes after
			// the reservation are then the spill's to serve: the floor.
			if end := oldest + int64(len(w.chunks[i])); end > w.floor {
				w.floor = end // (max is this function's argument)
			}
			w.chunks[i] = sp.take(w.chunks[i])
			c = w.chunks[i][:len(c)]
		} else {
			w.spillUpTo(oldest + int64(len(c)))
		}
		w.hidden = int64(len(c))
	}
	w.reserved = c
	return c
}

// commit records that n bytes were written into the reserved storage and
// shows readers the window again.
func (w *window) commit(n int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.keepHead(w.total, w.reserved[:n])
	w.lines += int64(bytes.Count(w.reserved[:n], newline))
	w.total += int64(n)
	w.hidden, w.reserved = 0, nil
}

// newline is what a line ends with, for counting lines.
var newline = []byte{'\n'}

// streamEnds is a stream at one moment: copies of its first and last
// retained bytes, and its totals.
type streamEnds struct {
	first    []byte // [0, len(first))
	last     []byte // [lastFrom, total)
	lastFrom int64
	total    int64 // bytes ever written
	lines    int64 // newlines ever written
}

// ends copies, under one lock, up to the first head bytes and the last
// tail bytes the window retains, with the stream's totals: so counts and
// text always agree. Bytes no longer retained are simply left out.
func (w *window) ends(head, tail int64) streamEnds {
	w.mu.Lock()
	defer w.mu.Unlock()
	lo, total := w.contiguous()
	firstEnd := min(head, total)
	if lo > 0 {
		firstEnd = min(firstEnd, int64(len(w.head)))
	}
	lastFrom := max(total-tail, lo, 0)
	return streamEnds{first: w.copyRange(0, firstEnd), last: w.copyRange(lastFrom, total), lastFrom: lastFrom,
		total: total, lines: w.lines}
}

// at returns the retained byte at absolute offset p, from the spill or the
// head when the ring no longer holds it. Caller holds w.mu and guarantees p
// is retained.
func (w *window) at(p int64) byte {
	if start, _ := w.span(); p < start {
		return w.head[p]
	}
	if p < w.ringStart() {
		return w.spill.byteAt(p)
	}
	q := int(p % int64(w.limit))
	return w.chunks[q/windowChunkBytes][q%windowChunkBytes]
}

// copyRange copies the retained bytes [from, to) out of the head, the
// spill and the ring.
// Caller holds w.mu and guarantees start <= from <= to <= total.
func (w *window) copyRange(from, to int64) []byte {
	out := make([]byte, to-from)
	n := 0
	if start, _ := w.span(); from < start { // from the head
		n = copy(out, w.head[from:min(to, start)])
		from += int64(n)
	}
	if ring := w.ringStart(); from < min(to, ring) { // from the spill
		k := min(to, ring) - from
		w.spill.readAt(out[n:n+int(k)], from)
		n += int(k)
		from += k
	}
	for from < to {
		q := int(from % int64(w.limit))
		c := w.chunks[q/windowChunkBytes][q%windowChunkBytes:]
		k := copy(out[n:], c[:min(len(c), int(to-from))])
		n += k
		from += int64(k)
	}
	return out
}

// readRange serves {"from", "length"} (length < 0 means to the end). Unless
// unaligned, the range widens so no UTF-8 character is split at either edge.
func (w *window) readRange(from, length int64, unaligned bool, limit int64) slice {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, total := w.contiguous()
	s := slice{total: total}
	from = max(from, 0)
	// start > 0 here means a gap after the kept head: start is the ring's.
	if headEnd := int64(len(w.head)); from < start && from < headEnd {
		// Served from the kept head, up to its end at most; what the range
		// asked for beyond it, up to the window, is dropped.
		if end := from + length; length < 0 || end > headEnd {
			if length < 0 {
				end = start
			}
			s.dropped = min(end, start) - headEnd
			s.truncated = s.dropped > 0
		}
		start, total = 0, headEnd
	} else if from < start {
		// dropped counts the requested bytes that are gone; the read
		// still serves length bytes from the oldest retained one.
		s.dropped = start - from
		if length >= 0 && length < s.dropped {
			s.dropped = length
		}
		s.truncated = s.dropped > 0
		from = start
	}
	from = min(from, total)
	to := total
	if length >= 0 && length < total-from {
		to = from + length
	}
	if !unaligned {
		from, to = w.align(from, to, start, total)
	}
	w.copyEnds(&s, from, to, limit)
	return s
}

// readAll serves "all": the whole retained window, and the kept head before
// it as a slice with a gap when the window has moved past the head.
func (w *window) readAll(limit int64) slice {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, total := w.contiguous()
	s := slice{total: total, truncated: start > 0, dropped: start}
	headEnd := int64(len(w.head))
	if start == 0 || headEnd == 0 {
		w.copyEnds(&s, start, total, limit)
		return s
	}
	copied := headEnd
	if limit > 0 && headEnd > limit {
		copied = limit // a reply carries no more of it; the rest joins the gap
	}
	s.data, s.offset = trimPartialRune(w.copyRange(0, copied)), 0
	s.dropped = start - headEnd
	tailFrom := start
	if limit > 0 && total-start > limit {
		tailFrom = total - limit
	}
	s.tail, s.tailOffset = w.copyTail(tailFrom, total)
	s.omitted = s.tailOffset - int64(len(s.data))
	s.cut = s.tailOffset - start + headEnd - int64(len(s.data))
	return s
}

// readTail serves {"tail": n}: the last n lines of the retained window, line
// endings kept; an unterminated last line counts as a line. Asking for more
// lines than the window holds after it dropped its head is a truncated read.
func (w *window) readTail(n int64, limit int64) slice {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, total := w.contiguous()
	if n <= 0 {
		return slice{offset: total, total: total}
	}
	p := total
	if p > start && w.at(p-1) == '\n' {
		p-- // the final newline ends the last line; it does not start one
	}
	for ; p > start; p-- {
		if w.at(p-1) == '\n' {
			if n--; n == 0 {
				break
			}
		}
	}
	s := slice{total: total}
	if n > 0 { // fewer lines than asked for: p is at start
		s.truncated, s.dropped = start > 0, start
	}
	w.copyEnds(&s, p, total, limit)
	return s
}

// align widens [from, to) to whole UTF-8 characters inside [start, total):
// from moves back to the first byte of the character it points into, to moves
// forward past the last byte of the character it cuts. Bytes that do not form
// a valid character are left where they are. Caller holds w.mu.
func (w *window) align(from, to, start, total int64) (int64, int64) {
	empty := to == from
	if lead, _ := w.charAround(from, start, total); lead < from {
		from = lead
	}
	if empty {
		return from, from
	}
	if lead, size := w.charAround(to, start, total); lead < to {
		to = lead + size
	}
	return from, to
}

// charAround finds the valid UTF-8 character that contains offset p with p
// not on its first byte, and returns its first byte and size. When p is on a
// character boundary (or inside invalid bytes) it returns (p, 0).
func (w *window) charAround(p, start, total int64) (int64, int64) {
	if p <= start || p >= total || utf8.RuneStart(w.at(p)) {
		return p, 0
	}
	for lead := p - 1; lead >= start && lead > p-utf8.UTFMax; lead-- {
		if !utf8.RuneStart(w.at(lead)) {
			continue
		}
		r, size := utf8.DecodeRune(w.copyRange(lead, min(total, lead+utf8.UTFMax)))
		if r == utf8.RuneError && size <= 1 || lead+int64(size) <= p {
			return p, 0
		}
		return lead, int64(size)
	}
	return p, 0
}

// heldIn is how many bytes of [from, to) w still holds: in its kept head,
// its ring or its spill.
func (w *window) heldIn(from, to int64) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	start, total := w.span()
	overlap := func(a, b int64) int64 { return max(min(b, to)-max(a, from), 0) }
	if head := int64(len(w.head)); head < start {
		return overlap(0, head) + overlap(start, total)
	}
	return overlap(0, total) // the head reaches the ring
}

// stats returns the retained range without copying anything.
func (w *window) stats() (start, total int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.span()
}

// serveWithin reads what spec selects, copying only the first and last
// limit bytes of a bigger range (limit 0: everything).
func (w *window) serveWithin(spec streamSpec, limit int64) slice {
	switch spec.kind {
	case streamAll:
		return w.readAll(limit)
	case streamTail:
		return w.readTail(spec.tail, limit)
	case streamRange:
		return w.readRange(spec.from, spec.length, spec.unaligned, limit)
	}
	_, total := w.stats()
	return slice{offset: total, total: total}
}

// account adds delta to what the window, and all windows counted with it,
// hold. Caller holds w.mu.
func (w *window) account(delta int64) {
	w.held.bytes.Add(delta)
	w.held.all.Add(delta)
}

// dropOldest frees up to want bytes of the window's oldest chunks, never
// the one being written, and moves its floor past them: readers then see
// those bytes as dropped, exactly as bytes the ring overwrote.
func (w *window) dropOldest(want int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.reserved != nil {
		return // a pump is writing into the ring: next time
	}
	start, total := w.ringStart(), w.total
	limit := int64(w.limit)
	writing := int(total % limit / windowChunkBytes)
	floor := start
	var freed int64
	for first := true; freed < want && floor < total; first = false {
		p := floor % limit
		i := int(p / windowChunkBytes)
		if i >= len(w.chunks) {
			break
		}
		if i == writing && !first {
			break // around the ring to the newest bytes
		}
		floor = min(floor+min(int64(i+1)*windowChunkBytes, limit)-p, total)
		w.spillUpTo(floor) // what the memory bound frees is spilled first
		// A full ring's oldest bytes may share the chunk being written: they
		// go, the chunk stays.
		if c := w.chunks[i]; c != nil && i != writing {
			freed += int64(len(c))
			w.chunks[i] = nil
		}
	}
	w.floor = max(w.floor, floor)
	w.account(-freed)
}
