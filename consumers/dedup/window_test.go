package dedup

import (
	"errors"
	"math/rand/v2"
	"slices"
	"testing"
)

// entry is one message of a model partition log.
type entry struct {
	id    [16]byte
	valid bool
}

// model is a partition log and the rule computed from it by brute force.
type model struct {
	log  map[int64]entry
	byID map[[16]byte][]int64 // offsets of each uuid's valid events, ascending
}

func newModel() *model { return &model{log: map[int64]entry{}, byID: map[[16]byte][]int64{}} }

// add appends the message at o, beyond every offset in the log.
func (m *model) add(o int64, e entry) {
	m.log[o] = e
	if e.valid {
		m.byID[e.id] = append(m.byID[e.id], o)
	}
}

// dup is the rule: the event at o is a duplicate when a valid event with its uuid sits at an
// offset in [o−w, o).
func (m *model) dup(o, w int64) bool {
	e := m.log[o]
	if !e.valid {
		return false
	}
	offs := m.byID[e.id]
	i, _ := slices.BinarySearch(offs, o-w)
	return i < len(offs) && offs[i] < o
}

// nextInLog returns the first offset of the log at or after next (a replay), or, past the
// log's end, the offset after its last one.
func nextInLog(offsets []int64, next int64) (o int64, replay bool) {
	i, _ := slices.BinarySearch(offsets, next)
	if i < len(offsets) {
		return offsets[i], true
	}
	if len(offsets) > 0 {
		return max(next, offsets[len(offsets)-1]+1), false
	}
	return next, false
}

func id(n int) [16]byte { return [16]byte{0x01, 15: byte(n), 14: byte(n >> 8)} }

// TestWindowMatchesTheRule drives windows of several sizes over random logs (few distinct
// uuids, so duplicates are common; gaps; invalid messages) with random commits, rewinds and
// rebuilds, and checks every decision against the rule computed from the log.
func TestWindowMatchesTheRule(t *testing.T) {
	for _, size := range []int{1, 2, 8, 64, 1 << 13} {
		for seed := range uint64(6) {
			rng := rand.New(rand.NewPCG(seed, uint64(size)))
			w, err := NewWindow(size)
			if err != nil {
				t.Fatal(err)
			}
			W := int64(w.Size())
			m := newModel()
			var offsets []int64 // offsets present in the log, ascending
			next := int64(0)
			ids := 1 + rng.IntN(int(4*W)+3)
			committed := int64(0)
			rewinds, rebuilds := 0, 0
			for step := 0; step < 20000; step++ {
				switch r := rng.IntN(100); {
				case r < 2 && next > committed: // commit a prefix
					c := committed + rng.Int64N(next-committed+1)
					w.Commit(c)
					committed = c
				case r < 5 && next > committed: // rewind to an uncommitted offset, then replay
					c := committed + rng.Int64N(next-committed+1)
					if !w.Rewind(c) {
						t.Fatalf("size %d seed %d: Rewind(%d) refused (committed %d, next %d)", size, seed, c, committed, w.Next())
					}
					rewinds++
					next = c
				case r < 6 && next > 0: // lose the state; rebuild from the log's last W offsets
					c := rng.Int64N(next + 1)
					w.Reset(max(c-W, 0))
					for _, o := range offsets {
						if o >= max(c-W, 0) && o < c {
							if _, err := w.Observe(o, m.log[o].id, m.log[o].valid); err != nil {
								t.Fatal(err)
							}
						}
					}
					if err := w.Pass(c); err != nil {
						t.Fatal(err)
					}
					rebuilds++
					next, committed = c, c
				default: // the next message: replayed from the log, or appended to it
					o, replay := nextInLog(offsets, next)
					if !replay && rng.IntN(20) == 0 {
						o += 1 + rng.Int64N(2*W+2) // a gap
					}
					e, ok := m.log[o]
					if !ok {
						e = entry{id: id(rng.IntN(ids)), valid: rng.IntN(10) != 0}
						m.add(o, e)
						offsets = append(offsets, o)
					}
					if o-next >= W {
						committed = o // a gap of a whole window clears it: no rewind before o
					}
					dup, err := w.Observe(o, e.id, e.valid)
					if err != nil {
						t.Fatal(err)
					}
					if want := m.dup(o, W); dup != want {
						t.Fatalf("size %d seed %d step %d: offset %d dup = %v, rule says %v", size, seed, step, o, dup, want)
					}
					next = o + 1
				}
			}
			t.Logf("size %d seed %d: %d offsets, %d rewinds, %d rebuilds, %d uuids held, %d bytes", size, seed, len(offsets), rewinds, rebuilds, w.Len(), w.Bytes())
		}
	}
}

func TestWindowRefusals(t *testing.T) {
	if _, err := NewWindow(0); err == nil {
		t.Error("NewWindow(0) accepted")
	}
	if _, err := NewWindow(MaxSize + 1); err == nil {
		t.Error("NewWindow(MaxSize+1) accepted")
	}
	w, _ := NewWindow(100)
	if w.Size() != 128 {
		t.Errorf("Size() = %d, want 100 rounded up to 128", w.Size())
	}
	if _, err := w.Observe(5, id(1), true); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Observe(5, id(1), true); !errors.Is(err, ErrNotAfter) {
		t.Errorf("observing offset 5 twice: %v, want ErrNotAfter", err)
	}
	w.Commit(6)
	if w.Rewind(5) {
		t.Error("Rewind below the committed offset accepted")
	}
	if w.Rewind(7) {
		t.Error("Rewind beyond Next accepted")
	}
}

// TestWindowReplayMakesTheSameDecisions is the property the consumer relies on: observing a
// range, rewinding to its start (a batch prepared but not stored) and observing it again
// gives the same decisions.
func TestWindowReplayMakesTheSameDecisions(t *testing.T) {
	w, _ := NewWindow(16)
	rng := rand.New(rand.NewPCG(7, 7))
	var log []entry
	for range 200 {
		log = append(log, entry{id: id(rng.IntN(20)), valid: true})
	}
	first := make([]bool, len(log))
	for o, e := range log[:150] {
		first[o], _ = w.Observe(int64(o), e.id, e.valid)
	}
	w.Commit(100)
	if !w.Rewind(100) {
		t.Fatal("Rewind(100) refused")
	}
	for o := 100; o < 150; o++ {
		dup, _ := w.Observe(int64(o), log[o].id, log[o].valid)
		if dup != first[o] {
			t.Fatalf("offset %d: replay says dup=%v, first pass %v", o, dup, first[o])
		}
	}
}

// TestWindowMemoryIsBounded fills a window far past its size with distinct uuids: it holds
// at most W of them, in at most about 24 bytes each plus the undo log since the last commit.
func TestWindowMemoryIsBounded(t *testing.T) {
	w, _ := NewWindow(1 << 12)
	for o := range int64(1 << 16) {
		var u [16]byte
		u[0], u[1], u[2] = byte(o), byte(o>>8), byte(o>>16)
		if dup, _ := w.Observe(o, u, true); dup {
			t.Fatalf("offset %d: distinct uuid reported as a duplicate", o)
		}
		if o%1000 == 0 {
			w.Commit(o)
		}
	}
	if w.Len() != 1<<12 {
		t.Errorf("Len() = %d, want the window size %d", w.Len(), 1<<12)
	}
	if b := w.Bytes(); b > (1<<12)*25+1100*changeSize*2 {
		t.Errorf("Bytes() = %d for a full window of %d", b, 1<<12)
	}
}

// FuzzWindow checks the rule on logs the fuzzer chooses: each byte pair is one message (uuid
// number, and flags: invalid, gap, rewind).
func FuzzWindow(f *testing.F) {
	f.Add(uint8(4), []byte{1, 0, 1, 0, 2, 0, 1, 4, 1, 0})
	f.Add(uint8(1), []byte{3, 0, 3, 0, 3, 2, 3, 0})
	f.Fuzz(func(t *testing.T, size uint8, data []byte) {
		w, err := NewWindow(int(size%64) + 1)
		if err != nil {
			t.Fatal(err)
		}
		W := int64(w.Size())
		m := newModel()
		var offsets []int64
		next, committed := int64(0), int64(0)
		for i := 0; i+1 < len(data); i += 2 {
			n, flags := data[i], data[i+1]
			if flags&4 != 0 && next > 0 { // rewind a few offsets and replay them
				c := max(next-int64(n%4)-1, committed)
				if !w.Rewind(c) {
					t.Fatalf("Rewind(%d) refused", c)
				}
				next = c
			}
			o, replay := nextInLog(offsets, next)
			if !replay && flags&2 != 0 {
				o += int64(n % 8)
			}
			e, ok := m.log[o]
			if !ok {
				e = entry{id: id(int(n % 16)), valid: flags&1 == 0}
				m.add(o, e)
				offsets = append(offsets, o)
			}
			if o-next >= W {
				committed = o
			}
			dup, err := w.Observe(o, e.id, e.valid)
			if err != nil {
				t.Fatal(err)
			}
			if want := m.dup(o, W); dup != want {
				t.Fatalf("offset %d: dup = %v, rule says %v", o, dup, want)
			}
			next = o + 1
		}
	})
}

// BenchmarkObserve is the cost of one event in a full window of 2^20 offsets (the default).
func BenchmarkObserve(b *testing.B) {
	w, _ := NewWindow(1 << 20)
	rng := rand.New(rand.NewPCG(1, 2))
	var u [16]byte
	b.ReportAllocs()
	for i := range b.N {
		binaryPut(&u, rng.Uint64(), rng.Uint64())
		w.Observe(int64(i), u, true)
		if i%50000 == 0 {
			w.Commit(int64(i))
		}
	}
}

func binaryPut(u *[16]byte, a, b uint64) {
	for i := range 8 {
		u[i], u[8+i] = byte(a>>(8*i)), byte(b>>(8*i))
	}
}
