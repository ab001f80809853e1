package consumers

import (
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

// A stored chunk's tool-call rows are zeroed and their slice serves the next chunk that fits
// in it; a chunk that needs more room gets a new slice.
func TestAStoredChunksRowSliceServesTheNextChunkZeroed(t *testing.T) {
	c := &Consumer{freeToolCallRows: make(chan []ingest.ToolCallRow, freeRowSlices)}
	p := &prepared{}
	p.rows.ToolCalls = c.toolCallRows(100)
	p.rows.ToolCalls = append(p.rows.ToolCalls, ingest.ToolCallRow{DistinctID: "person-1", IgnoredKeys: []string{"x"}})
	first := &p.rows.ToolCalls[0]
	c.releaseRows(p)
	if p.rows.ToolCalls != nil {
		t.Fatalf("the chunk still holds its rows after releaseRows: %d", len(p.rows.ToolCalls))
	}

	next := c.toolCallRows(80)
	if len(next) != 0 || cap(next) < 80 {
		t.Fatalf("toolCallRows(80) = len %d cap %d, want an empty slice with room for 80", len(next), cap(next))
	}
	if &next[:1][0] != first {
		t.Fatal("the next chunk got a new slice, not the one the stored chunk left")
	}
	if r := next[:1][0]; r.DistinctID != "" || r.IgnoredKeys != nil {
		t.Fatalf("the reused slice still holds the stored chunk's row: %+v", r)
	}

	c.releaseRows(&prepared{rows: ingest.Rows{ToolCalls: next}})
	larger := c.toolCallRows(500)
	if cap(larger) < 500 || &larger[:1][0] == first {
		t.Fatalf("toolCallRows(500) = cap %d (the 100-row slice: %v), want a new slice with room for 500", cap(larger), &larger[:1][0] == first)
	}

	// A consumer built without the free list (as some tests build one) allocates each time.
	bare := &Consumer{}
	s := bare.toolCallRows(10)
	bare.releaseRows(&prepared{rows: ingest.Rows{ToolCalls: append(s, ingest.ToolCallRow{})}})
	if cap(bare.toolCallRows(10)) < 10 {
		t.Fatal("toolCallRows without a free list returned too small a slice")
	}
}
