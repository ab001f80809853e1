package demo_test

import (
	"context"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
	"github.com/mcpulse/mcpulse/suppression"
)

// A generated corpus, published and consumed end to end, leaves exactly the generator's
// expected outcome in ClickHouse and Redis: every count, every rollup row, every suppression
// record, and the number of duplicates dropped.
func TestGeneratedCorpusEndToEndEqualsItsExpectedOutcome(t *testing.T) {
	stack := stack.ForTest(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	summary, err := demo.Run(ctx, demo.Config{Events: 20000, Seed: 42, DataDir: dir, Stack: stack})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range summary.Mismatches {
		t.Error(m)
	}
	expected, err := outcome.Read(dir + "/events.jsonl.expected.json")
	if err != nil {
		t.Fatal(err)
	}
	// The comparison above is only as strong as the corpus: make sure it exercised every part.
	if expected.Corpus.Duplicates == 0 || expected.Corpus.Malformed == 0 {
		t.Errorf("corpus has %d duplicates and %d malformed lines; both must be present", expected.Corpus.Duplicates, expected.Corpus.Malformed)
	}
	for _, kind := range []string{"tool_call", "invitation_sent", "link_opened", "response",
		"missing_capability", "feedback", "resources_list", "resource_read", "prompts_list", "prompt_get", "identify"} {
		if expected.EventsByKind[kind] == 0 || summary.EventsByKind[kind] != expected.EventsByKind[kind] {
			t.Errorf("%s: stored %d, expected %d (must be > 0)", kind, summary.EventsByKind[kind], expected.EventsByKind[kind])
		}
	}
	if len(expected.Suppression) == 0 || len(expected.Funnel) == 0 || len(expected.IgnoredKeys) == 0 || len(expected.GateReasons) == 0 {
		t.Errorf("expected outcome lacks suppression records, funnel, ignored keys or gate reasons")
	}
	paths := map[string]int64{}
	for _, r := range expected.FunnelByPath {
		paths[r.Path] += r.Invitations
	}
	if paths["input_required"] == 0 || paths["sse_elicitation_create"] == 0 {
		t.Errorf("expected funnel by path lacks invitations of a protocol path: %v", paths)
	}
	failedReads := int64(0)
	for _, r := range expected.SDKEvents {
		if r.Kind == "resource_read" {
			failedReads += r.Errors
		}
	}
	if failedReads == 0 {
		t.Errorf("expected outcome has no failed resource read: %+v", expected.SDKEvents)
	}
	// The contact-policy cases: the demo's audit found exactly them (else a mismatch above),
	// and stored them for the dashboards.
	if cp := expected.ContactPolicy; cp == nil || cp.Counts[suppression.ViolationExcludedPerson] != demo.ContactViolations {
		t.Errorf("expected contact policy %+v; want %d of each further kind", expected.ContactPolicy, demo.ContactViolations)
	}
	if summary.DuplicatesDropped != int64(expected.Corpus.Duplicates) {
		t.Errorf("duplicates dropped %d, want %d", summary.DuplicatesDropped, expected.Corpus.Duplicates)
	}
	if summary.DeadLettered != int64(expected.Corpus.Malformed) {
		t.Errorf("dead-lettered %d, want %d", summary.DeadLettered, expected.Corpus.Malformed)
	}

	// Every rollup equals its recomputation from the deduplicated raw tables.
	ch, err := stores.OpenClickHouse(ctx, stack.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var furtherStored uint64
	if err := ch.QueryRow(ctx, `SELECT count() FROM mcpulse.contact_policy_violations FINAL WHERE kind NOT IN ('sent_while_suppressed', 'repeat_within_7_days')`).Scan(&furtherStored); err != nil || furtherStored != 5*demo.ContactViolations {
		t.Errorf("stored %d further contact-policy violations (%v), want %d", furtherStored, err, 5*demo.ContactViolations)
	}
	rdb, err := stores.OpenRedis(ctx, stack.RedisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer rdb.Close()
	observed, err := report.Observe(ctx, ch, rdb)
	if err != nil {
		t.Fatal(err)
	}
	recomputed, err := report.Recompute(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	// Not rollups: the counts, the Redis state, the served schemas (a raw store, which also
	// holds the history the demo left after its comparison) and the SDK's reports and requests
	// (raw tables) are taken as observed.
	recomputed.EventsByKind, recomputed.Tables, recomputed.Suppression = observed.EventsByKind, observed.Tables, observed.Suppression
	recomputed.ServedSchemas, recomputed.SDKEvents = observed.ServedSchemas, observed.SDKEvents
	recomputed.FunnelByPath = observed.FunnelByPath // computed from the raw table already
	for _, m := range outcome.Compare(recomputed, observed, time.Now()) {
		t.Errorf("rollup differs from its recomputation: %s", m)
	}
	if len(recomputed.Funnel) == 0 || len(recomputed.IgnoredKeyRates) == 0 {
		t.Error("recomputation returned no rows")
	}

	// After the comparison the demo left history for the dashboards: every corpus server
	// checked once per planned run (stored by the scheduler's job, distinct start times), once
	// more from the schemas its SDK sent in traffic (the latest of two versions), and two
	// identities reset through the ops path (records gone, audit stored by the consumers).
	var runs, starts, servers, audits uint64
	if err := ch.QueryRow(ctx, `SELECT count(), uniqExact(started_at), uniqExact(server) FROM mcpulse.schema_check_runs FINAL WHERE reached = 1 AND source = 'server'`).
		Scan(&runs, &starts, &servers); err != nil {
		t.Fatal(err)
	}
	if servers != 4 || runs != servers*4 || starts != runs {
		t.Errorf("%d schema check runs of %d servers at %d start times; want 4 runs of each of 4 servers, all distinct", runs, servers, starts)
	}
	var trafficRuns, latestVersion uint64
	if err := ch.QueryRow(ctx, `SELECT count(), countIf(server_version = '1.0.0') FROM mcpulse.schema_check_runs FINAL WHERE reached = 1 AND source = 'traffic'`).
		Scan(&trafficRuns, &latestVersion); err != nil {
		t.Fatal(err)
	}
	if trafficRuns != 4 || latestVersion != 4 {
		t.Errorf("%d runs from traffic (%d of version 1.0.0); want one per server, of its latest version", trafficRuns, latestVersion)
	}
	rows, err := ch.Query(ctx, `SELECT identity_hash FROM mcpulse.suppression_audit FINAL WHERE actor = 'mcpulse demo'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		audits++
		if n, err := rdb.Exists(ctx, suppression.ResponseKey(h)).Result(); err != nil || n != 0 {
			t.Errorf("reset identity %s still has a record (%d, %v)", h, n, err)
		}
		if _, ok := expected.Suppression[h]; !ok {
			t.Errorf("reset identity %s had no expected record", h)
		}
	}
	if audits != 2 {
		t.Errorf("%d resets audited, want 2", audits)
	}
}
