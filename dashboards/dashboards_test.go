package dashboards

import (
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

// Every embedded definition loads, and together they hold the panels the dashboards promise.
func TestEmbeddedDefinitionsLoad(t *testing.T) {
	ds, err := Load()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"tool-diagnostics": {"tools", "most-failing", "slowest", "most-misused", "compared-with-previous-period",
			"error-rate-over-time", "ignored-key-rate-over-time", "top-ignored-key-paths", "clients", "server-versions", "cardinality-caps", "coverage",
			"schemas-over-limit", "schema-vs-ignored-key-rate", "missing-capabilities", "agent-feedback", "resource-reads", "prompts"},
		"recruitment-campaigns": {"funnel", "reach", "campaign-lint", "payload-changes", "funnel-by-path", "gate-reason-shares", "clients", "capabilities", "contact-policy-violations"},
		"schema-ratchet":        {"oversized-vs-ratchet", "coverage-vs-minimum", "offending-tools", "schemas-seen-in-traffic"},
		"suppression-data-quality": {"identities-by-state", "recent-resets", "dead-letters-by-reason", "dead-letters-over-time",
			"events-by-name", "other-events", "schemas-over-limit"},
		"alerts":        {"firing-now", "history", "fired-per-day", "notifications"},
		"intent-trials": {"versions", "details-by-kind"},
	}
	if len(ds) != len(want) {
		t.Fatalf("%d dashboards, want %d", len(ds), len(want))
	}
	for i, d := range ds {
		if i > 0 && ds[i-1].Name >= d.Name {
			t.Errorf("not sorted by name: %s before %s", ds[i-1].Name, d.Name)
		}
		var ids []string
		for _, p := range d.Panels {
			ids = append(ids, p.ID)
			if !strings.HasPrefix(p.Query, "panel_") || (p.RawQuery != "" && !strings.HasPrefix(p.RawQuery, "raw_")) {
				t.Errorf("%s/%s: queries %q, %q: want panel_* and raw_* names", d.Name, p.ID, p.Query, p.RawQuery)
			}
		}
		if strings.Join(ids, ",") != strings.Join(want[d.Name], ",") {
			t.Errorf("%s: panels %v, want %v", d.Name, ids, want[d.Name])
		}
	}
}

// testColumns label the columns the test definitions name.
var testColumns = Columns{"x": {Label: "X"}, "y": {Label: "Y"}, "s": {Label: "S"}, "a": {Label: "A"}, "b": {Label: "B"}, "k": {Label: "K"}}

// A definition with mistakes is refused with every problem listed, each naming the file and
// the panel.
func TestLoadRefusesBadDefinitionsNamingFileAndPanel(t *testing.T) {
	queries := map[string]string{
		"two_params": "SELECT x FROM t WHERE a = ? AND b = ? -- a comment's quote",
		"no_params":  "SELECT '?' AS x, `?` AS y /* ? */",
	}
	good := "title: T\npanels:\n  - {id: p, title: P, query: two_params, chart: line, x: x, y: [y], params: [from, to]}\n"
	cases := []struct {
		name, yaml string
		want       []string // substrings of the error
	}{
		{"unknown-query", "title: T\npanels:\n  - {id: p1, title: P, query: nope, chart: table}\n",
			[]string{`dashboards/unknown-query.yaml: panel "p1": unknown query "nope"`}},
		{"unknown-raw", "title: T\npanels:\n  - {id: p1, title: P, query: no_params, raw_query: nope, chart: table}\n",
			[]string{`panel "p1": unknown raw_query "nope"`}},
		{"unknown-param", "title: T\npanels:\n  - {id: p2, title: P, query: two_params, chart: table, params: [from, user]}\n",
			[]string{`dashboards/unknown-param.yaml: panel "p2": unknown param "user"`}},
		{"unknown-chart", "title: T\npanels:\n  - {id: p3, title: P, query: no_params, chart: donut}\n",
			[]string{`dashboards/unknown-chart.yaml: panel "p3": unknown chart type "donut"`}},
		{"param-count", "title: T\npanels:\n  - {id: p4, title: P, query: two_params, chart: table, params: [from]}\n",
			[]string{`panel "p4": query "two_params" has 2 "?" placeholders but params lists 1`}},
		{"no-placeholder-in-strings", "title: T\npanels:\n  - {id: p5, title: P, query: no_params, chart: table, params: [limit]}\n",
			[]string{`panel "p5": query "no_params" has 0 "?" placeholders but params lists 1`}},
		{"chart-shape", "title: T\npanels:\n" +
			"  - {id: a, title: A, query: no_params, chart: pie, x: s, y: [a, b]}\n" +
			"  - {id: b, title: B, query: no_params, chart: line, y: [a]}\n" +
			"  - {id: c, title: C, query: no_params, chart: bar, x: s, y: [a, b], series: k}\n" +
			"  - {id: d, title: D, query: no_params, chart: table, x: s}\n",
			[]string{`panel "a": a pie draws exactly one y column`, `panel "b": chart "line" needs x`,
				`panel "c": with series "k" the chart draws exactly one y column`, `panel "d": a table names no x, y or series`}},
		{"duplicate-id", "title: T\npanels:\n  - {id: p, title: A, query: no_params, chart: table}\n  - {id: p, title: B, query: no_params, chart: table}\n",
			[]string{`panel "p": the id is used by another panel`}},
		{"unknown-field", "title: T\npanels:\n  - {id: p, title: A, query: no_params, chart: table, colour: red}\n",
			[]string{`dashboards/unknown-field.yaml:`, `colour`}},
		{"Bad_Name", good, []string{`dashboards/Bad_Name.yaml: file name "Bad_Name"`}},
		{"unlabelled-column", "title: T\npanels:\n  - {id: p, title: A, query: no_params, chart: line, x: x, y: [nolabel]}\n",
			[]string{`panel "p": column "nolabel" has no entry in dashboards/columns.yaml`}},
		{"chart-options", "title: T\npanels:\n" +
			"  - {id: a, title: A, query: no_params, chart: table, rate: {numerator: x, denominator: y}}\n" +
			"  - {id: b, title: B, query: no_params, chart: line, x: x, y: [y], series: s, top: 12}\n" +
			"  - {id: c, title: C, query: no_params, chart: bar, x: x, y: [y], thresholds: [y]}\n" +
			"  - {id: d, title: D, query: no_params, chart: line, x: x, y: [y], bucket: week}\n" +
			"  - {id: e, title: E, query: no_params, chart: funnel, x: x, y: [y]}\n" +
			"  - {id: f, title: F, query: no_params, chart: line, x: x, y: [y], group: {by: x}}\n",
			[]string{`panel "a": rate applies to a line or bar chart`, `panel "b": top 12: a chart draws at most 10 series`,
				`panel "c": thresholds apply to a line chart with series`, `panel "d": bucket "week"`,
				`panel "e": a funnel needs x`, `panel "f": group applies to a table`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{tc.name + ".yaml": {Data: []byte(tc.yaml)}, "good.yaml": {Data: []byte(good)}}
			ds, err := load(fsys, queries, testColumns)
			if err == nil {
				t.Fatalf("loaded %+v, want an error", ds)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\nlacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "good.yaml") {
				t.Errorf("the good definition was blamed: %v", err)
			}
		})
	}
	ds, err := load(fstest.MapFS{"good.yaml": {Data: []byte(good)}, "columns.yaml": {Data: []byte("not: a dashboard")}}, queries, testColumns)
	if err != nil || len(ds) != 1 || ds[0].Name != "good" || ds[0].Panels[0].Params[1] != ParamTo {
		t.Fatalf("good definition: %+v, %v", ds, err)
	}
}

// Placeholders are counted as clickhouse-go's binder finds them: not inside strings, quoted
// identifiers or comments.
func TestCountPlaceholdersSkipsLiteralsAndComments(t *testing.T) {
	for _, tc := range []struct {
		sql  string
		want int
	}{
		{"SELECT ?", 1},
		{"SELECT '?', 'it''s ?', 'a\\'?', \"?\", `?` -- ?\n, ? # ?\n /* ? /* ? */ ? */ ?", 2},
		{"SELECT x FROM t WHERE (? = '' OR c = ?) LIMIT ? BY c", 3},
	} {
		got, err := countPlaceholders(tc.sql)
		if err != nil || got != tc.want {
			t.Errorf("countPlaceholders(%q) = %d, %v; want %d", tc.sql, got, err, tc.want)
		}
	}
	for _, bad := range []string{"SELECT 'open", "SELECT /* open", `SELECT \?`} {
		if _, err := countPlaceholders(bad); err == nil {
			t.Errorf("countPlaceholders(%q): no error", bad)
		}
	}
}

// Filters bind whole seconds a ClickHouse 18.16 DateTime can hold: the zero range is
// 1970-01-01 00:00:00 to 2105-12-31 23:59:59, and [From, To) becomes from <= t <= to.
func TestFiltersArgs(t *testing.T) {
	p := Panel{ID: "p", Params: []string{"from", "to", "campaign", "client", "tool", "limit", "tool"}}
	utc := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v.UTC()
	}
	for _, tc := range []struct {
		name     string
		f        Filters
		from, to string
		limit    uint64
	}{
		{"zero", Filters{}, "1970-01-01T00:00:00Z", "2105-12-31T23:59:59Z", DefaultLimit},
		{"whole seconds", Filters{From: utc("2026-11-28T10:00:00Z"), To: utc("2026-11-29T00:00:00Z"), Limit: 5},
			"2026-11-28T10:00:00Z", "2026-11-28T23:59:59Z", 5},
		{"fractions and offsets", Filters{From: utc("2026-11-28T12:00:00.5+02:00"), To: utc("2026-11-28T12:00:07.25+02:00"), Limit: 5000},
			"2026-11-28T10:00:01Z", "2026-11-28T10:00:07Z", MaxLimit},
		{"out of range", Filters{From: utc("1900-01-01T00:00:00Z"), To: utc("2300-01-01T00:00:00Z"), Limit: -3},
			"1970-01-01T00:00:00Z", "2105-12-31T23:59:59Z", DefaultLimit},
		{"empty", Filters{From: utc("2026-11-28T10:00:00Z"), To: utc("2026-11-28T10:00:00Z")},
			"2105-12-31T23:59:59Z", "1970-01-01T00:00:00Z", DefaultLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.f.Campaign, tc.f.Client, tc.f.Tool = "c'1", "", "t"
			args := tc.f.Args(p)
			from, to := args[0].(time.Time), args[1].(time.Time)
			if !from.Equal(utc(tc.from)) || !to.Equal(utc(tc.to)) || from.Location() != time.UTC || to.Location() != time.UTC {
				t.Errorf("from, to = %v, %v; want %s, %s in UTC", from, to, tc.from, tc.to)
			}
			if args[2] != "c'1" || args[3] != "" || args[4] != "t" || args[5] != tc.limit || args[6] != "t" {
				t.Errorf("args %v", args[2:])
			}
		})
	}
}

// Every query keeps "?" for its placeholders only (none in comments or string literals), so an
// analyst can bind a file by replacing each "?" in order (dashboards/README.md).
func TestQueriesUseQuestionMarksOnlyAsPlaceholders(t *testing.T) {
	for name, text := range queryTexts() {
		n, err := countPlaceholders(text)
		if err != nil {
			t.Errorf("%s: %v", name, err)
		} else if all := strings.Count(text, "?"); all != n {
			t.Errorf("%s: %d \"?\" of which %d placeholders: keep \"?\" out of comments and strings", name, all, n)
		}
	}
}
