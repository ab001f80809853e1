package rollup

import (
	"fmt"
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
	for k, i := range m.index {
		out[k] = slices.Clone(m.at(i))
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
