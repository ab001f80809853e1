package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/jobs"
	"github.com/mcpulse/mcpulse/schemacheck"
)

// TestPostHogMCPLandsExactlyOnce runs the real @posthog/mcp (posthog-node underneath, default
// options but the host) in two MCP servers driven by the official MCP client, against the
// gateway: every event the SDK sends ($mcp_initialize, $mcp_tools_list, $mcp_tool_call,
// $exception) is acknowledged exactly once, none refused, routed or not.
func TestPostHogMCPLandsExactlyOnce(t *testing.T) {
	var mu sync.Mutex
	var unrouted []ingest.Envelope
	f := newFixture(t, func(c *gateway.Config) {
		c.OnUnrouted = func(evs []ingest.Envelope) {
			mu.Lock()
			defer mu.Unlock()
			unrouted = append(unrouted, evs...)
		}
	})
	calls, _ := runMCPClient(t, f.srv.URL, testKey)
	failed := 0
	for _, c := range calls {
		if c.Expect.Error != "" {
			failed++
		}
	}
	byName := map[string]map[string]bool{} // event name -> uuids
	add := func(env ingest.Envelope) {
		if byName[env.Event] == nil {
			byName[env.Event] = map[string]bool{}
		}
		if byName[env.Event][env.UUID] {
			t.Errorf("%s %s published twice", env.Event, env.UUID)
		}
		byName[env.Event][env.UUID] = true
	}
	for _, topic := range ingest.AllTopics {
		for _, m := range f.messages(topic) {
			var env ingest.Envelope
			if json.Unmarshal(m.Value, &env) == nil && env.Event != "" {
				add(env)
			}
		}
	}
	mu.Lock()
	for _, env := range unrouted {
		add(env)
	}
	mu.Unlock()
	want := map[string]int{"$mcp_initialize": len(mcpServerNames), "$mcp_tools_list": len(mcpServerNames),
		ingest.EventToolCall: len(calls), "$exception": failed}
	for name, n := range want {
		if got := len(byName[name]); got != n {
			t.Errorf("%s: %d events landed, want %d", name, got, n)
		}
	}
	for name := range byName {
		if _, ok := want[name]; !ok {
			t.Errorf("unexpected event %s (%d)", name, len(byName[name]))
		}
	}
	if m := scrape(t, f); !strings.Contains(m, "\nmcpulse_gateway_events_rejected_total 0\n") {
		t.Errorf("events were rejected:\n%s", m)
	}
}

// mcpRow is a stored tool call of the MCP fixture servers.
type mcpRow struct {
	Server, Tool, Intent       string
	IsError                    uint8
	Keys, Counted              []string
	Source, Reason, ErrorClass string
	UnknownTool                uint8
}

// checkMCPRows checks what the consumer stored of client.js's calls against what each call's
// schema implies (its `expect`): one tool_calls row per call with its ignored keys, their source
// or why they are not measurable, its error class and whether the tool was unlisted; the key
// paths and the ignored-key rate per tool; the served schemas, the sessions' handshakes and the
// exceptions; then the rollup views (checkMCPRollups) and the Tool diagnostics dashboard
// (checkMCPDashboards).
func checkMCPRows(t *testing.T, ch driver.Conn, calls []sdkCall) {
	t.Helper()
	ctx := context.Background()
	servers := []string{mcpServerNames["zod"], mcpServerNames["json"]}
	rows, err := ch.Query(ctx, `SELECT server_name, tool_name, intent, is_error, ignored_keys, counted_ignored_keys,
		ignored_keys_source, ignored_keys_reason, error_class, unknown_tool
		FROM mcpulse.tool_calls FINAL WHERE has(?, server_name)`, servers)
	if err != nil {
		t.Fatal(err)
	}
	var stored []mcpRow
	for rows.Next() {
		var r mcpRow
		if err := rows.Scan(&r.Server, &r.Tool, &r.Intent, &r.IsError, &r.Keys, &r.Counted, &r.Source, &r.Reason, &r.ErrorClass, &r.UnknownTool); err != nil {
			t.Fatal(err)
		}
		stored = append(stored, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(calls) {
		t.Errorf("%d tool_calls rows for %d calls", len(stored), len(calls))
	}
	// The SDK's names for mcpulse's columns: $mcp_source -> source, $mcp_server_name/_version.
	var unmapped uint64
	if err := ch.QueryRow(ctx, `SELECT count() FROM mcpulse.tool_calls FINAL WHERE has(?, server_name)
		AND (source != 'posthog_mcp_analytics' OR server_version != multiIf(server_name = ?, ?, server_name = ?, ?, '')
			OR client_name != ? OR protocol_version = '')`,
		servers, mcpServerNames["zod"], mcpServerVersions["zod"], mcpServerNames["json"], mcpServerVersions["json"], mcpClientName).Scan(&unmapped); err != nil {
		t.Fatal(err)
	}
	if unmapped != 0 {
		t.Errorf("%d tool_calls rows without the SDK's source, server version, client name or protocol version in their columns", unmapped)
	}
	type toolKey struct{ server, tool string }
	type rate struct{ measurable, withKeys int }
	wantRates, gotRates := map[toolKey]rate{}, map[toolKey]rate{}
	wantPaths := map[string]int{} // tool + " " + key path -> successful calls ignoring it
	measurable := func(source string) bool { return source == "reported" || source == "response" || source == "schema" }
	for _, c := range calls {
		server := mcpServerNames[c.Server]
		var row *mcpRow
		for i := range stored {
			r := &stored[i]
			if r.Server != server || r.Tool != c.Tool {
				continue
			}
			if strings.HasSuffix(r.Intent, " Case "+c.Case+".") || (r.Intent == "" && !bytes.Contains(c.Args, []byte(`"context"`))) {
				row = r
				break
			}
		}
		if row == nil {
			t.Errorf("%s %s (%s): no stored row", server, c.Tool, c.Case)
			continue
		}
		name := fmt.Sprintf("%s %s (%s)", server, c.Tool, c.Case)
		wantKeys, gotKeys := slices.Sorted(slices.Values(c.Expect.Keys)), slices.Sorted(slices.Values(row.Keys))
		if row.Source != c.Expect.Source || row.Reason != c.Expect.Reason || !slices.Equal(gotKeys, wantKeys) {
			t.Errorf("%s: ignored keys %q from %q (reason %q), want %q from %q (reason %q)", name, gotKeys, row.Source, row.Reason, wantKeys, c.Expect.Source, c.Expect.Reason)
		}
		if !slices.Equal(slices.Sorted(slices.Values(row.Counted)), wantKeys) {
			t.Errorf("%s: counted ignored keys %q, want %q", name, row.Counted, wantKeys)
		}
		if row.ErrorClass != c.Expect.Error || (row.IsError == 1) != (c.Expect.Error != "") || (row.UnknownTool == 1) != (c.Expect.Error == "unknown_tool") {
			t.Errorf("%s: is_error %d, error_class %q, unknown_tool %d; want error %q", name, row.IsError, row.ErrorClass, row.UnknownTool, c.Expect.Error)
		}
		k := toolKey{server, c.Tool}
		if c.Expect.Error == "" && measurable(c.Expect.Source) {
			r := wantRates[k]
			r.measurable++
			if len(c.Expect.Keys) > 0 {
				r.withKeys++
			}
			wantRates[k] = r
			for _, p := range c.Expect.Keys {
				wantPaths[c.Tool+" "+p]++
			}
		}
		if row.IsError == 0 && measurable(row.Source) {
			r := gotRates[k]
			r.measurable++
			if len(row.Counted) > 0 {
				r.withKeys++
			}
			gotRates[k] = r
		}
	}
	if !maps.Equal(gotRates, wantRates) {
		t.Errorf("ignored-key rates (measurable successful calls, those with ignored keys) per tool:\n got %v\nwant %v", gotRates, wantRates)
	}

	tools := map[string]bool{}
	for _, c := range calls {
		tools[c.Tool] = true
	}
	gotPaths := map[string]int{}
	prows, err := ch.Query(ctx, `SELECT tool_name, key_path, toUInt64(sum(occurrences)) FROM mcpulse.v_ignored_keys_hourly
		WHERE has(?, tool_name) GROUP BY tool_name, key_path`, slices.Collect(maps.Keys(tools)))
	if err != nil {
		t.Fatal(err)
	}
	for prows.Next() {
		var tool, path string
		var n uint64
		if err := prows.Scan(&tool, &path, &n); err != nil {
			t.Fatal(err)
		}
		gotPaths[tool+" "+path] = int(n)
	}
	if !maps.Equal(gotPaths, wantPaths) {
		t.Errorf("v_ignored_keys_hourly key paths:\n got %v\nwant %v", gotPaths, wantPaths)
	}

	// Every listed tool's served schema, per server version; the SDK cut one and redacted another.
	want := map[string]string{
		"mcpulse-fixture-zod 1.4.0":  "create-order get-sum plan-route tag-resource update-settings",
		"mcpulse-fixture-json 2.0.1": "annotate connect-source lookup-person query-insights search-logs summarize-text",
	}
	got := map[string]string{}
	srows, err := ch.Query(ctx, `SELECT server_name, server_version, arrayStringConcat(arraySort(groupArray(tool_name)), ' '),
		arrayStringConcat(arraySort(groupArrayIf(tool_name, truncated = 1)), ' ')
		FROM mcpulse.v_served_tool_schemas WHERE has(?, server_name) GROUP BY server_name, server_version`, servers)
	if err != nil {
		t.Fatal(err)
	}
	var truncated []string
	for srows.Next() {
		var server, version, list, cut string
		if err := srows.Scan(&server, &version, &list, &cut); err != nil {
			t.Fatal(err)
		}
		got[server+" "+version] = list
		if cut != "" {
			truncated = append(truncated, cut)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("served schemas per server version:\n got %v\nwant %v", got, want)
	}
	if s := strings.Join(truncated, " "); s != "connect-source query-insights" {
		t.Errorf("schemas marked cut or redacted: %q, want connect-source query-insights", s)
	}
	// The same snapshots on the Schema ratchet dashboard: one row per server version, its tools,
	// those with no whole snapshot, no change within the version.
	res := runPanel(t, ch, "schema-ratchet", "schemas-seen-in-traffic")
	gotPanel := map[string]string{}
	for _, row := range res.Rows {
		v := func(name string) any {
			return row[slices.IndexFunc(res.Columns, func(c dashboards.Column) bool { return c.Name == name })]
		}
		if server := v("server_name").(string); slices.Contains(servers, server) {
			gotPanel[server+" "+v("server_version").(string)] = fmt.Sprintf("tools %v, cut %v, changes %v", v("tools"), v("truncated_tools"), v("schema_changes"))
		}
	}
	wantPanel := map[string]string{
		"mcpulse-fixture-zod 1.4.0":  "tools 5, cut 0, changes 0",
		"mcpulse-fixture-json 2.0.1": "tools 6, cut 2, changes 0",
	}
	if !maps.Equal(gotPanel, wantPanel) {
		t.Errorf("Schema ratchet dashboard, schemas seen in traffic:\n got %v\nwant %v", gotPanel, wantPanel)
	}
	// The ratchet checks those snapshots with no access to the servers: the latest version seen,
	// every listed tool, the cut ones said so; the run is charted on the same dashboard.
	for label, tools := range map[string]int{"zod": 5, "json": 6} {
		server := mcpServerNames[label]
		job := &jobs.SchemaRatchet{Server: schemacheck.ServerConfig{Name: server + "-traffic",
			Traffic: &schemacheck.TrafficConfig{ServerName: server}}, ClickHouse: ch}
		run, err := job.RunOnce(ctx)
		if err != nil || run.Err != nil {
			t.Fatalf("ratchet on %s's traffic: %v / %v", server, err, run.Err)
		}
		cut := map[string]int{"zod": 0, "json": 2}[label]
		if run.Source != schemacheck.RunFromTraffic || run.ServerVersion != mcpServerVersions[label] ||
			run.Report.Tools != tools || run.Report.TruncatedTools != cut {
			t.Errorf("ratchet on %s's traffic: source %q, version %q, %d tools (%d cut); want traffic, %s, %d (%d)",
				server, run.Source, run.ServerVersion, run.Report.Tools, run.Report.TruncatedTools, mcpServerVersions[label], tools, cut)
		}
	}
	charted := map[string]int{}
	res = runPanel(t, ch, "schema-ratchet", "oversized-vs-ratchet")
	for _, row := range res.Rows {
		if server, ok := row[slices.IndexFunc(res.Columns, func(c dashboards.Column) bool { return c.Name == "server" })].(string); ok {
			charted[server]++
		}
	}
	for _, server := range servers {
		if charted[server+"-traffic"] != 1 {
			t.Errorf("oversized-vs-ratchet: %d rows of %s-traffic, want its one run", charted[server+"-traffic"], server)
		}
	}

	var inits, exceptions uint64
	if err := ch.QueryRow(ctx, `SELECT count() FROM mcpulse.mcp_initialize_events FINAL
		WHERE has(?, server_name) AND client_name = 'mcpulse-fixture-client'`, servers).Scan(&inits); err != nil {
		t.Fatal(err)
	}
	if inits != uint64(len(servers)) {
		t.Errorf("%d mcp_initialize_events rows, want %d", inits, len(servers))
	}
	failed := map[string]int{}
	for _, c := range calls {
		if c.Expect.Error != "" {
			failed[c.Tool+" "+c.Expect.Error]++
		}
	}
	erows, err := ch.Query(ctx, `SELECT tool_name, error_class, toUInt64(count()) FROM mcpulse.mcp_exceptions FINAL
		WHERE has(?, server_name) GROUP BY tool_name, error_class`, servers)
	if err != nil {
		t.Fatal(err)
	}
	gotFailed := map[string]int{}
	for erows.Next() {
		var tool, class string
		if err := erows.Scan(&tool, &class, &exceptions); err != nil {
			t.Fatal(err)
		}
		gotFailed[tool+" "+class] = int(exceptions)
	}
	if !maps.Equal(gotFailed, failed) {
		t.Errorf("mcp_exceptions by tool and error class:\n got %v\nwant %v", gotFailed, failed)
	}
	checkMCPRollups(t, ch, calls)
	checkMCPDashboards(t, ch, calls)
}

// toolCallStats are the measures of one v_tool_call_stats_hourly cell, summed over its hours.
type toolCallStats struct {
	Calls, Errors, Successful, Measurable, WithIgnoredKeys uint64
	KeysReported, KeysFromResponse, KeysFromSchema         uint64
	NoSchema, NotMeasurableTruncated, NotMeasurableOther   uint64
	ValidationErrors, UnknownToolCalls, DurationCount      uint64
}

// wantToolCallStats is what client.js's calls imply for v_tool_call_stats_hourly per tool,
// client, server name and version (CONTRACTS' measures: measurable_calls are the successful
// calls whose ignored keys could be measured; the not-measurable reasons a cut or redaction
// caused count as truncated; validation errors are the validation_* classes; unknown tools are
// the calls the server refused as unknown). Keyed "tool client server version".
func wantToolCallStats(calls []sdkCall) map[string]toolCallStats {
	want := map[string]toolCallStats{}
	for _, c := range calls {
		k := strings.Join([]string{c.Tool, mcpClientName, mcpServerNames[c.Server], mcpServerVersions[c.Server]}, " ")
		s := want[k]
		s.Calls++
		s.DurationCount++ // the SDK times every call, failed or not
		switch e := c.Expect.Error; {
		case e == "unknown_tool":
			s.Errors++
			s.UnknownToolCalls++
		case strings.HasPrefix(e, "validation_"):
			s.Errors++
			s.ValidationErrors++
		case e != "":
			s.Errors++
		default:
			s.Successful++
			switch c.Expect.Source {
			case "reported":
				s.KeysReported++
			case "response":
				s.KeysFromResponse++
			case "schema":
				s.KeysFromSchema++
			}
			switch c.Expect.Reason {
			case "":
				s.Measurable++
				if len(c.Expect.Keys) > 0 {
					s.WithIgnoredKeys++
				}
			case "no_schema":
				s.NoSchema++
			case "arguments_truncated", "arguments_redacted", "schema_truncated":
				s.NotMeasurableTruncated++
			default:
				s.NotMeasurableOther++
			}
		}
		want[k] = s
	}
	return want
}

// checkMCPRollups checks the rollup views the dashboards read against what client.js's calls
// imply: v_tool_call_stats_hourly's measures per tool, client and server version, its
// ignored-key rate (NULL, "not measured", when no successful call was measurable; else the
// calls with ignored keys over the measurable ones), and v_ignored_key_paths_hourly's key paths
// per tool and server version.
func checkMCPRollups(t *testing.T, ch driver.Conn, calls []sdkCall) {
	t.Helper()
	ctx := context.Background()
	servers := []string{mcpServerNames["zod"], mcpServerNames["json"]}
	rows, err := ch.Query(ctx, `SELECT tool_name, client_name, server_name, server_version,
		calls, errors, successful_calls, measurable_calls, calls_with_ignored_keys,
		keys_reported, keys_from_response, keys_from_schema,
		not_measurable_no_schema, not_measurable_truncated, not_measurable_other,
		validation_errors, unknown_tool_calls, duration_count, ignored_key_rate
		FROM mcpulse.v_tool_call_stats_hourly WHERE has(?, server_name)`, servers)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]toolCallStats{}
	for rows.Next() {
		var tool, client, server, version string
		var s toolCallStats
		var rate *float64
		dest := []any{&tool, &client, &server, &version}
		for _, p := range s.fields() {
			dest = append(dest, p)
		}
		if err := rows.Scan(append(dest, &rate)...); err != nil {
			t.Fatal(err)
		}
		k := strings.Join([]string{tool, client, server, version}, " ")
		switch {
		case s.Measurable == 0 && rate != nil:
			t.Errorf("%s: ignored_key_rate %v with no measurable call, want NULL (not measured)", k, *rate)
		case s.Measurable > 0 && (rate == nil || math.Abs(*rate-float64(s.WithIgnoredKeys)/float64(s.Measurable)) > 1e-12):
			t.Errorf("%s: ignored_key_rate %v, want %d/%d", k, rate, s.WithIgnoredKeys, s.Measurable)
		}
		sum := got[k] // a cell per hour: the calls may straddle one
		for i, p := range sum.fields() {
			*p += *s.fields()[i]
		}
		got[k] = sum
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := wantToolCallStats(calls)
	for k, w := range want {
		if got[k] != w {
			t.Errorf("v_tool_call_stats_hourly %s:\n got %+v\nwant %+v", k, got[k], w)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("v_tool_call_stats_hourly: unexpected cell %s %+v", k, got[k])
		}
	}
	notMeasured := 0
	for _, w := range want {
		if w.Measurable == 0 && w.Successful > 0 {
			notMeasured++
		}
	}
	if notMeasured == 0 {
		t.Error("no tool's successful calls are all not measurable: the NULL rate is not exercised")
	}

	wantPaths := map[string]int{} // tool server version key path -> successful measurable calls listing it
	for _, c := range calls {
		if c.Expect.Error == "" && c.Expect.Reason == "" {
			for _, p := range c.Expect.Keys {
				wantPaths[strings.Join([]string{c.Tool, mcpServerNames[c.Server], mcpServerVersions[c.Server], p}, " ")]++
			}
		}
	}
	prows, err := ch.Query(ctx, `SELECT tool_name, server_name, server_version, key_path, toUInt64(sum(occurrences))
		FROM mcpulse.v_ignored_key_paths_hourly WHERE has(?, server_name)
		GROUP BY tool_name, server_name, server_version, key_path`, servers)
	if err != nil {
		t.Fatal(err)
	}
	gotPaths := map[string]int{}
	for prows.Next() {
		var tool, server, version, path string
		var n uint64
		if err := prows.Scan(&tool, &server, &version, &path, &n); err != nil {
			t.Fatal(err)
		}
		gotPaths[strings.Join([]string{tool, server, version, path}, " ")] = int(n)
	}
	if err := prows.Err(); err != nil {
		t.Fatal(err)
	}
	if !maps.Equal(gotPaths, wantPaths) {
		t.Errorf("v_ignored_key_paths_hourly per tool and server version:\n got %v\nwant %v", gotPaths, wantPaths)
	}
}

// fields are pointers to s's measures, in declaration order.
func (s *toolCallStats) fields() []*uint64 {
	return []*uint64{&s.Calls, &s.Errors, &s.Successful, &s.Measurable, &s.WithIgnoredKeys,
		&s.KeysReported, &s.KeysFromResponse, &s.KeysFromSchema, &s.NoSchema, &s.NotMeasurableTruncated,
		&s.NotMeasurableOther, &s.ValidationErrors, &s.UnknownToolCalls, &s.DurationCount}
}

// runPanel runs the panel id of the named dashboard (its YAML file name) with f, or over all
// time when f is empty.
func runPanel(t *testing.T, ch driver.Conn, dashboard, id string, f ...dashboards.Filters) *dashboards.Result {
	t.Helper()
	all, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range all {
		for _, p := range d.Panels {
			if d.Name == dashboard && p.ID == id {
				res, err := dashboards.Run(context.Background(), ch, p, append(f, dashboards.Filters{})[0])
				if err != nil {
					t.Fatal(err)
				}
				return res
			}
		}
	}
	t.Fatalf("no panel %s/%s", dashboard, id)
	return nil
}

// panelRows are res's rows as column name -> cell.
func panelRows(res *dashboards.Result) []map[string]any {
	rows := make([]map[string]any, 0, len(res.Rows))
	for _, r := range res.Rows {
		row := map[string]any{}
		for i, c := range res.Columns {
			row[c.Name] = r[i]
		}
		rows = append(rows, row)
	}
	return rows
}

// checkMCPDashboards checks the Tool diagnostics dashboard against what client.js's calls imply:
// per tool and per server version, the ignored-key rate over measurable successful calls
// (blank, "not measured", where none was measurable), the input-validation error rate over all
// calls and the calls to tools the server does not list; per tool, the ignored key paths.
func checkMCPDashboards(t *testing.T, ch driver.Conn, calls []sdkCall) {
	t.Helper()
	every := dashboards.Filters{MinCalls: 1, Limit: dashboards.MaxLimit}
	byTool, byVersion := map[string]toolCallStats{}, map[string]toolCallStats{}
	for k, s := range wantToolCallStats(calls) {
		f := strings.Fields(k) // tool client server version
		for m, key := range map[*map[string]toolCallStats]string{&byTool: f[0], &byVersion: f[2] + " " + f[3]} {
			sum := (*m)[key]
			for i, p := range sum.fields() {
				*p += *s.fields()[i]
			}
			(*m)[key] = sum
		}
	}
	// misuse is how a panel row shows a cell's misuse figures.
	misuse := func(s toolCallStats) string {
		rate := "not measured"
		if s.Measurable > 0 {
			rate = fmt.Sprintf("%.4f", float64(s.WithIgnoredKeys)/float64(s.Measurable))
		}
		return fmt.Sprintf("calls %d, ignored-key rate %s, validation-error rate %.4f, unknown tools %d",
			s.Calls, rate, float64(s.ValidationErrors)/float64(s.Calls), s.UnknownToolCalls)
	}
	shown := func(row map[string]any) string {
		rate := "not measured"
		if r, ok := row["ignored_key_rate"].(float64); ok {
			rate = fmt.Sprintf("%.4f", r)
		}
		return fmt.Sprintf("calls %v, ignored-key rate %s, validation-error rate %.4f, unknown tools %v",
			row["calls"], rate, row["validation_error_rate"], row["unknown_tool_calls"])
	}
	for _, panel := range []struct {
		id   string
		key  func(map[string]any) string
		want map[string]toolCallStats
	}{
		{"tools", func(r map[string]any) string { return r["tool_name"].(string) }, byTool},
		{"server-versions", func(r map[string]any) string { return fmt.Sprint(r["server"], " ", r["server_version"]) }, byVersion},
	} {
		got, want := map[string]string{}, map[string]string{}
		for _, row := range panelRows(runPanel(t, ch, "tool-diagnostics", panel.id, every)) {
			if _, ok := panel.want[panel.key(row)]; ok {
				got[panel.key(row)] = shown(row)
			}
		}
		for k, s := range panel.want {
			want[k] = misuse(s)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("Tool diagnostics, %s panel, %s:\n got %s\nwant %s", panel.id, k, got[k], w)
			}
		}
	}

	wantPaths := map[string]float64{}
	for _, c := range calls {
		if c.Expect.Error == "" && c.Expect.Reason == "" {
			for _, p := range c.Expect.Keys {
				wantPaths[c.Tool+" "+p]++
			}
		}
	}
	gotPaths := map[string]float64{}
	for _, row := range panelRows(runPanel(t, ch, "tool-diagnostics", "top-ignored-key-paths", every)) {
		if _, ok := byTool[row["tool_name"].(string)]; ok {
			gotPaths[fmt.Sprint(row["tool_name"], " ", row["key_path"])] = row["calls"].(float64)
		}
	}
	if !maps.Equal(gotPaths, wantPaths) {
		t.Errorf("Tool diagnostics, top ignored key paths:\n got %v\nwant %v", gotPaths, wantPaths)
	}
}
