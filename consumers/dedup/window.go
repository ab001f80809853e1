// Package dedup decides which events of a Kafka partition are duplicates, from the partition's
// log alone and within a memory budget per partition.
//
// The rule: the event at offset o of a partition is a duplicate when a valid event carrying
// the same uuid sits at an offset in [o−W, o) of the same partition, where W is the window
// size in offsets. The decision is a function of the log, so a consumer that replays a range
// of offsets (after a crash, a rebalance, or a failed store) makes exactly the decisions it
// made the first time, and the stores' idempotent writes then make the replay change nothing.
// A producer's retry carries the uuid of its first attempt and the same message key, so it
// lands on the same partition, and it is caught when it is at most W offsets after the
// attempt it repeats.
//
// A Window holds the state of one partition: the uuid of each valid event among the last W
// offsets, about 24 bytes per offset once the window is full (16 for the uuid in a ring
// indexed by offset, 4 to 8 for a hash index), allocated as the window fills. Observations
// not yet committed can be undone (Rewind), so a consumer that prepared batches it did not
// store moves back to the committed offset without reading the log again.
package dedup

import (
	"errors"
	"fmt"
	"hash/maphash"
)

// MaxSize is the largest window, in offsets (the index stores ring slots as uint32).
const MaxSize = 1 << 30

// initialCap is the ring capacity of a new or reset window; it doubles up to the window size
// as offsets arrive, so a quiet partition holds little memory.
const initialCap = 1 << 12

// Window is the dedup state of one partition: the uuids of the valid events at the offsets
// in [Next()−Size(), Next()). It is not safe for concurrent use.
//
// Each uuid is held once, at the latest offset it was seen at: a duplicate moves its uuid's
// entry forward. That is enough for the rule, since any window that holds the earlier offset
// and ends after the later one holds the later one too, and it keeps every probe sequence of
// the index short whatever uuids the producers send.
type Window struct {
	size int64 // W, in offsets: a power of two
	next int64 // one past the last observed offset
	low  int64 // nothing below low is held (the offset of the last Reset or clear)

	// ring[o & (len(ring)−1)] is the uuid of the valid event at offset o, for o in
	// [max(low, next−len(ring)), next), when used[slot]. len(ring) is a power of two; it grows
	// up to W before the ring would wrap onto an offset still inside the window.
	ring [][16]byte
	used []bool
	// index is an open-addressing hash table (linear probing, seeded hash, at most half full)
	// of ring slots + 1 (0 = empty).
	index []uint32
	count int // uuids held
	seed  maphash.Seed

	// undo holds the observations at offsets >= committed that changed something, oldest
	// first, so Rewind can reverse them.
	undo      []change
	committed int64
}

// change is one observation, as Rewind needs it to reverse it.
type change struct {
	offset    int64
	id        [16]byte
	evictedID [16]byte // the uuid at offset − W that left the window, when evicted
	movedFrom int64    // offset id was held at before (a duplicate), or −1
	added     bool     // id was recorded at offset
	evicted   bool
}

// ErrNotAfter reports an observation at an offset below Next().
var ErrNotAfter = errors.New("dedup: offset observed out of order")

// NewWindow returns an empty window positioned at offset 0. Its size is size offsets rounded
// up to a power of two; size must be in [1, MaxSize].
func NewWindow(size int) (*Window, error) {
	if size < 1 || size > MaxSize {
		return nil, fmt.Errorf("dedup: window size %d outside [1, %d]", size, MaxSize)
	}
	w := &Window{size: ceilPow2(int64(size)), seed: maphash.MakeSeed()}
	w.Reset(0)
	return w, nil
}

// Size is the window size W, in offsets (a power of two).
func (w *Window) Size() int { return int(w.size) }

// Next is one past the last observed offset: the offset the window's state is as of.
func (w *Window) Next() int64 { return w.next }

// Reset forgets every uuid and positions the window at next (the offset observed next),
// releasing its memory. To rebuild the state as of offset c, reset to max(c−W, the log's
// first offset) and observe the log up to c.
func (w *Window) Reset(next int64) {
	c := min(int64(initialCap), w.size)
	w.ring = make([][16]byte, c)
	w.used = make([]bool, c)
	w.index = make([]uint32, 2*c)
	w.count = 0
	w.next, w.low, w.committed = next, next, next
	w.undo = nil
}

// Observe records offset o (>= Next()) and returns whether its event is a duplicate. valid
// says whether the message at o carries a valid event with uuid id; a message without one
// (malformed, or not an event) only advances the window and is never a duplicate. Offsets
// between Next() and o are passed over as holding no event.
func (w *Window) Observe(o int64, id [16]byte, valid bool) (dup bool, err error) {
	if o < w.next {
		return false, fmt.Errorf("%w: offset %d, window at %d", ErrNotAfter, o, w.next)
	}
	if o-w.next >= w.size {
		w.clearAll(o) // every uuid held leaves the window
	}
	for p := w.next; p < o; p++ {
		w.observe(p, [16]byte{}, false)
	}
	return w.observe(o, id, valid), nil
}

// Pass advances the window to c (>= Next()) over offsets that hold no event: after a rebuild
// that read the log up to c, whose last offsets were not events.
func (w *Window) Pass(c int64) error {
	if c == w.next {
		return nil
	}
	_, err := w.Observe(c-1, [16]byte{}, false)
	return err
}

func (w *Window) observe(o int64, id [16]byte, valid bool) (dup bool) {
	// Grow rather than wrap onto an offset still inside the window.
	for int64(len(w.ring)) < w.size && o-int64(len(w.ring)) >= w.low {
		w.grow()
	}
	ch := change{offset: o, id: id, movedFrom: -1}
	slot := int(o & int64(len(w.ring)-1))
	prev, found := -1, false
	if valid {
		// The window of o is [o−W, o): look up before o−W, which shares o's slot, leaves.
		prev, found = w.lookup(id)
		dup = found
	}
	if w.used[slot] && !(found && prev == slot) { // offset o − W leaves the window
		ch.evicted, ch.evictedID = true, w.ring[slot]
		w.removeIndex(w.ring[slot], slot)
		w.used[slot] = false
	}
	if found { // a duplicate: its uuid moves to o
		ch.movedFrom = w.offsetOfSlot(prev, o)
		w.removeIndex(id, prev)
		w.used[prev] = false
	}
	if valid {
		w.ring[slot], w.used[slot] = id, true
		w.insertIndex(id, slot)
		ch.added = true
	}
	w.next = o + 1
	if ch.added || ch.evicted {
		w.undo = append(w.undo, ch)
	}
	return dup
}

// offsetOfSlot is the offset held in slot, for a window about to observe o: the offset in
// [o−len(ring), o) congruent to slot.
func (w *Window) offsetOfSlot(slot int, o int64) int64 {
	n := int64(len(w.ring))
	return o - n + ((int64(slot)-o)%n+n)%n
}

// clearAll forgets every uuid and positions the window at o; nothing before o can be
// rewound to any more.
func (w *Window) clearAll(o int64) {
	clear(w.used)
	clear(w.index)
	w.count = 0
	w.next, w.low, w.committed = o, o, o
	w.undo = w.undo[:0]
}

// grow doubles the ring and re-indexes it.
func (w *Window) grow() {
	n := len(w.ring) * 2
	ring, used := make([][16]byte, n), make([]bool, n)
	oldMask, mask := int64(len(w.ring)-1), int64(n-1)
	for o := max(w.next-int64(len(w.ring)), w.low); o < w.next; o++ {
		if s := o & oldMask; w.used[s] {
			ring[o&mask], used[o&mask] = w.ring[s], true
		}
	}
	w.ring, w.used = ring, used
	w.index = make([]uint32, 2*n)
	w.count = 0
	for s := range w.ring {
		if w.used[s] {
			w.insertIndex(w.ring[s], s)
		}
	}
}

func (w *Window) hash(id [16]byte) int {
	return int(maphash.Comparable(w.seed, id) & uint64(len(w.index)-1))
}

// lookup returns the ring slot holding id.
func (w *Window) lookup(id [16]byte) (int, bool) {
	mask := len(w.index) - 1
	for i := w.hash(id); ; i = (i + 1) & mask {
		v := w.index[i]
		if v == 0 {
			return 0, false
		}
		if s := int(v - 1); w.ring[s] == id {
			return s, true
		}
	}
}

func (w *Window) insertIndex(id [16]byte, slot int) {
	mask := len(w.index) - 1
	i := w.hash(id)
	for w.index[i] != 0 {
		i = (i + 1) & mask
	}
	w.index[i] = uint32(slot + 1)
	w.count++
}

// removeIndex deletes the index entry of slot (which holds id) and shifts the later entries
// of its probe run back: deletion without tombstones for linear probing.
func (w *Window) removeIndex(id [16]byte, slot int) {
	mask := len(w.index) - 1
	i := w.hash(id)
	for w.index[i] != uint32(slot+1) {
		if w.index[i] == 0 {
			panic("dedup: index entry missing")
		}
		i = (i + 1) & mask
	}
	w.count--
	for j := i; ; {
		j = (j + 1) & mask
		v := w.index[j]
		if v == 0 {
			w.index[i] = 0
			return
		}
		// v may fill the hole at i unless its home slot lies cyclically in (i, j].
		home := w.hash(w.ring[v-1])
		if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
			w.index[i] = v
			i = j
		}
	}
}

// Commit drops what Rewind would need for offsets below c: the consumer committed them.
func (w *Window) Commit(c int64) {
	n := 0
	for n < len(w.undo) && w.undo[n].offset < c {
		n++
	}
	w.undo = append(w.undo[:0], w.undo[n:]...)
	w.committed = max(w.committed, min(c, w.next))
}

// Rewind reverses the observations at offsets >= c, so the window is as it was before it
// observed c, and reports true. It reports false and changes nothing when it cannot: c is
// beyond Next(), or below the last Commit or Reset (or an observation that cleared the
// window). The caller then resets the window and observes the log again.
func (w *Window) Rewind(c int64) bool {
	if c > w.next || c < w.committed {
		return false
	}
	k := len(w.undo)
	for k > 0 && w.undo[k-1].offset >= c {
		k--
	}
	for i := len(w.undo) - 1; i >= k; i-- {
		ch := w.undo[i]
		mask := int64(len(w.ring) - 1)
		slot := int(ch.offset & mask)
		if ch.added {
			w.removeIndex(ch.id, slot)
			w.used[slot] = false
			if ch.movedFrom >= 0 {
				s := int(ch.movedFrom & mask)
				w.ring[s], w.used[s] = ch.id, true
				w.insertIndex(ch.id, s)
			}
		}
		if ch.evicted { // the evicted offset shared the slot: offset − len(ring)
			w.ring[slot], w.used[slot] = ch.evictedID, true
			w.insertIndex(ch.evictedID, slot)
		}
	}
	w.undo = w.undo[:k]
	w.next = c
	return true
}

// Len is the number of uuids held.
func (w *Window) Len() int { return w.count }

// Bytes is the memory the window holds, in bytes.
func (w *Window) Bytes() int {
	return len(w.ring)*17 + len(w.index)*4 + cap(w.undo)*int(changeSize)
}

const changeSize = 56

func ceilPow2(n int64) int64 {
	p := int64(1)
	for p < n {
		p <<= 1
	}
	return p
}
