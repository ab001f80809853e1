package dashboards

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/demo/live"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/intents"
	"github.com/mcpulse/mcpulse/suppression"
)

func mustLoad(t *testing.T) []Dashboard {
	t.Helper()
	ds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	return ds
}

func panelByID(t *testing.T, dashboard, id string) Panel {
	t.Helper()
	for _, d := range mustLoad(t) {
		for _, p := range d.Panels {
			if d.Name == dashboard && p.ID == id {
				return p
			}
		}
	}
	t.Fatalf("no panel %s/%s", dashboard, id)
	return Panel{}
}

func run(t *testing.T, p Panel, f Filters) *Result {
	t.Helper()
	res, err := Run(context.Background(), demoData.ch, p, f)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// col is the index of the named column; it fails the test when there is none.
func col(t *testing.T, res *Result, name string) int {
	t.Helper()
	for i, c := range res.Columns {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("no column %q in %v", name, res.Columns)
	return -1
}

func num(v any) float64 {
	f, ok := v.(float64)
	if !ok {
		panic(fmt.Sprintf("BUG in the test: %v (%T) is not a number", v, v))
	}
	return f
}

// sameRows compares two results cell by cell (numbers to 1e-9, relative).
func sameRows(a, b *Result) error {
	if len(a.Columns) != len(b.Columns) {
		return fmt.Errorf("columns %v and %v", a.Columns, b.Columns)
	}
	for i := range a.Columns {
		if a.Columns[i].Name != b.Columns[i].Name {
			return fmt.Errorf("column %d: %s and %s", i, a.Columns[i].Name, b.Columns[i].Name)
		}
	}
	if len(a.Rows) != len(b.Rows) {
		return fmt.Errorf("%d and %d rows", len(a.Rows), len(b.Rows))
	}
	for r := range a.Rows {
		for c := range a.Rows[r] {
			x, y := a.Rows[r][c], b.Rows[r][c]
			if fx, ok := x.(float64); ok {
				if fy, ok := y.(float64); ok && math.Abs(fx-fy) <= 1e-9*math.Max(1, math.Abs(fx)) {
					continue
				}
			}
			if tx, ok := x.(time.Time); ok {
				if ty, ok := y.(time.Time); ok && tx.Equal(ty) {
					continue
				}
			}
			if x != y {
				return fmt.Errorf("row %d, %s: %v and %v", r, a.Columns[c].Name, x, y)
			}
		}
	}
	return nil
}

// Every panel of every dashboard runs on ClickHouse 18.16 over the demo's data with the
// default filters (and has rows) and with each filter it names set: it returns the X, Y and
// Series columns it names, a set filter narrows the rows it shows, and the figures equal its
// raw-table equivalent's under the same filters.
func TestEveryPanelRunsWithEachFilter(t *testing.T) {
	withDemoData(t)
	end := demoData.end
	from, to := end.Add(-30*time.Hour), end.Add(-90*time.Minute)
	filterSets := []struct {
		name  string
		param string // the Params entry that makes the set apply; "" = always
		f     Filters
	}{
		{"default", "", Filters{}},
		{"range", ParamFrom, Filters{From: from, To: to}},
		{"campaign", ParamCampaign, Filters{Campaign: "sql-editor-research"}},
		{"client", ParamClient, Filters{Client: "cursor"}},
		{"tool", ParamTool, Filters{Tool: "execute-sql"}},
		{"limit", ParamLimit, Filters{Limit: 2}},
		{"min calls", ParamMinCalls, Filters{MinCalls: 300}},
		{"hostile strings", ParamClient, Filters{Client: "x' OR 1=1 --", Campaign: `\'; DROP TABLE t`, Tool: "?"}},
	}
	// Panels whose limit applies per group (column) rather than to the whole result.
	limitPerGroup := map[string]string{"top-ignored-key-paths": "tool_name"}
	cols, err := LoadColumns()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range mustLoad(t) {
		for _, p := range d.Panels {
			for _, fs := range filterSets {
				if fs.param != "" && !slices.Contains(p.Params, fs.param) {
					continue
				}
				t.Run(d.Name+"/"+p.ID+"/"+fs.name, func(t *testing.T) {
					res := run(t, p, fs.f)
					for _, c := range p.Columns() {
						col(t, res, c)
					}
					if len(res.Columns) == 0 {
						t.Fatal("no columns")
					}
					for _, c := range res.Columns {
						if _, ok := cols[c.Name]; !ok {
							t.Errorf("result column %q has no entry in dashboards/columns.yaml (its label and format)", c.Name)
						}
					}
					switch {
					case fs.name == "default" && len(res.Rows) == 0:
						t.Fatal("no rows on the demo's data")
					case fs.name == "hostile strings" && len(res.Rows) != 0:
						t.Fatalf("%d rows for a client nobody has: %v", len(res.Rows), res.Rows)
					}
					checkNarrowed(t, p, res, fs.f, limitPerGroup[p.ID])
					if p.RawQuery != "" {
						raw, err := runQuery(context.Background(), demoData.ch, p.RawQuery, fs.f.Args(p))
						if err != nil {
							t.Fatal(err)
						}
						if err := sameRows(res, raw); err != nil {
							t.Errorf("differs from %s: %v", p.RawQuery, err)
						}
					}
				})
			}
		}
	}
}

// checkNarrowed checks that the rows respect the filters the panel applies.
func checkNarrowed(t *testing.T, p Panel, res *Result, f Filters, limitGroup string) {
	t.Helper()
	has := func(name string) int {
		for i, c := range res.Columns {
			if c.Name == name {
				return i
			}
		}
		return -1
	}
	for _, check := range []struct {
		param, column, value string
	}{
		{ParamTool, "tool_name", f.Tool},
		{ParamCampaign, "campaign_id", f.Campaign},
		{ParamClient, "client", f.Client},
	} {
		if i := has(check.column); i >= 0 && check.value != "" && slices.Contains(p.Params, check.param) {
			for _, row := range res.Rows {
				if row[i] != check.value {
					t.Errorf("%s filter %q: a row has %s %v", check.param, check.value, check.column, row[i])
				}
			}
		}
	}
	if !f.From.IsZero() && slices.Contains(p.Params, ParamFrom) {
		for _, name := range []string{"hour", "started_at", "at", "last_seen"} {
			i := has(name)
			if i < 0 {
				continue
			}
			for _, row := range res.Rows {
				if v := row[i].(time.Time); v.Before(f.From) || !v.Before(f.To) {
					t.Errorf("%s %v outside [%v, %v)", name, v, f.From, f.To)
				}
			}
		}
	}
	// A comparison counts the minimum over both periods together, which its rows do not show.
	if f.MinCalls > 0 && slices.Contains(p.Params, ParamMinCalls) && has("calls_change") < 0 {
		for _, row := range res.Rows {
			volume := "calls"
			if has(volume) < 0 {
				volume = "successful_calls"
			}
			if n := num(row[col(t, res, volume)]); n < float64(f.MinCalls) {
				t.Errorf("min_calls %d: a row has %v calls", f.MinCalls, n)
			}
		}
	}
	if f.Limit > 0 && slices.Contains(p.Params, ParamLimit) {
		groups := map[any]int{}
		for _, row := range res.Rows {
			if limitGroup == "" {
				groups[nil]++
			} else {
				groups[row[col(t, res, limitGroup)]]++
			}
		}
		for g, n := range groups {
			if n > f.Limit {
				t.Errorf("%d rows (group %v), limit %d", n, g, f.Limit)
			}
		}
	}
}

// The funnel and the reach panels equal the generator's expected outcome, computed from the
// corpus with plain maps (demo/gen), summed over the days in range.
func TestFunnelEqualsExpectedOutcome(t *testing.T) {
	withDemoData(t)
	funnel := panelByID(t, "recruitment-campaigns", "funnel")
	reach := panelByID(t, "recruitment-campaigns", "reach")
	days := map[string]bool{}
	for _, r := range demoData.expected.Funnel {
		days[r.Day] = true
	}
	if len(days) < 2 {
		t.Fatalf("expected funnel spans %d days, want at least 2", len(days))
	}
	sortedDays := slices.Sorted(maps.Keys(days))
	startDay, _ := time.Parse("2006-01-02", sortedDays[0])
	secondDay, _ := time.Parse("2006-01-02", sortedDays[1])
	// A campaign with invitations after the first day: the corpus ends at the hour the fixture
	// ran, so which campaigns have rows on which days depends on the clock.
	later := ""
	for _, r := range demoData.expected.Funnel {
		if r.Day > sortedDays[0] && r.Invitations > 0 && (later == "" || r.CampaignID < later) {
			later = r.CampaignID
		}
	}
	if later == "" {
		t.Fatalf("no campaign has invitations after %s in the expected funnel", sortedDays[0])
	}
	for _, f := range []Filters{
		{},
		{From: secondDay, To: secondDay.Add(24 * time.Hour)},
		{From: startDay.Add(time.Second), Campaign: later}, // the first day starts before From: out
	} {
		want := map[string][6]float64{}
		people := map[string]float64{}
		rowsPerCampaign := map[string]int{}
		for _, r := range demoData.expected.Funnel {
			day, _ := time.Parse("2006-01-02", r.Day)
			if (!f.From.IsZero() && day.Before(f.From)) || (!f.To.IsZero() && !day.Before(f.To)) ||
				(f.Campaign != "" && r.CampaignID != f.Campaign) {
				continue
			}
			w := want[r.CampaignID]
			for i, v := range []int64{r.Invitations, r.FirstOpens, r.Accepted, r.Declined, r.Cancelled, r.Unanswered} {
				w[i] += float64(v)
			}
			want[r.CampaignID] = w
			people[r.CampaignID] += float64(r.People)
			rowsPerCampaign[r.CampaignID]++
		}
		res := run(t, funnel, f)
		got := map[string][6]float64{}
		for _, row := range res.Rows {
			var g [6]float64
			for i, c := range []string{"sent", "first_opens", "accepted", "declined", "cancelled", "unanswered"} {
				g[i] = num(row[col(t, res, c)])
			}
			got[row[col(t, res, "campaign_id")].(string)] = g
		}
		if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("filters %+v: funnel %v, expected outcome %v", f, got, want)
		}
		// People are distinct over the range: comparable with the per-day expected figures
		// only where one expected row makes up the campaign's range.
		res = run(t, reach, f)
		for _, row := range res.Rows {
			c := row[col(t, res, "campaign_id")].(string)
			if rowsPerCampaign[c] == 1 && num(row[col(t, res, "people")]) != people[c] {
				t.Errorf("filters %+v: %s reached %v people, expected %v", f, c, row[col(t, res, "people")], people[c])
			}
			if num(row[col(t, res, "attempts")]) != want[c][0] {
				t.Errorf("filters %+v: %s attempts %v, expected %v", f, c, row[col(t, res, "attempts")], want[c][0])
			}
		}
	}
}

// The funnel split by protocol path and client adds up, row by row, to the unsplit funnel
// under every filter both take (on ClickHouse 18.16, over the generated corpus), holds
// invitations of both protocol paths, and over the whole range equals the generator's
// expected outcome (recruitment_funnel_by_path), people included.
func TestFunnelByPathSumsToFunnel(t *testing.T) {
	withDemoData(t)
	funnel := panelByID(t, "recruitment-campaigns", "funnel")
	byPath := panelByID(t, "recruitment-campaigns", "funnel-by-path")
	steps := []string{"sent", "first_opens", "answered", "accepted", "declined", "cancelled", "unanswered"}
	end := demoData.end
	campaign := demoData.expected.Funnel[0].CampaignID
	for _, f := range []Filters{
		{},
		{From: end.Add(-30 * time.Hour), To: end.Add(-6 * time.Hour)},
		{Campaign: campaign},
		{From: end.Add(-48 * time.Hour), Campaign: campaign},
		{From: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2001, 1, 2, 0, 0, 0, 0, time.UTC)},
	} {
		sum := func(res *Result) []float64 {
			out := make([]float64, len(steps))
			for _, row := range res.Rows {
				for i, c := range steps {
					out[i] += num(row[col(t, res, c)])
				}
			}
			return out
		}
		whole, split := run(t, funnel, f), run(t, byPath, f)
		if w, s := sum(whole), sum(split); !slices.Equal(w, s) {
			t.Errorf("filters %+v: the rows by path sum to %v (%v), the funnel to %v", f, s, steps, w)
		}
		if f.From.Year() == 2001 && len(split.Rows) != 0 {
			t.Errorf("filters %+v: %d rows over a range without data", f, len(split.Rows))
		}
	}

	res := run(t, byPath, Filters{})
	got := map[string][8]float64{}
	perPath := map[string]float64{}
	for _, row := range res.Rows {
		var g [8]float64
		for i, c := range []string{"sent", "people", "first_opens", "answered", "accepted", "declined", "cancelled", "unanswered"} {
			g[i] = num(row[col(t, res, c)])
		}
		path := row[col(t, res, "path")].(string)
		got[path+" "+row[col(t, res, "client")].(string)] = g
		perPath[path] += g[0]
		if sent := g[0]; sent > 0 {
			if r := row[col(t, res, "accept_rate")]; r == nil || math.Abs(num(r)-g[4]/sent) > 1e-9 {
				t.Errorf("%s: accept rate %v, want %v / %v", path, r, g[4], sent)
			}
		}
	}
	t.Logf("invitations per path: %v; rows: %v", perPath, got)
	if perPath["input_required"] == 0 || perPath["sse_elicitation_create"] == 0 {
		t.Errorf("invitations per path %v: want both protocol paths", perPath)
	}
	want := map[string][8]float64{}
	for _, r := range demoData.expected.FunnelByPath {
		want[r.Path+" "+r.ClientName] = [8]float64{float64(r.Invitations), float64(r.People), float64(r.FirstOpens),
			float64(r.Answered), float64(r.Accepted), float64(r.Declined), float64(r.Cancelled), float64(r.Unanswered)}
	}
	if len(want) == 0 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("funnel by path %v, expected outcome %v", got, want)
	}
	// A client filter keeps that client's rows, the same figures.
	res = run(t, byPath, Filters{Client: "cursor"})
	if len(res.Rows) == 0 {
		t.Fatal("no row for client cursor")
	}
	for _, row := range res.Rows {
		if k := row[col(t, res, "path")].(string) + " " + row[col(t, res, "client")].(string); num(row[col(t, res, "sent")]) != want[k][0] {
			t.Errorf("client filter: %s sent %v, want %v", k, row[col(t, res, "sent")], want[k][0])
		}
	}
}

// The ignored-key rate panels equal the generator's expected outcome: per tool, and per tool
// and hour, summed over clients (or for one client).
func TestIgnoredKeyRatesEqualExpectedOutcome(t *testing.T) {
	withDemoData(t)
	overTime := panelByID(t, "tool-diagnostics", "ignored-key-rate-over-time")
	tools := panelByID(t, "tool-diagnostics", "tools")
	for _, f := range []Filters{{Limit: MaxLimit, MinCalls: 1}, {Limit: MaxLimit, MinCalls: 1, Client: "claude-code"}} {
		perHour := map[string]int64{}
		perTool := map[string]int64{}
		for _, r := range demoData.expected.IgnoredKeyRates {
			if f.Client != "" && r.ClientName != f.Client {
				continue
			}
			perHour[r.Hour+" "+r.ToolName] += r.CallsWithIgnoredKeys
			perTool[r.ToolName] += r.CallsWithIgnoredKeys
		}
		// Calls with ignored keys per hour and tool equal the generator's; the rate divides them
		// by the measurable calls (never fewer), and is left out where none was measurable.
		res := run(t, overTime, f)
		got := map[string]int64{}
		for _, row := range res.Rows {
			k := row[col(t, res, "hour")].(time.Time).Format("2006-01-02 15:04:05") + " " + row[col(t, res, "tool_name")].(string)
			with, measurable := num(row[col(t, res, "calls_with_ignored_keys")]), num(row[col(t, res, "measurable_calls")])
			got[k] = int64(with)
			if measurable < with || measurable == 0 || math.Abs(num(row[col(t, res, "ignored_key_rate")])-with/measurable) > 1e-12 {
				t.Errorf("client %q, %s: %v", f.Client, k, row)
			}
		}
		for k, w := range perHour {
			if got[k] != w {
				t.Errorf("client %q, %s: %d calls with ignored keys, expected %d", f.Client, k, got[k], w)
			}
		}
		// Every tool with a call is on the tools panel; a tool with ignored keys has a rate.
		res = run(t, tools, f)
		if len(res.Rows) == 0 {
			t.Fatalf("client %q: no tool", f.Client)
		}
		for _, row := range res.Rows {
			tool := row[col(t, res, "tool_name")].(string)
			if perTool[tool] > 0 && row[col(t, res, "ignored_key_rate")] == nil {
				t.Errorf("client %q, %s: %d calls with ignored keys but no rate: %v", f.Client, tool, perTool[tool], row)
			}
		}
	}
}

// Identities by state agree with Redis, which the consumers and the ops resets keep: as many
// accepted, declined and cooldown identities as records, and the demo's two resets.
func TestIdentitiesByStateMatchRedis(t *testing.T) {
	withDemoData(t)
	res := run(t, panelByID(t, "suppression-data-quality", "identities-by-state"), Filters{})
	got := map[string]float64{}
	total := 0.0
	for _, row := range res.Rows {
		got[row[col(t, res, "state")].(string)] = num(row[col(t, res, "identities")])
		total += num(row[col(t, res, "identities")])
	}
	records, err := suppression.ScanRecords(context.Background(), demoData.rdb)
	if err != nil {
		t.Fatal(err)
	}
	inRedis := map[string]float64{}
	for _, r := range records {
		inRedis[r.Response]++
	}
	for state, response := range map[string]string{"accepted": suppression.StateAccepted, "declined": suppression.StateDeclined, "cooldown": suppression.StateCooldown} {
		if got[state] != inRedis[response] || got[state] == 0 {
			t.Errorf("%s: %v identities, Redis holds %v %s records (want equal, > 0)", state, got[state], inRedis[response], response)
		}
	}
	if got["reset"] != 2 {
		t.Errorf("reset: %v identities, want the demo's 2", got["reset"])
	}
	var invited uint64
	if err := demoData.ch.QueryRow(context.Background(), "SELECT uniqExact(identity_hash) FROM mcpulse.recruitment_events").Scan(&invited); err != nil {
		t.Fatal(err)
	}
	if total != float64(invited) {
		t.Errorf("%v identities in all states, %d in recruitment_events", total, invited)
	}
}

// Dead letters fall into a few typed reason classes (ingest.DeadLetterClass) that together
// count every malformed line of the corpus, each with an example as stored.
func TestDeadLettersByReasonClass(t *testing.T) {
	withDemoData(t)
	res := run(t, panelByID(t, "suppression-data-quality", "dead-letters-by-reason"), Filters{Limit: MaxLimit})
	total := 0.0
	for _, row := range res.Rows {
		class, example := row[col(t, res, "reason_class")].(string), row[col(t, res, "example")].(string)
		total += num(row[col(t, res, "dead_letters")])
		if c := ingest.ParseDeadLetterClass(class); string(c) != class || c == ingest.ClassOther || !strings.HasPrefix(example, "line ") {
			t.Errorf("class %q (example %q): want a class of the typed set, the example as stored", class, example)
		}
	}
	if malformed := float64(demoData.expected.Corpus.Malformed); total != malformed || len(res.Rows) > 15 || len(res.Rows) < 5 {
		t.Errorf("%d classes counting %v dead letters; want 5 to 15 classes counting the corpus's %v malformed lines", len(res.Rows), total, malformed)
	}
}

// The schema ratchet panels show every run the demo stored, per server, with the ratchets it
// checked against, and the latest run's offending tools (PostHog's two oversized tools first).
func TestSchemaRatchetPanelsShowTheDemoRuns(t *testing.T) {
	withDemoData(t)
	series := func(id, measure, threshold string) map[string][2][]float64 {
		res := run(t, panelByID(t, "schema-ratchet", id), Filters{})
		out := map[string][2][]float64{}
		for _, row := range res.Rows {
			s := row[col(t, res, "server")].(string)
			v := out[s]
			v[0] = append(v[0], num(row[col(t, res, measure)]))
			v[1] = append(v[1], num(row[col(t, res, threshold)]))
			out[s] = v
		}
		return out
	}
	oversized := series("oversized-vs-ratchet", "oversized", "max_oversized")
	if len(oversized) != 8 || fmt.Sprint(oversized["posthog"]) != "[[2 2 2 2] [4 3 2 2]]" {
		t.Errorf("oversized per server %v; want 4 servers, PostHog's 2 oversized tools against 4, 3, 2, 2", oversized)
	}
	// Each server is also checked once from the schemas seen in traffic, with the same figures.
	if got := fmt.Sprint(oversized["posthog-traffic"]); got != "[[2] [2]]" {
		t.Errorf("posthog-traffic: %s, want its one run from traffic, PostHog's 2 oversized tools against 2", got)
	}
	coverage := series("coverage-vs-minimum", "nested_description_coverage", "min_nested_coverage")
	if got := fmt.Sprint(coverage["sentry-mcp"][1]); got != "[0.3 0.4 0.5 0.55]" {
		t.Errorf("sentry-mcp min_nested_coverage %s, want the demo's ratchets", got)
	}
	res := run(t, panelByID(t, "schema-ratchet", "offending-tools"), Filters{})
	var top []string
	for _, row := range res.Rows {
		if server := row[col(t, res, "server")].(string); len(top) < 2 && !strings.HasSuffix(server, "-traffic") {
			top = append(top, fmt.Sprint(server, "/", row[col(t, res, "tool_name")], " ", row[col(t, res, "why")]))
		}
	}
	slices.Sort(top)
	if fmt.Sprint(top) != "[posthog/exec oversized posthog/survey-create oversized; undescribed nested properties]" {
		t.Errorf("top offending tools %v, want PostHog's exec and survey-create (oversized)", top)
	}
}

// Recent resets list the demo's two resets with their reason and previous state; the schema
// panel puts each tool's latest check beside its rate, NULL for a tool no server serves.
func TestResetsAndSchemaBesideRates(t *testing.T) {
	withDemoData(t)
	res := run(t, panelByID(t, "suppression-data-quality", "recent-resets"), Filters{})
	var prev []string
	for _, row := range res.Rows {
		if row[col(t, res, "reason")] != "demo: the person asked to be invited again" || row[col(t, res, "actor")] != "mcpulse demo" ||
			row[col(t, res, "distinct_id")] == "" {
			t.Errorf("reset %v", row)
		}
		prev = append(prev, row[col(t, res, "previous_state")].(string))
	}
	slices.Sort(prev)
	if fmt.Sprint(prev) != "[cooldown declined]" {
		t.Errorf("previous states %v, want the demo's declined and cooldown identities", prev)
	}

	res = run(t, panelByID(t, "tool-diagnostics", "schema-vs-ignored-key-rate"), Filters{Limit: MaxLimit})
	byTool := map[string][]any{}
	for _, row := range res.Rows {
		byTool[row[col(t, res, "tool_name")].(string)] = row
	}
	sql := byTool["execute-sql"]
	if sql == nil || sql[col(t, res, "server")] != "posthog" || num(sql[col(t, res, "schema_chars")]) <= 0 {
		t.Errorf("execute-sql: %v, want its posthog schema check", sql)
	}
	// query-run is a tool of PostHog's retired standalone server, which the demo does not check.
	if q := byTool["query-run"]; q == nil || q[col(t, res, "server")] != nil || q[col(t, res, "schema_chars")] != nil {
		t.Errorf("query-run: %v, want NULL schema columns", q)
	}
}

// The schemas seen in traffic: each demo server's two versions, the older one listing three
// tools fewer, none cut (the demo sends whole listings); and the two live servers (demo/live),
// four tools each, beta_radar served with one schema per plan (a change within the version).
func TestServedSchemasPanelShowsTheDemoVersions(t *testing.T) {
	withDemoData(t)
	res := run(t, panelByID(t, "schema-ratchet", "schemas-seen-in-traffic"), Filters{})
	tools := map[string]float64{}
	for _, row := range res.Rows {
		key := row[col(t, res, "server_name")].(string) + "@" + row[col(t, res, "server_version")].(string)
		tools[key] = num(row[col(t, res, "tools")])
		changes := 0.
		if strings.HasPrefix(key, live.ServerPrefix) {
			changes = 1
		}
		if num(row[col(t, res, "truncated_tools")]) != 0 || num(row[col(t, res, "schema_changes")]) != changes {
			t.Errorf("%s: %v, want whole snapshots and %v schema changes within the version", key, row, changes)
		}
	}
	// The fixture's server with a schema over a limit (overLimitListing) lists 2 tools.
	if tools[overLimitServer+"@0.9.0"] != 2 {
		t.Errorf("%s@0.9.0: %v tools, want the fixture's 2", overLimitServer, tools[overLimitServer+"@0.9.0"])
	}
	delete(tools, overLimitServer+"@0.9.0")
	liveVersion := "@" + live.ServerVersion
	if len(tools) != 10 || tools["posthog@1.0.0"]-tools["posthog@0.9.0"] != 3 || tools["sentry-mcp@1.0.0"] < 10 ||
		tools[live.ServerPostHog+liveVersion] != 4 || tools[live.ServerOTel+liveVersion] != 4 {
		t.Errorf("versions seen in traffic %v; want 4 servers × 2 versions, the older three tools short, and the 2 live servers' 4 tools", tools)
	}
}

// Events mcpulse does not route are counted per name, not lost: the fixture's 3 $pageview and 1
// $screen, sent through the publisher and the consumers.
func TestOtherEventsAreCountedPerName(t *testing.T) {
	withDemoData(t)
	res := run(t, panelByID(t, "suppression-data-quality", "other-events"), Filters{})
	got := map[string]float64{}
	for _, row := range res.Rows {
		got[row[col(t, res, "event")].(string)] = num(row[col(t, res, "events")])
	}
	if got["$pageview"] != 3 || got["$screen"] != 1 || len(got) != 2 {
		t.Errorf("other events %v, want $pageview 3 and $screen 1", got)
	}
	res = run(t, panelByID(t, "suppression-data-quality", "events-by-name"), Filters{})
	total := map[string]float64{}
	for _, row := range res.Rows {
		total[row[col(t, res, "event")].(string)] += num(row[col(t, res, "events")])
	}
	if total["$pageview"] != 3 || total["$screen"] != 1 || total["$mcp_tool_call"] == 0 || total["$identify"] == 0 || total["$mcp_feedback"] == 0 {
		t.Errorf("events per name %v, want the routed kinds and the other names", total)
	}
}

// The intent-trials page shows, per prompt version, what `mcpulse intents report` counts over
// the same range, and masked examples only: the demo's intents that hold an email, an IP
// address, a home path or a key show as placeholders, never as written.
func TestIntentTrialsPanelsMatchTheReport(t *testing.T) {
	withDemoData(t)
	versions := panelByID(t, "intent-trials", "versions")
	res := run(t, versions, Filters{})
	args := Filters{}.Args(versions)
	from, to := args[0].(time.Time), args[1].(time.Time)
	rep, err := intents.Run(context.Background(), demoData.ch, from, to)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != len(rep.Versions) || len(res.Rows) < 2 {
		t.Fatalf("%d version rows, the report %d; want the SDK default and a recorded version", len(res.Rows), len(rep.Versions))
	}
	for i, row := range res.Rows {
		v := rep.Versions[i]
		if row[col(t, res, "intent_version")] != v.Label || num(row[col(t, res, "calls")]) != float64(v.Calls) ||
			num(row[col(t, res, "calls_with_intent")]) != float64(v.CallsWithIntent) || num(row[col(t, res, "calls_with_details")]) != float64(v.CallsWithDetails) {
			t.Errorf("row %d %v, report %+v", i, row, v)
		}
	}
	kinds := run(t, panelByID(t, "intent-trials", "details-by-kind"), Filters{})
	found := map[string]bool{}
	for _, row := range kinds.Rows {
		found[row[col(t, kinds, "detail_kind")].(string)] = true
		ex := row[col(t, kinds, "masked_example")].(string)
		if !strings.Contains(ex, "[") || strings.Contains(ex, "@example.com") || strings.Contains(ex, "203.0.113.42") ||
			strings.Contains(ex, "/home/mkowalski") || strings.Contains(ex, "phc_") {
			t.Errorf("masked example %q shows a detail", ex)
		}
	}
	for _, k := range []string{"email", "ip_address", "home_path", "api_key"} {
		if !found[k] {
			t.Errorf("no %s row; the demo's intents hold one", k)
		}
	}
}
