package consumers

import (
	"reflect"
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

	// A chunk without tool calls (an idle poll) leaves the kept slice for the next chunk.
	c.releaseRows(&prepared{rows: ingest.Rows{ToolCalls: next}})
	if empty := c.toolCallRows(0); cap(empty) != 0 {
		t.Fatalf("toolCallRows(0) = cap %d, want no room (the kept slice stays kept)", cap(empty))
	}
	if again := c.toolCallRows(60); cap(again) == 0 || &again[:1][0] != first {
		t.Fatal("after a chunk without tool calls, the next chunk got a new slice, not the kept one")
	}

	// A chunk that needs more room gets a new slice; so does one that needs less than half:
	// the kept slice is let go.
	for _, n := range []int{500, 40} {
		c.releaseRows(&prepared{rows: ingest.Rows{ToolCalls: c.toolCallRows(100)}})
		got := c.toolCallRows(n)
		if cap(got) < n || cap(got) == 100 {
			t.Errorf("toolCallRows(%d) after a 100-row slice was kept = cap %d, want a new slice", n, cap(got))
		}
	}
}

// TestAStoredChunksEventSlotsServeTheNextChunkZeroed decodes a tool call into a chunk's event
// slot and releases the chunk: the next chunk gets the same slots, zeroed.
func TestAStoredChunksEventSlotsServeTheNextChunkZeroed(t *testing.T) {
	c := &Consumer{
		freeToolCallRows:  make(chan []ingest.ToolCallRow, freeRowSlices),
		freeToolCallSlots: make(chan []ingest.ToolCallSlot, freeRowSlices),
	}
	p := &prepared{slots: c.toolCallSlots(3)}
	ev, err := ingest.ParseIn([]byte(`{"uuid":"0190d2a4-7b1e-7c3a-9f00-0123456789ab","event":"$mcp_tool_call","distinct_id":"d",`+
		`"timestamp":"2026-01-01T00:00:00Z","properties":{"$mcp_tool_name":"t","$mcp_duration_ms":12.5}}`), &p.slots[1])
	if err != nil {
		t.Fatal(err)
	}
	if ev.ToolCall == nil || ev.ToolCall.ToolName != "t" || ev.ToolCall.DurationMs == nil || *ev.ToolCall.DurationMs != 12.5 {
		t.Fatalf("parsed tool call = %+v", ev.ToolCall)
	}
	if reflect.ValueOf(p.slots[1]).IsZero() {
		t.Fatal("the tool call was not decoded into the slot given")
	}
	first := &p.slots[0]
	c.releaseRows(p)
	if p.slots != nil {
		t.Fatal("the chunk still holds its event slots after releaseRows")
	}
	next := c.toolCallSlots(3)
	if len(next) != 3 || &next[0] != first {
		t.Fatalf("toolCallSlots(3) = %d slots, the stored chunk's: %v; want its 3 slots", len(next), len(next) > 0 && &next[0] == first)
	}
	for i := range next {
		if !reflect.ValueOf(next[i]).IsZero() {
			t.Fatalf("slot %d of the reused slice still holds the stored chunk's event", i)
		}
	}
	// A chunk without messages (an idle poll) leaves the kept slots for the next chunk.
	c.releaseRows(&prepared{slots: next})
	c.toolCallSlots(0)
	if again := c.toolCallSlots(3); &again[0] != first {
		t.Fatal("after a chunk without messages, the next chunk got new slots, not the kept ones")
	}
}
