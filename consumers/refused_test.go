package consumers_test

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest"
)

// A row the store refuses for good (here: other_events.distinct_id narrowed to an Enum that
// one event's distinct_id is not in, so clickhouse-go cannot append it) used to fail its batch on every
// retry, stalling the partition for ever. The consumer now splits the refused insert down to
// that row, dead-letters its event with class store_refused, and stores every other event of
// the batch exactly once.
func TestRowRefusedForGoodIsDeadLetteredAndTheBatchCommitted(t *testing.T) {
	h := newHarness(t)
	if err := h.ch.Exec(context.Background(), `ALTER TABLE mcpulse.other_events MODIFY COLUMN distinct_id Enum8('ann' = 1, 'bob' = 2)`); err != nil {
		t.Fatal(err)
	}
	h.publish(ingest.TopicToolCalls,
		envelope(uuidN(1), "$screen", "ann", base, map[string]any{}),
		envelope(uuidN(2), "$pageview", "ann", base, map[string]any{}),
		envelope(uuidN(3), "$screen", "eve", base, map[string]any{}),
		envelope(uuidN(4), "$screen", "bob", base, map[string]any{}),
		toolCall(5, "ann", "search"),
	)
	c := h.consumer(nil)
	h.drain(c) // bounded by a minute: fails when the batch is retried for ever

	if got := h.count("SELECT count() FROM mcpulse.other_events FINAL"); got != 3 {
		t.Errorf("other_events rows = %d, want the 3 the table can hold", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL"); got != 1 {
		t.Errorf("tool_calls rows = %d, want 1", got)
	}
	var id, class, reason string
	if err := h.ch.QueryRow(context.Background(), "SELECT event_uuid, reason_class, reason FROM mcpulse.dead_letters FINAL").Scan(&id, &class, &reason); err != nil {
		t.Fatal(err)
	}
	if id != uuidN(3) || class != string(ingest.ClassStoreRefused) || !strings.Contains(reason, "mcpulse.other_events") {
		t.Errorf("dead letter %s class %q reason %q, want event 3 refused by other_events", id, class, reason)
	}
	s := c.Stats()
	// How often inserts were split depends on which events shared a batch (the events sit on
	// different partitions); splitting itself is TestInsertSplittingFindsTheRefusedRows.
	if s.StoreRefused != 1 || s.DeadLettered != 1 || s.Stored["other"] != 3 || s.Stored["tool_call"] != 1 {
		t.Errorf("stats %+v: want 1 refused, 3 other events and 1 tool call stored", s)
	}
}
