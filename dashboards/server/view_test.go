package server

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
)

// testColumns label the columns of the shaping tests.
var testColumns = dashboards.Columns{
	"hour":  {Label: "Hour (UTC)", Format: dashboards.FormatTime},
	"day":   {Label: "Day", Format: dashboards.FormatDate},
	"tool":  {Label: "Tool"},
	"rate":  {Label: "Rate", Format: dashboards.FormatPercent, Null: "not measured"},
	"num":   {Label: "With keys", Format: dashboards.FormatCount},
	"den":   {Label: "Successful calls", Format: dashboards.FormatCount, Unit: "successful calls"},
	"share": {Label: "Share", Format: dashboards.FormatPercent},
	"calls": {Label: "Calls", Format: dashboards.FormatCount},
	"all":   {Label: "All calls", Format: dashboards.FormatCount, Unit: "calls"},
	"sent":  {Label: "Sent", Format: dashboards.FormatCount},
	"open":  {Label: "Opened", Format: dashboards.FormatCount},
	"won":   {Label: "Won", Format: dashboards.FormatCount},
	"n":     {Label: "Oversized", Format: dashboards.FormatCount},
	"max":   {Label: "Ratchet", Format: dashboards.FormatCount},
}

func ptr(f float64) *float64 { return &f }

// A rate chart with series keeps the top N series by the rate's denominator and folds the
// rest into "other", recomputed from the counts (not an average of rates); points under the
// minimum calls are not drawn (a gap) and say why in their tooltip; the x axis is time in
// Unix milliseconds, in time order, joined only across one bucket; colours never repeat.
func TestRateSeriesFoldIntoOtherFromTheirCounts(t *testing.T) {
	h1 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h2, h3 := h1.Add(time.Hour), h1.Add(3*time.Hour)
	res := &dashboards.Result{
		Columns: columns("hour", "DateTime('UTC')", "tool", "String", "num", "UInt64", "den", "UInt64", "rate", "Float64"),
		Rows: [][]any{
			{h2, "big", 10.0, 100.0, 0.1}, {h1, "big", 1.0, 50.0, 0.02}, {h1, "mid", 5.0, 40.0, 0.125},
			{h1, "small", 3.0, 6.0, 0.5}, {h2, "tiny", 1.0, 1.0, 1.0}, {h2, "small", 0.0, 20.0, 0.0},
			{h3, "big", 2.0, 4.0, 0.5},
		},
	}
	p := dashboards.Panel{ID: "r", Chart: dashboards.ChartLine, X: "hour", Y: []string{"rate"}, Series: "tool", Bucket: "hour",
		Rate: &dashboards.Rate{Numerator: "num", Denominator: "den"}, Top: 2}
	cd := chartFor(p, testColumns, res, 5)
	if !cd.XTime || cd.SpanGaps != time.Hour.Milliseconds() || cd.YFormat != dashboards.FormatPercent || cd.YTitle != "Rate" || cd.XTitle != "Hour (UTC)" {
		t.Errorf("axes: %+v", cd)
	}
	wantLabels := []any{float64(h1.UnixMilli()), float64(h2.UnixMilli()), float64(h3.UnixMilli())}
	if !slices.Equal(cd.Labels, wantLabels) {
		t.Errorf("labels %v, want %v (time order)", cd.Labels, wantLabels)
	}
	var names []string
	colors := map[string]bool{}
	for _, ds := range cd.Datasets {
		names = append(names, ds.Label)
		colors[ds.Color] = true
	}
	if !slices.Equal(names, []string{"big", "mid", "other"}) {
		t.Fatalf("datasets %v, want the top 2 by successful calls and other", names)
	}
	if len(colors) != len(names) {
		t.Errorf("colours repeat within the chart: %v", colors)
	}
	big, mid, other := cd.Datasets[0], cd.Datasets[1], cd.Datasets[2]
	if !equalValues(big.Data, []*float64{ptr(0.02), ptr(0.1), nil}) || !equalValues(mid.Data, []*float64{ptr(0.125), nil, nil}) ||
		!equalValues(other.Data, []*float64{ptr(0.5), ptr(1.0 / 21), nil}) || !other.Other {
		t.Errorf("values big %s, mid %s, other %s; want other = (3+0+1)/(6+20+1) per hour from the counts and big's 4-call hour left out",
			showValues(big.Data), showValues(mid.Data), showValues(other.Data))
	}
	if big.Tips[0] != "2% (1 of 50 successful calls)" || big.Tips[2] != "4 successful calls: below the minimum of 5, not drawn" || mid.Tips[1] != "" {
		t.Errorf("tooltips %q, %q", big.Tips, mid.Tips)
	}
	if other.Tips[1] != "4.8% (1 of 21 successful calls)" {
		t.Errorf("other's tooltip %q", other.Tips[1])
	}
	if !strings.Contains(cd.Note, "Top 2 of 4") {
		t.Errorf("note %q, want it to say what was folded", cd.Note)
	}
}

// Shares of a whole (stacked) fold into "other" over the same whole, and the axis stops at
// 100%.
func TestShareSeriesKeepTheirWholeInOther(t *testing.T) {
	h1 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	res := &dashboards.Result{
		Columns: columns("hour", "DateTime('UTC')", "tool", "String", "calls", "UInt64", "all", "UInt64", "share", "Float64"),
		Rows:    [][]any{{h1, "a", 50.0, 100.0, 0.5}, {h1, "b", 30.0, 100.0, 0.3}, {h1, "c", 15.0, 100.0, 0.15}, {h1, "d", 5.0, 100.0, 0.05}},
	}
	p := dashboards.Panel{ID: "s", Chart: dashboards.ChartStackedBar, X: "hour", Y: []string{"share"}, Series: "tool", Bucket: "hour",
		Rate: &dashboards.Rate{Numerator: "calls", Denominator: "all", Share: true}, Top: 2, TopBy: "calls"}
	cd := chartFor(p, testColumns, res, 10)
	if cd.Type != "bar" || !cd.Stacked || cd.YMax == nil || *cd.YMax != 1 {
		t.Errorf("type %q stacked %v max %v, want a stacked bar up to 100%%", cd.Type, cd.Stacked, cd.YMax)
	}
	if len(cd.Datasets) != 3 || cd.Datasets[2].Label != "other" || !equalValues(cd.Datasets[2].Data, []*float64{ptr(0.2)}) ||
		cd.Datasets[2].Tips[0] != "20% (20 of 100 calls)" {
		t.Errorf("datasets %+v, want a, b and other = 20 of the hour's 100 calls", cd.Datasets)
	}
}

// Thresholds are dashed datasets in their series' colour; with too many series the rest are
// named in the note instead of folded (a threshold of "other" means nothing).
func TestThresholdsAreDashedLinesInTheirSeriesColour(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 0, 7, 0, time.UTC)
	var rows [][]any
	for i, server := range []string{"s1", "s2", "s3", "s4", "s5", "s6"} {
		rows = append(rows, []any{t1.Add(time.Duration(i) * time.Second), server, float64(i), 4.0})
	}
	res := &dashboards.Result{Columns: columns("at", "DateTime('UTC')", "tool", "String", "n", "UInt32", "max", "UInt32"), Rows: rows}
	p := dashboards.Panel{ID: "t", Chart: dashboards.ChartLine, X: "at", Y: []string{"n"}, Series: "tool", Thresholds: []string{"max"}, Top: 8}
	cd := chartFor(p, testColumns, res, 10)
	if !cd.XTime || cd.SpanGaps != 0 || len(cd.Datasets) != 10 {
		t.Fatalf("time axis %v, span %d, %d datasets; want irregular times joined and 5 series with their thresholds", cd.XTime, cd.SpanGaps, len(cd.Datasets))
	}
	for i := 0; i < len(cd.Datasets); i += 2 {
		m, th := cd.Datasets[i], cd.Datasets[i+1]
		if m.Threshold || !th.Threshold || m.Color != th.Color || th.Label != m.Label+" · Ratchet" {
			t.Errorf("pair %d: %+v / %+v", i, m, th)
		}
	}
	if !strings.Contains(cd.Note, "1 more") || !strings.Contains(cd.Note, "s1") {
		t.Errorf("note %q, want the left-out series named", cd.Note)
	}
	p.Layout = dashboards.LayoutMultiples
	cd = chartFor(p, testColumns, res, 10)
	if len(cd.Multiples) != 5 || cd.Multiples[0].Title != "s6" || len(cd.Multiples[0].Chart.Datasets) != 2 ||
		!cd.Multiples[0].Chart.Datasets[1].Threshold || cd.Multiples[0].Chart.YAtLeast == nil || *cd.Multiples[4].Chart.YAtLeast != 5 {
		t.Errorf("multiples %+v, want one per kept series with its threshold, all reaching the top value 5", cd.Multiples)
	}
}

// A funnel is one small multiple per x value, largest first, each step labelled with its
// count and its conversion from the previous step and the first.
func TestFunnelStepsCarryTheirConversions(t *testing.T) {
	res := &dashboards.Result{
		Columns: columns("tool", "String", "sent", "UInt64", "open", "UInt64", "won", "UInt64"),
		Rows:    [][]any{{"small", 10.0, 0.0, 0.0}, {"big", 200.0, 50.0, 60.0}},
	}
	p := dashboards.Panel{ID: "f", Chart: dashboards.ChartFunnel, X: "tool", Y: []string{"sent", "open", "won"}}
	cd := chartFor(p, testColumns, res, 10)
	if len(cd.Multiples) != 2 || cd.Multiples[0].Title != "big" {
		t.Fatalf("multiples %+v, want big first", cd.Multiples)
	}
	got := fmt.Sprint(cd.Multiples[0].Chart.Labels)
	want := "[[Sent: 200] [Opened: 50 25% of previous · 25% of first] [Won: 60 120% of previous · 30% of first]]"
	if got != want {
		t.Errorf("labels %s, want %s", got, want)
	}
	if got := fmt.Sprint(cd.Multiples[1].Chart.Labels[2]); got != "[Won: 0 — of previous · 0% of first]" {
		t.Errorf("a step after an empty one: %s", got)
	}
}

// Tables show human headers and formatted cells, NULL as blank or the column's own text
// (never "NULL"); a grouped table has one section per group value, the group column moved to
// the section's title, the first Open sections expanded, at most Top sections.
func TestTablesShowLabelsFormatsAndGroups(t *testing.T) {
	res := &dashboards.Result{
		Columns: columns("tool", "String", "den", "UInt64", "rate", "Nullable(Float64)", "day", "Nullable(Date)"),
		Rows: [][]any{{"a", 1234.0, 0.228571, nil}, {"a", 5.0, nil, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
			{"b", 7.0, 1.0, nil}, {"c", 1.0, 0.0, nil}},
	}
	tv := tableFor(dashboards.Panel{ID: "t", Chart: "table"}, testColumns, res)
	var heads []string
	for _, h := range tv.Columns {
		heads = append(heads, h.Label)
	}
	if !slices.Equal(heads, []string{"Tool", "Successful calls", "Rate", "Day"}) {
		t.Errorf("headers %q", heads)
	}
	if fmt.Sprint(tv.Rows[0]) != "[{a } {1,234 num} {22.9% num} { }]" || fmt.Sprint(tv.Rows[1]) != "[{a } {5 num} {not measured missing} {2026-01-02 time}]" {
		t.Errorf("rows %v / %v", tv.Rows[0], tv.Rows[1])
	}
	tv = tableFor(dashboards.Panel{ID: "g", Chart: "table", Group: &dashboards.Group{By: "tool", Open: 1}, Top: 2}, testColumns, res)
	if len(tv.Groups) != 2 || tv.Groups[0].Title != "a" || len(tv.Groups[0].Rows) != 2 || !tv.Groups[0].Open || tv.Groups[1].Open ||
		len(tv.Columns) != 3 || !strings.Contains(tv.Note, "first 2 of 3") {
		t.Errorf("groups %+v, columns %v, note %q", tv.Groups, tv.Columns, tv.Note)
	}
}

// An empty panel says why: no data (with its own explanation and the filters that applied),
// or every rate point under the minimum calls.
func TestEmptyPanelsSayWhy(t *testing.T) {
	p := dashboards.Panel{ID: "e", Chart: "line", X: "hour", Y: []string{"rate"}, Params: []string{"from", "to", "tool", "tool"},
		Rate: &dashboards.Rate{Numerator: "num", Denominator: "den"}, Empty: "Nothing was stored."}
	got := emptyReason(p, filterForm{From: "2026-01-01", Tool: "search"}, nil, 0)
	if got != "No data for these filters (time range 2026-01-01 to now, tool search). Nothing was stored." {
		t.Errorf("empty: %q", got)
	}
	if got := emptyReason(p, filterForm{}, nil, 0); got != "No data at all. Nothing was stored." {
		t.Errorf("empty without filters: %q", got)
	}
	cd := &chartData{Datasets: []dataset{{Data: []*float64{nil, nil}}}}
	if got := emptyReason(p, filterForm{MinCalls: "50"}, cd, 2); !strings.Contains(got, "fewer than 50 calls") {
		t.Errorf("all below the minimum: %q", got)
	}
	cd.Datasets[0].Data[1] = ptr(0.5)
	if got := emptyReason(p, filterForm{}, cd, 2); got != "" {
		t.Errorf("a drawn point: %q, want no empty state", got)
	}
}

// A missing chart library is an error that names the command installing it.
func TestMissingChartLibraryNamesTheInstallCommand(t *testing.T) {
	_, err := FindAssets(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("FindAssets(empty dir) = %v, want an error naming %q", err, InstallHint)
	}
	_, err = New(Config{ClickHouse: idleClickHouse(t), AssetsDir: t.TempDir(), Dashboards: []dashboards.Dashboard{}})
	if err == nil || !strings.Contains(err.Error(), InstallHint) {
		t.Errorf("New with an empty assets dir = %v, want an error naming %q", err, InstallHint)
	}
	if dir, err := FindAssets(assetsForTest(t)); err != nil || dir == "" {
		t.Errorf("FindAssets(the repository's dashboards/web) = %q, %v", dir, err)
	}
}

// columns builds result columns from name, type pairs.
func columns(nameType ...string) []dashboards.Column {
	var cs []dashboards.Column
	for i := 0; i+1 < len(nameType); i += 2 {
		cs = append(cs, dashboards.Column{Name: nameType[i], Type: nameType[i+1]})
	}
	return cs
}

// The container image carries every library the pages load (the Dockerfile copies each file
// out of the npm stage), so a page served from the image draws its charts.
func TestDockerfileCopiesEveryLibrary(t *testing.T) {
	_, file, _, _ := runtime.Caller(0)
	data, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, lib := range Libraries {
		want := "COPY --from=web /web/" + lib.Path + " /" + DefaultAssetsDir + "/" + lib.Path
		if !strings.Contains(string(data), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// An alert rule with a fixed threshold on the column a chart draws becomes a dashed reference
// line on that chart, labelled with what fires; other rules draw nothing.
func TestAlertThresholdsAreReferenceLines(t *testing.T) {
	above, below := 0.05, 2.0
	rules := []alerts.Rule{
		{Name: "a", Value: "rate", Threshold: &alerts.Threshold{Above: &above}},
		{Name: "b", Value: "rate", Change: &alerts.Change{Baseline: alerts.BaselinePreviousPeriod, Above: 0.1}},
		{Name: "c", Value: "calls", Threshold: &alerts.Threshold{Below: &below}},
	}
	p := dashboards.Panel{ID: "p", Chart: dashboards.ChartLine, X: "hour", Y: []string{"rate"}}
	got := references(p, testColumns, rules)
	if len(got) != 1 || got[0].Value != 0.05 || got[0].Label != "Alert: Rate above 5%" {
		t.Errorf("references %+v, want one line at 5%%", got)
	}
	p.Y = []string{"calls"}
	if got := references(p, testColumns, rules); len(got) != 1 || got[0].Label != "Alert: Calls below 2" {
		t.Errorf("references %+v", got)
	}
	p.Chart = dashboards.ChartPie
	if got := references(p, testColumns, rules); len(got) != 0 {
		t.Errorf("a pie draws %+v", got)
	}
}

// Caller-chosen strings reach tables, chart labels, series names, tooltips, funnel titles and
// empty states with their control and bidi characters shown as escapes: a tool named
// "hx-rlo\u202egnp.exe" (which a browser draws as "hx-rloexe.png") reads `hx-rlo\u202egnp.exe`.
func TestBidiAndControlCharactersAreShownEscaped(t *testing.T) {
	const rlo, shown = "hx-rlo\u202egnp.exe", `hx-rlo\u202egnp.exe`
	const isolate, shownIsolate = "a\u2066b\u2069\u200f\nc", `a\u2066b\u2069\u200f\nc`
	h1 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	res := &dashboards.Result{
		Columns: columns("hour", "DateTime('UTC')", "tool", "String", "num", "UInt64", "den", "UInt64", "rate", "Float64"),
		Rows:    [][]any{{h1, rlo, 1.0, 20.0, 0.05}, {h1, isolate, 2.0, 20.0, 0.1}},
	}
	var texts []string
	tv := tableFor(dashboards.Panel{ID: "t", Chart: "table"}, testColumns, res)
	for _, row := range tv.Rows {
		texts = append(texts, row[1].Text)
	}
	tv = tableFor(dashboards.Panel{ID: "g", Chart: "table", Group: &dashboards.Group{By: "tool"}}, testColumns, res)
	for _, g := range tv.Groups {
		texts = append(texts, g.Title)
	}
	series := chartFor(dashboards.Panel{ID: "s", Chart: dashboards.ChartLine, X: "hour", Y: []string{"rate"}, Series: "tool", Bucket: "hour",
		Rate: &dashboards.Rate{Numerator: "num", Denominator: "den"}}, testColumns, res, 1)
	for _, ds := range series.Datasets {
		texts = append(texts, ds.Label)
	}
	bars := chartFor(dashboards.Panel{ID: "b", Chart: dashboards.ChartBar, X: "tool", Y: []string{"rate"}}, testColumns, res, 1)
	for _, l := range bars.Labels {
		texts = append(texts, l.(string))
	}
	funnel := chartFor(dashboards.Panel{ID: "f", Chart: dashboards.ChartFunnel, X: "tool", Y: []string{"den", "num"}}, testColumns, res, 1)
	for _, m := range funnel.Multiples {
		texts = append(texts, m.Title, m.Chart.Datasets[0].Label)
	}
	// 2 table cells, 2 group titles, 2 series, 2 x labels, 2 funnels with a title and a label.
	if len(texts) != 12 {
		t.Fatalf("%d texts, want 12: %q", len(texts), texts)
	}
	for _, s := range texts {
		if s != shown && s != shownIsolate {
			t.Errorf("shown text %q, want %q or %q", s, shown, shownIsolate)
		}
	}
	if n := strings.Count(strings.Join(texts, "|"), shown); n != 6 {
		t.Errorf("%d of 12 texts are %q, want 6: %q", n, shown, texts)
	}
	p := dashboards.Panel{ID: "e", Chart: "table", Params: []string{"tool"}}
	if got := emptyReason(p, filterForm{Tool: rlo}, nil, 0); !strings.Contains(got, "tool "+shown) {
		t.Errorf("empty state %q does not show the tool filter escaped", got)
	}
}
