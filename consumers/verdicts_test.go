package consumers_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// A schema over a limit is judged once and its verdict stored with the served-schema registry
// (schema_verdicts) before the batch is committed. After a restart the new consumer reads the
// verdicts back (one at start, VerdictsAtStart 1; the other when the listing brings its schema
// again) and checks no schema: the wide tool's calls are still not measured
// (schema_over_limit), its neighbour's measured, and the data-quality panel names the limit.
func TestSchemaVerdictSurvivesRestart(t *testing.T) {
	h := newHarness(t)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	wide := make([]string, 1500)
	for i := range wide {
		wide[i] = "k" + strconv.Itoa(i)
	}
	const srv = "verdict-server"
	tools := map[string][]string{"wide": wide, "fine": {"q"}}
	h.publish(ingest.TopicToolCalls,
		sdkListing(1, "agent-v", "ses-1", srv, at(1), nil, "", tools),
		sdkCall(2, "agent-v", "ses-1", srv, at(2), "wide", map[string]any{"extra": "1"}),
		sdkCall(3, "agent-v", "ses-1", srv, at(3), "fine", map[string]any{"q": "x", "extra": "2"}),
	)
	first := prometheus.NewRegistry()
	c1 := h.consumer(func(cfg *consumers.Config) { cfg.Registerer = first })
	h.drain(c1)
	c1.Close() // it leaves the group: the next member takes its partitions at once
	for name, want := range map[string]float64{"mcpulse_misuse_schema_checks_total": 2, "mcpulse_misuse_schema_verdicts_reused_total": 0} {
		if v, _ := gathered(t, first, name, nil); v != want {
			t.Errorf("first consumer: %s = %v, want %v", name, v, want)
		}
	}
	if n := h.count("SELECT count() FROM mcpulse.schema_verdicts FINAL WHERE verdict = 'over_limit' AND limit_name = 'properties' AND limit_max = 1000 AND limit_seen = 1001"); n != 1 {
		t.Fatalf("wide's stored verdict: %d rows, want one over the properties limit (1,000, seen 1,001)", n)
	}
	if n := h.count("SELECT count() FROM mcpulse.schema_verdicts FINAL WHERE verdict = 'measured'"); n != 1 {
		t.Errorf("%d measured verdicts stored, want fine's", n)
	}

	// A restart: the same listing in a new session, and calls of both tools.
	h.publish(ingest.TopicToolCalls,
		sdkListing(11, "agent-v", "ses-2", srv, at(11), nil, "", tools),
		sdkCall(12, "agent-v", "ses-2", srv, at(12), "wide", map[string]any{"extra": "3"}),
		sdkCall(13, "agent-v", "ses-2", srv, at(13), "fine", map[string]any{"q": "x", "extra": "4"}),
	)
	second := prometheus.NewRegistry()
	h.drain(h.consumer(func(cfg *consumers.Config) { cfg.Registerer, cfg.VerdictsAtStart = second, 1 }))
	for name, want := range map[string]float64{"mcpulse_misuse_schema_checks_total": 0, "mcpulse_misuse_schema_verdicts_reused_total": 2,
		"mcpulse_misuse_schema_compiles_total": 1} {
		if v, _ := gathered(t, second, name, nil); v != want {
			t.Errorf("after the restart: %s = %v, want %v", name, v, want)
		}
	}
	if v, _ := gathered(t, second, "mcpulse_misuse_schemas_over_limit_total", map[string]string{"limit": "properties"}); v != 0 {
		t.Errorf("after the restart the wide schema was found over its limit again (%v): it was checked", v)
	}
	rows, err := h.ch.Query(context.Background(), `SELECT toString(uuid), tool_name, ignored_keys_source, ignored_keys_reason, arrayStringConcat(ignored_keys, ',')
		FROM mcpulse.tool_calls FINAL ORDER BY uuid`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var id, tool, source, reason, keys string
		if err := rows.Scan(&id, &tool, &source, &reason, &keys); err != nil {
			t.Fatal(err)
		}
		got = append(got, tool+" "+source+" "+reason+" "+keys)
	}
	want := []string{"wide not_measurable schema_over_limit ", "fine schema  extra", "wide not_measurable schema_over_limit ", "fine schema  extra"}
	if len(got) != len(want) {
		t.Fatalf("stored %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("call %d: %q, want %q", i, got[i], want[i])
		}
	}
	if n := h.count("SELECT count() FROM mcpulse.schema_verdicts FINAL"); n != 2 {
		t.Errorf("%d verdicts stored after the restart, want the same 2", n)
	}

	// The panel of the coverage and data-quality pages.
	prows, err := h.ch.Query(context.Background(), mcsql.Query("panel_schemas_over_limit"), base.Add(-time.Hour), base.Add(time.Hour), uint64(10))
	if err != nil {
		t.Fatal(err)
	}
	defer prows.Close()
	var shown []string
	for prows.Next() {
		var server, version, tool, limit string
		var maxV, seen uint64
		var firstSeen, lastSeen time.Time
		if err := prows.Scan(&server, &version, &tool, &limit, &maxV, &seen, &firstSeen, &lastSeen); err != nil {
			t.Fatal(err)
		}
		shown = append(shown, server+" "+version+" "+tool+" "+limit+" "+strconv.FormatUint(maxV, 10)+" "+strconv.FormatUint(seen, 10)+" "+firstSeen.UTC().Format(time.RFC3339))
	}
	if wantRow := srv + " 2.0.0 wide properties 1000 1001 " + at(1).UTC().Format(time.RFC3339); len(shown) != 1 || shown[0] != wantRow {
		t.Errorf("schemas over limit panel: %q, want [%q]", shown, wantRow)
	}
}
