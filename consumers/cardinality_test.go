package consumers_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/ingest"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// cappedCall is a tool call of server srv with a tool, a client and reported ignored keys.
func cappedCall(n int, distinctID, srv, tool, client string, at time.Time, keys ...string) []byte {
	props := map[string]any{"$mcp_tool_name": tool, "$mcp_client_name": client, "$mcp_is_error": false,
		"$mcp_server_name": srv, "$mcp_server_version": "1.0.0"}
	if len(keys) > 0 {
		props["$mcp_ignored_keys"] = keys
		props["$mcp_ignored_keys_total"] = len(keys)
	}
	return envelope(uuidN(n), ingest.EventToolCall, distinctID, at, props)
}

// A scaled-down flood of 2,000 calls over 500 tool names, 40 client names and 100 key paths
// on one server, with caps of 50 tools, 5 clients and 20 key paths: the first values of each
// are stored as they are, the rest in the overflow buckets with the right count of distinct
// values folded (cardinality_overflow_hourly), the metric and a log line say so, and a
// neighbour server's calls are intact. A new consumer group reading every offset again stores
// the same rows, rollup cells and overflow counts; and a new Folder, holding nothing, folds the
// second half of the flood's rows again from what ClickHouse holds before it (a restart's
// replay) and gets the rows stored.
func TestCardinalityCapsFoldAFlood(t *testing.T) {
	h := newHarness(t)
	const flood, calm = "flood-server", "calm-server"
	hour := base.Truncate(time.Hour)
	var msgs [][]byte
	for i := range 2000 {
		msgs = append(msgs, cappedCall(i, "agent-flood", flood, fmt.Sprintf("t%03d", i%500), fmt.Sprintf("c%02d", i%40),
			hour.Add(time.Duration(i)*time.Second), fmt.Sprintf("k%03d", i%100), fmt.Sprintf("k%03d", (i+1)%100)))
		if i%100 == 0 {
			msgs = append(msgs, cappedCall(10_000+i, "agent-calm", calm, fmt.Sprintf("calm-t%d", i%3), "cursor",
				hour.Add(time.Duration(i)*time.Second), "calm-key"))
		}
	}
	h.publish(ingest.TopicToolCalls, msgs...)
	reg := prometheus.NewRegistry()
	var logs bytes.Buffer
	limits := cardinality.Limits{Tools: 50, Clients: 5, KeyPaths: 20}
	// Batches of 700 messages: the flood is counted in several batches, so the replay below
	// reads offsets counted by more than the newest batch.
	h.drain(h.consumer(func(cfg *consumers.Config) {
		cfg.Registerer, cfg.Caps, cfg.BatchSize = reg, limits, 700
		cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))

	distinct := func(col, srv string) int64 {
		return h.count("SELECT uniqExact("+col+") FROM mcpulse.tool_calls FINAL WHERE server_name = ?", srv)
	}
	if got := distinct("tool_name", flood); got != 51 {
		t.Errorf("flood: %d distinct tool names stored, want 50 + the bucket", got)
	}
	if got := distinct("client_name", flood); got != 6 {
		t.Errorf("flood: %d distinct client names stored, want 5 + the bucket", got)
	}
	if got := h.count("SELECT uniqExact(k) FROM mcpulse.tool_calls FINAL ARRAY JOIN counted_ignored_keys AS k WHERE server_name = ?", flood); got != 21 {
		t.Errorf("flood: %d distinct key paths stored, want 20 + the bucket", got)
	}
	for dim, want := range map[string]int64{"tool": 450, "client": 35, "key_path": 80} {
		got := h.count(`SELECT toUInt64(uniqMerge(folded_values)) FROM mcpulse.cardinality_overflow_hourly
			WHERE server_name = ? AND dimension = ? AND hour = toDateTime(?, 'UTC')`, flood, dim, hour.Unix())
		if got != want {
			t.Errorf("flood: %d distinct %s values counted folded, want %d", got, dim, want)
		}
	}
	// Each call is counted once, in the bucket or under its own name.
	if got := h.count("SELECT toUInt64(sum(calls)) FROM mcpulse.v_tool_call_stats_hourly WHERE server_name = ?", flood); got != 2000 {
		t.Errorf("flood: rollup counts %d calls, want 2000", got)
	}
	if got := h.count("SELECT toUInt64(sum(calls)) FROM mcpulse.v_tool_call_stats_hourly WHERE server_name = ? AND tool_name = ?", flood, cardinality.OtherTools); got == 0 {
		t.Error("flood: no call counted under the tools' overflow bucket")
	}
	// The neighbour's calls: its 3 tools and its client as sent, nothing folded.
	if got := distinct("tool_name", calm); got != 3 {
		t.Errorf("calm: %d distinct tool names, want 3", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.tool_calls FINAL WHERE server_name = ? AND (folded_tool_name != '' OR folded_client_name != '' OR notEmpty(folded_key_paths))", calm); got != 0 {
		t.Errorf("calm: %d calls folded, want 0", got)
	}
	if got := h.count("SELECT count() FROM mcpulse.cardinality_overflow_hourly WHERE server_name = ?", calm); got != 0 {
		t.Errorf("calm: %d overflow rows, want 0", got)
	}
	// Folded calls: tools 2000 - the 50 first tools' calls (4 each: 200); clients 2000 - 5 × 50.
	for dim, want := range map[string]float64{"tool": 1800, "client": 1750} {
		if v, ok := gathered(t, reg, "mcpulse_cardinality_overflow_total", map[string]string{"dimension": dim}); !ok || v != want {
			t.Errorf("mcpulse_cardinality_overflow_total{dimension=%q} = %v (present %v), want %v", dim, v, ok, want)
		}
	}
	for _, dim := range []string{"tool", "client", "key_path"} {
		if n := strings.Count(logs.String(), "dimension="+dim); n != 1 {
			t.Errorf("%d log lines for dimension %s, want 1 (rate-limited):\n%s", n, dim, logs.String())
		}
	}

	// The tool-diagnostics page's panel shows the folded values, and nothing for the neighbour.
	panel, err := h.ch.Query(context.Background(), mcsql.Query("panel_cardinality_caps"), hour, hour, hour, hour, uint64(10))
	if err != nil {
		t.Fatal(err)
	}
	shown := map[string][4]uint64{}
	for panel.Next() {
		var srv string
		var calls, tools, clients, ft, fc, fk, cf uint64
		if err := panel.Scan(&srv, &calls, &tools, &clients, &ft, &fc, &fk, &cf); err != nil {
			t.Fatal(err)
		}
		shown[srv] = [4]uint64{tools, ft, fc, fk}
	}
	panel.Close()
	if got, want := shown[flood], [4]uint64{51, 450, 35, 80}; got != want {
		t.Errorf("panel: flood shows tools stored, folded tools, clients, key paths %v, want %v", got, want)
	}
	if got, want := shown[calm], [4]uint64{3, 0, 0, 0}; got != want {
		t.Errorf("panel: calm shows %v, want %v", got, want)
	}

	// A new group reads every message again, with no window held: the same rows, the same
	// rollup cells and the same counts of values folded.
	stored := storedRows(t, h, flood)
	cells := rollupCells(t, h)
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.GroupID, cfg.Caps, cfg.BatchSize = "replay", limits, 700 }))
	again := storedRows(t, h, flood)
	for i := range stored {
		if got, want := rowFolds(&again[i]), rowFolds(&stored[i]); got != want {
			t.Fatalf("replay: offset %d folds %s, first read %s", stored[i].KafkaOffset, got, want)
		}
	}
	if got := rollupCells(t, h); got != cells {
		t.Errorf("replay changed the rollup cells:\n%s\nwere\n%s", got, cells)
	}

	// Replay the flood from its 1,231st call with a Folder that holds nothing (not where the
	// names cycle: an empty window would admit other names there).
	if len(stored) != 2000 {
		t.Fatalf("%d flood rows stored, want 2000", len(stored))
	}
	replay := make([]ingest.ToolCallRow, 0, 770)
	for _, r := range stored[1230:] {
		u := r
		if u.FoldedToolName != "" {
			u.ToolName, u.FoldedToolName = u.FoldedToolName, ""
		}
		if u.FoldedClientName != "" {
			u.ClientName, u.FoldedClientName = u.FoldedClientName, ""
		}
		if len(u.FoldedKeyPaths) > 0 {
			keys := slices.DeleteFunc(slices.Clone(u.CountedIgnoredKeys), func(k string) bool { return k == cardinality.OtherKeys })
			u.CountedIgnoredKeys, u.FoldedKeyPaths = append(keys, u.FoldedKeyPaths...), []string{}
		}
		replay = append(replay, u)
	}
	f := cardinality.New(h.ch, limits, nil, nil)
	if err := f.Fold(context.Background(), replay, func(int) string { return ingest.TopicToolCalls }); err != nil {
		t.Fatal(err)
	}
	for i := range replay {
		got, want := rowFolds(&replay[i]), rowFolds(&stored[1230+i])
		if got != want {
			t.Fatalf("replayed offset %d folds %s, stored %s", replay[i].KafkaOffset, got, want)
		}
	}
}

func rowFolds(r *ingest.ToolCallRow) string {
	keys := slices.Clone(r.CountedIgnoredKeys)
	slices.Sort(keys)
	folded := slices.Clone(r.FoldedKeyPaths)
	slices.Sort(folded)
	return fmt.Sprintf("tool %q/%q client %q/%q keys %q/%q", r.ToolName, r.FoldedToolName, r.ClientName, r.FoldedClientName, keys, folded)
}

// rollupCells lists the tool-call rollup's cells and their calls, with the overflow counts.
func rollupCells(t *testing.T, h *harness) string {
	t.Helper()
	var cells, folded string
	if err := h.ch.QueryRow(context.Background(), `SELECT arrayStringConcat(groupArray(c), ';') FROM (SELECT concat(server_name, '/', tool_name, '/', client_name, '=', toString(sum(calls))) AS c
		FROM mcpulse.v_tool_call_stats_hourly GROUP BY server_name, tool_name, client_name ORDER BY c)`).Scan(&cells); err != nil {
		t.Fatal(err)
	}
	if err := h.ch.QueryRow(context.Background(), `SELECT arrayStringConcat(groupArray(c), ';') FROM (SELECT concat(server_name, '/', dimension, '=', toString(uniqMerge(folded_values)), '/', toString(uniqMerge(folded_calls))) AS c
		FROM mcpulse.cardinality_overflow_hourly GROUP BY server_name, dimension ORDER BY c)`).Scan(&folded); err != nil {
		t.Fatal(err)
	}
	return cells + "\n" + folded
}

// storedRows reads srv's stored tool-call rows, in log order, as far as folding goes.
func storedRows(t *testing.T, h *harness, srv string) []ingest.ToolCallRow {
	t.Helper()
	rows, err := h.ch.Query(context.Background(), `SELECT timestamp, tool_name, folded_tool_name, client_name, folded_client_name,
			counted_ignored_keys, folded_key_paths, server_name, kafka_partition, kafka_offset
		FROM mcpulse.tool_calls FINAL WHERE server_name = ? ORDER BY kafka_offset`, srv)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []ingest.ToolCallRow
	for rows.Next() {
		var r ingest.ToolCallRow
		if err := rows.Scan(&r.Timestamp, &r.ToolName, &r.FoldedToolName, &r.ClientName, &r.FoldedClientName,
			&r.CountedIgnoredKeys, &r.FoldedKeyPaths, &r.ServerName, &r.KafkaPartition, &r.KafkaOffset); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
