package dashboards

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/outcome"
)

// names runs a query of one String column on the demo's data.
func names(t *testing.T, query string, args ...any) map[string]bool {
	t.Helper()
	rows, err := demoData.ch.Query(context.Background(), query, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out[s] = true
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// The SDK's virtual tools, which the demo's posthog server lists and agents call (their calls
// arrive as missing-capability and feedback reports, not as tool calls), count as called: the
// panel's called tools are the listed ones named by a tool call or by such a report.
func TestToolCoverageCountsTheSDKVirtualToolsWhenUsed(t *testing.T) {
	withDemoData(t)
	res := run(t, panelByID(t, "tool-diagnostics", "coverage"), Filters{})
	var row []any
	for _, r := range res.Rows {
		if r[col(t, res, "server")] == gen.ReportsServer {
			row = r
		}
	}
	if row == nil {
		t.Fatalf("no coverage row for %s: %v", gen.ReportsServer, res.Rows)
	}
	version := row[col(t, res, "server_version")].(string)
	listed := names(t, "SELECT DISTINCT tool_name FROM mcpulse.v_served_tool_schemas WHERE server_name = ? AND server_version = ?",
		gen.ReportsServer, version)
	called := names(t, "SELECT DISTINCT tool_name FROM mcpulse.v_tool_call_stats_hourly WHERE server_name IN (?, '')", gen.ReportsServer)
	reported := names(t, "SELECT DISTINCT tool_name FROM mcpulse.mcp_feedback FINAL WHERE server_name = ?", gen.ReportsServer)
	for _, v := range []string{gen.VirtualToolGetMoreTools, gen.VirtualToolSendFeedback} {
		if !listed[v] || !reported[v] || called[v] {
			t.Fatalf("%s: listed %v, reported %v, called as a tool %v: the demo must list it and use it through reports only",
				v, listed[v], reported[v], called[v])
		}
		if strings.Contains(row[col(t, res, "never_called")].(string), v) {
			t.Errorf("%s is shown never called: %v", v, row)
		}
	}
	want := 0
	for name := range listed {
		if called[name] || reported[name] {
			want++
		}
	}
	if got := num(row[col(t, res, "called_tools")]); got != float64(want) || num(row[col(t, res, "listed_tools")]) != float64(len(listed)) {
		t.Errorf("called %v of %v listed, want %d of %d", got, row[col(t, res, "listed_tools")], want, len(listed))
	}
}

// expectedSDKEvents sums the generator's expected SDK-event rows of a kind per key.
func expectedSDKEvents(kind string, key func(outcome.SDKEvent) string) (events, errors map[string]float64) {
	events, errors = map[string]float64{}, map[string]float64{}
	for _, r := range demoData.expected.SDKEvents {
		if r.Kind == kind {
			events[key(r)] += float64(r.Events)
			errors[key(r)] += float64(r.Errors)
		}
	}
	return events, errors
}

// The panels of the SDK's reports and requests equal the generator's expected outcome
// (demo/gen, computed from the corpus with plain maps).
func TestAgentReportPanelsEqualExpectedOutcome(t *testing.T) {
	withDemoData(t)
	all := Filters{Limit: MaxLimit}

	// What agents say is missing: get_more_tools reports grouped by their text (case and
	// blanks aside), per client.
	wantMissing, _ := expectedSDKEvents("missing_capability", func(r outcome.SDKEvent) string { return r.ClientName })
	wantGroups := map[string]map[string]bool{}
	for _, r := range demoData.expected.SDKEvents {
		if r.Kind == "missing_capability" {
			if wantGroups[r.ClientName] == nil {
				wantGroups[r.ClientName] = map[string]bool{}
			}
			wantGroups[r.ClientName][strings.ToLower(strings.TrimSpace(r.Subject))] = true
		}
	}
	wantFeedbackMissing, _ := expectedSDKEvents("feedback", func(r outcome.SDKEvent) string { return r.Subject })
	res := run(t, panelByID(t, "tool-diagnostics", "missing-capabilities"), all)
	gotMissing, gotGroups, viaFeedback := map[string]float64{}, map[string]int{}, 0.0
	for _, row := range res.Rows {
		client, n := row[col(t, res, "client")].(string), num(row[col(t, res, "reports")])
		switch row[col(t, res, "reported_via")] {
		case gen.VirtualToolGetMoreTools:
			gotMissing[client] += n
			gotGroups[client]++
		case gen.VirtualToolSendFeedback:
			viaFeedback += n
		default:
			t.Errorf("row %v: reported through neither virtual tool", row)
		}
	}
	if len(wantMissing) == 0 || !equalCounts(gotMissing, wantMissing) {
		t.Errorf("missing capabilities per client %v, want %v", gotMissing, wantMissing)
	}
	for client, groups := range wantGroups {
		if gotGroups[client] != len(groups) {
			t.Errorf("%s: %d groups of text, want %d (%v)", client, gotGroups[client], len(groups), groups)
		}
	}
	if viaFeedback != wantFeedbackMissing["missing_capability"] || viaFeedback == 0 {
		t.Errorf("%v missing capabilities reported through send_feedback, want %v", viaFeedback, wantFeedbackMissing["missing_capability"])
	}

	// Feedback per type.
	res = run(t, panelByID(t, "tool-diagnostics", "agent-feedback"), all)
	gotFeedback := map[string]float64{}
	for _, row := range res.Rows {
		gotFeedback[row[col(t, res, "feedback_type")].(string)] += num(row[col(t, res, "reports")])
		if row[col(t, res, "latest_summary")] == "" {
			t.Errorf("row %v: no summary", row)
		}
	}
	if !equalCounts(gotFeedback, wantFeedbackMissing) {
		t.Errorf("feedback per type %v, want %v", gotFeedback, wantFeedbackMissing)
	}

	// Resource reads and their error rate per uri.
	wantReads, wantFailed := expectedSDKEvents("resource_read", func(r outcome.SDKEvent) string { return r.Subject })
	res = run(t, panelByID(t, "tool-diagnostics", "resource-reads"), all)
	gotReads, gotFailed := map[string]float64{}, map[string]float64{}
	for _, row := range res.Rows {
		uri := row[col(t, res, "uri")].(string)
		reads, failed := num(row[col(t, res, "reads")]), num(row[col(t, res, "failed_reads")])
		gotReads[uri], gotFailed[uri] = reads, failed
		if rate := num(row[col(t, res, "error_rate")]); math.Abs(rate-failed/reads) > 1e-9 {
			t.Errorf("%s: error rate %v, want %v / %v", uri, rate, failed, reads)
		}
	}
	if !equalCounts(gotReads, wantReads) || !equalCounts(gotFailed, wantFailed) {
		t.Errorf("reads %v failed %v, want %v and %v", gotReads, gotFailed, wantReads, wantFailed)
	}
	if len(res.Rows) == 0 || num(res.Rows[0][col(t, res, "error_rate")]) != 1 || res.Rows[0][col(t, res, "latest_error")] == "" {
		t.Errorf("the most failing uri first, with its error: %v", res.Rows)
	}

	// Prompts use per prompt.
	wantGets, _ := expectedSDKEvents("prompt_get", func(r outcome.SDKEvent) string { return r.Subject })
	res = run(t, panelByID(t, "tool-diagnostics", "prompts"), all)
	gotGets := map[string]float64{}
	for _, row := range res.Rows {
		gotGets[row[col(t, res, "prompt")].(string)] = num(row[col(t, res, "gets")])
	}
	if len(wantGets) == 0 || !equalCounts(gotGets, wantGets) {
		t.Errorf("prompt gets %v, want %v", gotGets, wantGets)
	}
}

// equalCounts compares two maps of counts, a missing key counting 0.
func equalCounts(a, b map[string]float64) bool {
	for _, k := range slices.Concat(keysOf(a), keysOf(b)) {
		if a[k] != b[k] {
			return false
		}
	}
	return true
}

func keysOf(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
