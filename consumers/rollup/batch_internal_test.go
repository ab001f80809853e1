package rollup

import (
	"fmt"
	"hash/maphash"
	"runtime"
	"slices"
	"testing"
	"time"
)

// cellsOf lists a batch's cells of table t in stream s as key → values.
func cellsOf(b *Batch, s Stream, t *Table) map[string][]uint64 {
	out := map[string][]uint64{}
	sb := b.streams[s]
	if sb == nil || sb.cells[t.index] == nil {
		return out
	}
	m := sb.cells[t.index]
	for i := range int32(m.len()) {
		out[string(m.keyAt(i))] = slices.Clone(m.at(i))
	}
	return out
}

// TestBatchCellsKeepTheirOwnValues adds to many cells of a wide table (so that the values
// array is reallocated several times) and merges two batches in, against sums kept
// independently: every cell holds exactly what was added to it, wherever it sits in the array.
func TestBatchCellsKeepTheirOwnValues(t *testing.T) {
	s := NewStore(nil, Tables(), 0, nil)
	st := Stream{Topic: "t", Partition: 3}
	h := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	width := ToolCallStats.width()
	want := map[string][]uint64{}
	var kb KeyBuilder
	add := func(b *Batch, cell, n int) {
		key := kb.Reset(h).String(fmt.Sprintf("tool-%d", cell)).String("client").String("server").String("1.0")
		vals := make([]uint64, width)
		for j := range vals {
			vals[j] = uint64(cell*1000 + j + n)
		}
		b.Add(st, ToolCallStats, key, vals...)
		k := string(key.bytes())
		if want[k] == nil {
			want[k] = make([]uint64, width)
		}
		for j, v := range vals {
			want[k][j] += v
		}
	}
	a, b := s.NewBatch(), s.NewBatch()
	for n := range 3 {
		for cell := range 300 {
			add(a, cell, n)
		}
	}
	for cell := 200; cell < 500; cell++ { // 100 cells in both, 200 only in b
		add(b, cell, 7)
	}
	a.Advance(st, 41)
	b.Advance(st, 99)
	// c holds a table a lacks (a takes c's cells over) and ends before a: the merged batch
	// still ends at b's end.
	c := s.NewBatch()
	var ekb KeyBuilder
	c.Add(st, EventsByName, ekb.Reset(h).String("$pageview"), 5)
	c.Add(st, EventsByName, ekb.Reset(h).String("$pageview"), 2)
	c.Advance(st, 7)
	a.Merge(b)
	a.Merge(c)

	if a.Len() != 501 {
		t.Errorf("Len() = %d, want 501 cells", a.Len())
	}
	if got := a.streams[st].next; got != 100 {
		t.Errorf("next offset = %d, want 100 (one past the merged batch's last)", got)
	}
	if got := cellsOf(a, st, EventsByName)[string(ekb.bytes())]; !slices.Equal(got, []uint64{7}) {
		t.Errorf("events_by_name cell = %v, want [7]", got)
	}
	got := cellsOf(a, st, ToolCallStats)
	if len(got) != len(want) {
		t.Fatalf("%d cells, want %d", len(got), len(want))
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("cell %q = %v, want %v", k[8:], got[k], w)
		}
	}
}

// TestACachedGroupKeepsEachCellsTotalsAndOffset sets cells of a cache group again and again:
// each keeps its own newest totals and offset.
func TestACachedGroupKeepsEachCellsTotalsAndOffset(t *testing.T) {
	g := newGroup(2, 0)
	h := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var kb KeyBuilder
	key := func(i int) Key { return Key(kb.Reset(h).String(fmt.Sprint(i)).bytes()) }
	for round := range 3 {
		for i := range 100 {
			added := g.set(key(i), []uint64{uint64(i), uint64(round)}, int64(round*100+i))
			if added != (round == 0) {
				t.Fatalf("round %d, cell %d: added = %v", round, i, added)
			}
		}
	}
	for i := range 100 {
		vals, asOf := g.get(key(i))
		if !slices.Equal(vals, []uint64{uint64(i), 2}) || asOf != int64(200+i) {
			t.Errorf("cell %d = %v as of %d, want [%d 2] as of %d", i, vals, asOf, i, 200+i)
		}
	}
	if vals, asOf := g.get(key(100)); vals != nil || asOf != 0 {
		t.Errorf("a cell never set = %v as of %d, want none", vals, asOf)
	}
}

// Two keys whose hashes collide keep their own cells: the second goes to the set's collided
// keys, and both are found, as bytes and as strings, with their own values. (The collision
// is made by pointing the second key's hash at the first key's position before it is added.)
func TestCellSetKeysWhoseHashesCollideKeepTheirOwnCells(t *testing.T) {
	c := newCellSet(2)
	a, b := []byte("hour|tool-a"), []byte("hour|tool-b")
	ia, added := c.cell(a)
	if !added || ia != 0 {
		t.Fatalf("first key: position %d, added %v; want 0, true", ia, added)
	}
	c.index[maphash.Bytes(cellSeed, b)] = ia // b's hash now names a's cell
	ib, added := c.cell(b)
	if !added || ib != 1 {
		t.Fatalf("colliding key: position %d, added %v; want 1, true", ib, added)
	}
	if got := c.collided[string(b)]; got != ib || len(c.collided) != 1 {
		t.Fatalf("collided keys %v, want only %q at %d", c.collided, b, ib)
	}
	c.at(ia)[0], c.at(ib)[1] = 5, 7
	for _, tc := range []struct {
		key  []byte
		pos  int32
		vals []uint64
	}{{a, ia, []uint64{5, 0}}, {b, ib, []uint64{0, 7}}} {
		if i, ok, _ := c.find(tc.key); !ok || i != tc.pos {
			t.Errorf("find(%q) = %d, %v; want %d, true", tc.key, i, ok, tc.pos)
		}
		if i, ok, _ := c.findKey(Key(tc.key)); !ok || i != tc.pos {
			t.Errorf("findKey(%q) = %d, %v; want %d, true", tc.key, i, ok, tc.pos)
		}
		if i, added := c.cell(tc.key); added || i != tc.pos {
			t.Errorf("cell(%q) again = %d, added %v; want %d, false", tc.key, i, added, tc.pos)
		}
		if got := c.at(tc.pos); !slices.Equal(got, tc.vals) {
			t.Errorf("values of %q = %v, want %v", tc.key, got, tc.vals)
		}
		if got := c.keyAt(tc.pos); string(got) != string(tc.key) {
			t.Errorf("key at %d = %q, want %q", tc.pos, got, tc.key)
		}
	}
	if _, ok, _ := c.find([]byte("hour|tool-c")); ok {
		t.Error("find reports a key the set never held")
	}
	// A third key whose hash is the first key's too, not in the set: not found.
	d := []byte("hour|tool-d")
	c.index[maphash.Bytes(cellSeed, d)] = ia
	if i, ok, _ := c.find(d); ok {
		t.Errorf("find reports a colliding key the set never held, at %d", i)
	}
	if i, ok, _ := c.findKey(Key(d)); ok {
		t.Errorf("findKey reports a colliding key the set never held, at %d", i)
	}
	delete(c.index, maphash.Bytes(cellSeed, d))
	if c.len() != 2 {
		t.Errorf("len %d, want 2", c.len())
	}
	// Merged into a batch's set (fresh, where the keys do not collide), each keeps its values.
	st := Stream{Topic: "t", Partition: 1}
	from, into := &Batch{streams: map[Stream]*streamBatch{st: {cells: []*cellSet{c}}}, ntables: 1},
		&Batch{streams: map[Stream]*streamBatch{st: {cells: []*cellSet{newCellSet(2)}}}, ntables: 1}
	into.Merge(from)
	m := into.streams[st].cells[0]
	for key, want := range map[string][]uint64{string(a): {5, 0}, string(b): {0, 7}} {
		if i, ok, _ := m.find([]byte(key)); !ok || !slices.Equal(m.at(i), want) {
			t.Errorf("merged cell %q: found %v, values %v; want %v", key, ok, m.at(i), want)
		}
	}
	if m.len() != 2 || len(m.collided) != 0 {
		t.Errorf("merged set holds %d cells (%d collided), want 2 (0)", m.len(), len(m.collided))
	}
}

// BenchmarkCellSet adds 300,000 cells of one value (keys like gate_reason_calls_hourly's)
// over 96 sets, as a cache of four partitions × 24 hours holds them, then collects garbage
// with them live: gc-us/op is what one collection costs with such a cache.
func BenchmarkCellSet(b *testing.B) {
	keys := make([][]byte, 300_000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("2026120110|campaign-%06d|reason-%03d|client-name-%04d|\x01\x02", i, i%97, i%1000))
	}
	var gc time.Duration
	b.ReportAllocs()
	for b.Loop() {
		sets := make([]*cellSet, 96)
		for i := range sets {
			sets[i] = newCellSet(1)
		}
		for i, k := range keys {
			pos, _ := sets[i%len(sets)].cell(k)
			sets[i%len(sets)].at(pos)[0]++
		}
		t0 := time.Now()
		runtime.GC()
		gc += time.Since(t0)
		runtime.KeepAlive(sets)
	}
	b.ReportMetric(float64(gc.Microseconds())/float64(b.N), "gc-us/op")
}
