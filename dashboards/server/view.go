package server

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// palette holds the series colours, all distinct (Tableau 10 without its grey), so no colour
// repeats within a chart: a chart draws at most dashboards.MaxSeries series, the last one
// "other" in otherColor.
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"}

const otherColor = "#9aa0a6"

// otherLabel names the series that folds every series beyond a chart's top N.
const otherLabel = "other"

// chartData is what the page hands Chart.js for one panel, as JSON inside a
// <script type="application/json"> element (never as markup): labels and dataset names are
// caller-chosen strings that Chart.js only ever draws as text on its canvas.
type chartData struct {
	// Type is Chart.js's chart type: "line", "bar", "pie" or "funnel".
	Type string `json:"type"`
	// Stacked stacks the bars (panel chart "stacked-bar").
	Stacked bool `json:"stacked"`
	// XTitle and YTitle are the axes' human titles; empty for pie and funnel, YTitle also
	// when several Y columns are drawn (the legend names them).
	XTitle string `json:"xTitle"`
	YTitle string `json:"yTitle"`
	// XTime says the x axis is time (labels are Unix milliseconds, drawn in UTC); XUnit is
	// the bucket ("hour", "day") or "" for irregular times.
	XTime bool   `json:"xTime"`
	XUnit string `json:"xUnit"`
	// SpanGaps is how far apart (ms) two points of a line may be and still be joined: one
	// bucket, so a missing hour breaks the line; 0 joins every point (irregular times).
	SpanGaps int64 `json:"spanGaps"`
	// YFormat is the y values' format (dashboards.Format*), for the axis ticks; YMax caps the
	// axis (1 for stacked shares), nil to fit the data.
	YFormat string   `json:"yFormat"`
	YMax    *float64 `json:"yMax"`
	// YAtLeast makes the y axis reach at least this value, so small multiples share a scale.
	YAtLeast *float64 `json:"yAtLeast,omitempty"`
	// Labels are the x-axis (or pie slice, or funnel step) labels: text, or Unix
	// milliseconds on a time axis.
	Labels   []any     `json:"labels"`
	Datasets []dataset `json:"datasets"`
	// References are fixed dashed lines across the chart (e.g. an alert's threshold).
	References []reference `json:"references,omitempty"`
	// Multiples are small multiples (one funnel per campaign), drawn instead of this chart.
	Multiples []multiple `json:"multiples,omitempty"`
	// Note is shown under the chart (what was folded or left out).
	Note string `json:"note,omitempty"`
}

// dataset is one Chart.js dataset: a value per label, null where there is none (or too few
// calls to show one).
type dataset struct {
	Label string     `json:"label"`
	Data  []*float64 `json:"data"`
	// Color is the series' colour; Colors, for a pie or funnel, one per slice or step.
	Color  string   `json:"color,omitempty"`
	Colors []string `json:"colors,omitempty"`
	// Dashed, stepped reference line (a ratchet's threshold), not a measured value.
	Threshold bool `json:"threshold,omitempty"`
	// Tips are the tooltip texts per point (value with its counts), "" where there is no
	// point.
	Tips []string `json:"tips"`
	// Other marks the series that folds the series beyond the top N.
	Other bool `json:"other,omitempty"`
}

type reference struct {
	Value float64 `json:"value"`
	Label string  `json:"label"`
}

// multiple is one small multiple of a panel: its own title and chart.
type multiple struct {
	Title string    `json:"title"`
	Chart chartData `json:"chart"`
}

// chartFor shapes a query result into chart data for p (see the package doc of dashboards
// for the panel fields): one dataset per Y column and one label per row, or with Series one
// dataset per series value (the Top by TopBy, the rest folded into "other"), Thresholds as
// dashed datasets, a time axis for DateTime and Date x columns, tooltips with the rate's
// counts, and rate points under minCalls left out (a gap). A funnel becomes one small
// multiple per X value.
func chartFor(p dashboards.Panel, cols dashboards.Columns, res *dashboards.Result, minCalls int) chartData {
	cd := chartData{Type: p.Chart, XTitle: cols.Label(p.X), Labels: []any{}, Datasets: []dataset{}}
	if len(p.Y) == 1 {
		cd.YTitle = cols.Label(p.Y[0])
	}
	if len(p.Y) > 0 {
		cd.YFormat = cols.Spec(p.Y[0]).Format
	}
	switch p.Chart {
	case dashboards.ChartStackedBar:
		cd.Type, cd.Stacked = "bar", true
	case dashboards.ChartPie:
		cd.XTitle, cd.YTitle = "", ""
	}
	t := newTable(res)
	xi, ok := t.col[p.X]
	if !ok {
		return cd
	}
	if p.Chart == dashboards.ChartFunnel {
		return funnelFor(p, cols, t, xi, cd)
	}
	xType := res.Columns[xi].Type
	if isTimeType(xType) && p.Chart != dashboards.ChartPie {
		cd.XTime, cd.XUnit = true, p.Bucket
		switch p.Bucket {
		case "hour":
			cd.SpanGaps = time.Hour.Milliseconds()
		case "day":
			cd.SpanGaps = 24 * time.Hour.Milliseconds()
		}
	}
	xKey := func(row []any) any {
		if cd.XTime {
			if tm, ok := row[xi].(time.Time); ok {
				return float64(tm.UnixMilli())
			}
			return nil
		}
		return cols.Text(p.X, row[xi], xType)
	}
	rate := newRateCols(p, t, cols, minCalls)
	if p.Series == "" {
		plainDatasets(p, cols, t, xKey, rate, &cd)
	} else {
		seriesDatasets(p, cols, t, xKey, rate, &cd)
	}
	if cd.Stacked && rate != nil && p.Rate.Share {
		one := 1.0
		cd.YMax = &one
	}
	if p.Layout == dashboards.LayoutMultiples {
		splitIntoMultiples(&cd)
	}
	return cd
}

// splitIntoMultiples turns a chart's series into small multiples: one chart per measured
// series with its threshold lines, every one reaching the largest value of them all, so
// their y scales are the same.
func splitIntoMultiples(cd *chartData) {
	var top float64
	for _, ds := range cd.Datasets {
		for _, v := range ds.Data {
			if v != nil && *v > top {
				top = *v
			}
		}
	}
	for _, ds := range cd.Datasets {
		if ds.Threshold {
			// The small multiple's title names the series already.
			last := &cd.Multiples[len(cd.Multiples)-1]
			ds.Label = strings.TrimPrefix(ds.Label, last.Title+" · ")
			last.Chart.Datasets = append(last.Chart.Datasets, ds)
			continue
		}
		m := *cd
		m.Datasets, m.Multiples, m.Note = []dataset{ds}, nil, ""
		m.YAtLeast = &top
		cd.Multiples = append(cd.Multiples, multiple{Title: ds.Label, Chart: m})
	}
}

// table indexes a result's columns by name.
type table struct {
	res *dashboards.Result
	col map[string]int
}

func newTable(res *dashboards.Result) table {
	t := table{res: res, col: map[string]int{}}
	for i, c := range res.Columns {
		t.col[c.Name] = i
	}
	return t
}

// num is the row's value of the named column as a number, nil when absent or not a finite
// number.
func (t table) num(row []any, name string) *float64 {
	i, ok := t.col[name]
	if !ok || i >= len(row) {
		return nil
	}
	return number(row[i])
}

// rateCols is a panel's rate: its count columns and how tooltips name them.
type rateCols struct {
	num, den   string
	share      bool
	denUnit    string
	minCalls   float64
	yFormat    string
	numberText func(float64) string
}

func newRateCols(p dashboards.Panel, t table, cols dashboards.Columns, minCalls int) *rateCols {
	if p.Rate == nil {
		return nil
	}
	_, ok1 := t.col[p.Rate.Numerator]
	_, ok2 := t.col[p.Rate.Denominator]
	if !ok1 || !ok2 {
		return nil
	}
	den := cols.Spec(p.Rate.Denominator)
	unit := den.Unit
	if unit == "" {
		unit = strings.ToLower(den.Label)
	}
	return &rateCols{num: p.Rate.Numerator, den: p.Rate.Denominator, share: p.Rate.Share, denUnit: unit,
		minCalls: float64(minCalls), yFormat: cols.Spec(p.Y[0]).Format,
		numberText: func(f float64) string { return dashboards.FormatValue(dashboards.FormatCount, f) }}
}

// point computes a rate point from its counts: nil (not drawn) when the denominator is
// missing, zero or below the minimum calls; the tooltip names both counts.
func (r *rateCols) point(num, den float64) (*float64, string) {
	if den <= 0 {
		return nil, ""
	}
	if den < r.minCalls {
		return nil, fmt.Sprintf("%s %s: below the minimum of %s, not drawn", r.numberText(den), r.denUnit, r.numberText(r.minCalls))
	}
	v := num / den
	return &v, fmt.Sprintf("%s (%s of %s %s)", dashboards.FormatValue(r.yFormat, v), r.numberText(num), r.numberText(den), r.denUnit)
}

// plainDatasets draws one dataset per Y column, one label per row in the query's order.
func plainDatasets(p dashboards.Panel, cols dashboards.Columns, t table, xKey func([]any) any, rate *rateCols, cd *chartData) {
	for i, y := range p.Y {
		ds := dataset{Label: cols.Label(y), Data: []*float64{}, Tips: []string{}}
		if p.Chart != dashboards.ChartPie {
			ds.Color = palette[i%len(palette)]
		}
		cd.Datasets = append(cd.Datasets, ds)
	}
	for _, row := range t.res.Rows {
		x := xKey(row)
		if x == nil {
			continue
		}
		cd.Labels = append(cd.Labels, x)
		for d, y := range p.Y {
			v := t.num(row, y)
			tip := ""
			if v != nil {
				tip = dashboards.FormatValue(cols.Spec(y).Format, *v)
			}
			if rate != nil && d == 0 {
				n, dn := t.num(row, rate.num), t.num(row, rate.den)
				v, tip = nil, ""
				if n != nil && dn != nil {
					v, tip = rate.point(*n, *dn)
				}
			}
			cd.Datasets[d].Data = append(cd.Datasets[d].Data, v)
			cd.Datasets[d].Tips = append(cd.Datasets[d].Tips, tip)
		}
	}
	if p.Chart == dashboards.ChartPie && len(cd.Datasets) == 1 {
		n := len(cd.Labels)
		cd.Datasets[0].Colors = slices.Clone(palette[:min(n, len(palette))])
		for len(cd.Datasets[0].Colors) < n {
			cd.Datasets[0].Colors = append(cd.Datasets[0].Colors, otherColor)
		}
	}
}

// seriesPoint is one (x, series) cell: the value and, for a rate, its counts.
type seriesPoint struct {
	v, num, den *float64
	thresholds  []*float64
}

// seriesDatasets draws one dataset per series value (the Top by rank, the rest folded into
// "other" or, with thresholds, left out), each holding Y[0] per label.
func seriesDatasets(p dashboards.Panel, cols dashboards.Columns, t table, xKey func([]any) any, rate *rateCols, cd *chartData) {
	si, ok := t.col[p.Series]
	if !ok {
		return
	}
	if _, ok := t.col[p.Y[0]]; !ok {
		return
	}
	seriesType := t.res.Columns[si].Type
	rankCol := p.RankColumn()
	var (
		xs     []any
		xIndex = map[any]int{}
		names  []string
		rank   = map[string]float64{}
		cells  = map[string]map[int]seriesPoint{}
	)
	for _, row := range t.res.Rows {
		x := xKey(row)
		if x == nil {
			continue
		}
		if _, ok := xIndex[x]; !ok {
			xIndex[x] = len(xs)
			xs = append(xs, x)
		}
		s := cols.Text(p.Series, row[si], seriesType)
		if _, ok := cells[s]; !ok {
			cells[s] = map[int]seriesPoint{}
			names = append(names, s)
		}
		if r := t.num(row, rankCol); r != nil {
			rank[s] += *r
		}
		pt := seriesPoint{v: t.num(row, p.Y[0])}
		if rate != nil {
			pt.num, pt.den = t.num(row, rate.num), t.num(row, rate.den)
		}
		for _, th := range p.Thresholds {
			pt.thresholds = append(pt.thresholds, t.num(row, th))
		}
		cells[s][xIndex[x]] = pt
	}
	// A time axis runs in time order whatever the query's order.
	order := make([]int, len(xs))
	for i := range order {
		order[i] = i
	}
	if cd.XTime {
		slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(xs[a].(float64), xs[b].(float64)) })
	}
	for _, i := range order {
		cd.Labels = append(cd.Labels, xs[i])
	}
	// Rank: largest total first, ties by name, so the kept series do not depend on row order.
	ranked := slices.Clone(names)
	slices.SortStableFunc(ranked, func(a, b string) int {
		if c := cmp.Compare(rank[b], rank[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	top := p.Top
	if top <= 0 || top > dashboards.MaxSeries-1 {
		top = dashboards.MaxSeries - 1
	}
	if len(p.Thresholds) > 0 {
		// Each kept series draws its thresholds too, in its colour.
		top = min(top, (dashboards.MaxSeries)/(1+len(p.Thresholds)))
	}
	kept, folded := ranked, []string(nil)
	if len(ranked) > top {
		kept, folded = ranked[:top], ranked[top:]
	}
	yFormat := cols.Spec(p.Y[0]).Format
	build := func(label, color string, get func(x int) seriesPoint) dataset {
		ds := dataset{Label: label, Color: color, Data: make([]*float64, len(order)), Tips: make([]string, len(order))}
		for li, x := range order {
			pt := get(x)
			switch {
			case rate != nil && pt.num != nil && pt.den != nil:
				ds.Data[li], ds.Tips[li] = rate.point(*pt.num, *pt.den)
			case rate == nil && pt.v != nil:
				ds.Data[li], ds.Tips[li] = pt.v, dashboards.FormatValue(yFormat, *pt.v)
			}
		}
		return ds
	}
	for i, name := range kept {
		color := palette[i%len(palette)]
		cd.Datasets = append(cd.Datasets, build(name, color, func(x int) seriesPoint { return cells[name][x] }))
		for ti, th := range p.Thresholds {
			ds := dataset{Label: name + " · " + cols.Label(th), Color: color, Threshold: true,
				Data: make([]*float64, len(order)), Tips: make([]string, len(order))}
			for li, x := range order {
				pt, ok := cells[name][x]
				if ok && ti < len(pt.thresholds) && pt.thresholds[ti] != nil {
					ds.Data[li] = pt.thresholds[ti]
					ds.Tips[li] = dashboards.FormatValue(cols.Spec(th).Format, *pt.thresholds[ti]) + " (threshold)"
				}
			}
			cd.Datasets = append(cd.Datasets, ds)
		}
	}
	if len(folded) == 0 {
		return
	}
	if len(p.Thresholds) > 0 {
		cd.Note = fmt.Sprintf("%d more %s not drawn (%s); narrow the filters or download the CSV.",
			len(folded), plural(len(folded), strings.ToLower(cols.Label(p.Series))), strings.Join(folded, ", "))
		return
	}
	other := build(otherLabel, otherColor, func(x int) seriesPoint {
		var sum, num, den float64
		var seen bool
		for _, name := range folded {
			pt, ok := cells[name][x]
			if !ok {
				continue
			}
			seen = true
			if pt.v != nil {
				sum += *pt.v
			}
			if pt.num != nil {
				num += *pt.num
			}
			if pt.den != nil {
				if rate != nil && rate.share {
					den = *pt.den // the whole of this x, the same in every series
				} else {
					den += *pt.den
				}
			}
		}
		if !seen {
			return seriesPoint{}
		}
		return seriesPoint{v: &sum, num: &num, den: &den}
	})
	other.Other = true
	cd.Datasets = append(cd.Datasets, other)
	cd.Note = fmt.Sprintf("Top %d of %d by %s; \"other\" holds the remaining %d.", len(kept), len(ranked),
		strings.ToLower(cols.Label(p.RankColumn())), len(folded))
}

// funnelFor draws one funnel per X value (the Top by the first step), its steps the Y
// columns, each step labelled with its count and its conversion from the previous step and
// from the first.
func funnelFor(p dashboards.Panel, cols dashboards.Columns, t table, xi int, cd chartData) chartData {
	type funnel struct {
		title string
		steps []float64
	}
	var fs []funnel
	for _, row := range t.res.Rows {
		f := funnel{title: cols.Text(p.X, row[xi], t.res.Columns[xi].Type)}
		for _, y := range p.Y {
			v := 0.0
			if n := t.num(row, y); n != nil {
				v = *n
			}
			f.steps = append(f.steps, v)
		}
		fs = append(fs, f)
	}
	slices.SortStableFunc(fs, func(a, b funnel) int { return cmp.Compare(b.steps[0], a.steps[0]) })
	top := p.Top
	if top <= 0 {
		top = dashboards.DefaultTop
	}
	if len(fs) > top {
		cd.Note = fmt.Sprintf("The %d largest of %d funnels by %s; the CSV holds every one.", top, len(fs), strings.ToLower(cols.Label(p.Y[0])))
		fs = fs[:top]
	}
	cd.Type = "funnel"
	for _, f := range fs {
		m := chartData{Type: "funnel", Labels: []any{}, Datasets: []dataset{{Label: f.title, Data: []*float64{}, Tips: []string{}}}}
		for i, y := range p.Y {
			v := f.steps[i]
			m.Labels = append(m.Labels, strings.Split(funnelStepLabel(cols.Label(y), f.steps, i), labelBreak))
			m.Datasets[0].Data = append(m.Datasets[0].Data, &v)
			m.Datasets[0].Tips = append(m.Datasets[0].Tips, dashboards.FormatValue(dashboards.FormatCount, v))
			m.Datasets[0].Colors = append(m.Datasets[0].Colors, palette[i%len(palette)])
		}
		cd.Multiples = append(cd.Multiples, multiple{Title: f.title, Chart: m})
	}
	return cd
}

// labelBreak separates the lines of a funnel step's label.
const labelBreak = "\n"

// funnelStepLabel is a funnel step's label: its name and count, and from the second step on
// its conversion from the previous step and from the first on a second line ("Accepted: 220",
// "37.9% of previous · 24.4% of first"). A step after a zero step has no conversion ("—").
func funnelStepLabel(name string, steps []float64, i int) string {
	count := dashboards.FormatValue(dashboards.FormatCount, steps[i])
	if i == 0 {
		return name + ": " + count
	}
	conv := func(from float64) string {
		if from <= 0 {
			return "—"
		}
		return dashboards.Percent(steps[i] / from)
	}
	return fmt.Sprintf("%s: %s%s%s of previous · %s of first", name, count, labelBreak, conv(steps[i-1]), conv(steps[0]))
}

func plural(n int, word string) string {
	if n == 1 || strings.HasSuffix(word, "s") {
		return word
	}
	return word + "s"
}

// number is a cell as a chart value: nil for NULL, non-numbers and non-finite values (JSON
// has no NaN).
func number(v any) *float64 {
	f, ok := v.(float64)
	if !ok || math.IsNaN(f) || math.IsInf(f, 0) {
		return nil
	}
	return &f
}

// cellText formats one result cell for a CSV field: NULL as "", times in UTC ("2006-01-02"
// for a Date column, "2006-01-02 15:04:05" otherwise), whole numbers without a fraction,
// other numbers with at most 6 decimals.
func cellText(v any, typ string) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case float64:
		return formatNumber(x)
	case time.Time:
		if isDateType(typ) {
			return x.UTC().Format(time.DateOnly)
		}
		return x.UTC().Format(time.DateTime)
	default:
		return "?"
	}
}

func formatNumber(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatFloat(f, 'f', 0, 64)
	}
	s := strconv.FormatFloat(f, 'f', 6, 64)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// isDateType reports a ClickHouse Date (or Nullable(Date)), as opposed to DateTime.
func isDateType(typ string) bool {
	t := strings.TrimSuffix(strings.TrimPrefix(typ, "Nullable("), ")")
	return t == "Date" || t == "Date32"
}

// isTimeType reports a ClickHouse Date or DateTime column (any time zone, nullable or not).
func isTimeType(typ string) bool {
	t := strings.TrimSuffix(strings.TrimPrefix(typ, "Nullable("), ")")
	return isDateType(t) || strings.HasPrefix(t, "DateTime")
}

// emptyReason says why a panel shows nothing, or "" when it has something to show: no row
// in the range (with the panel's own explanation of what fills it), or rows whose every rate
// point is below the minimum calls.
func emptyReason(p dashboards.Panel, form filterForm, cd *chartData, rows int) string {
	if rows == 0 {
		where := "for these filters"
		if form.From == "" && form.To == "" {
			where = "at all"
		}
		var applied []string
		for _, f := range panelFilters(p) {
			v := ""
			switch f.Name {
			case "time range":
				if form.From != "" || form.To != "" {
					v = cmp.Or(form.From, "the start") + " to " + cmp.Or(form.To, "now")
				}
			case "campaign":
				v = form.Campaign
			case "client":
				v = form.Client
			case "tool":
				v = form.Tool
			}
			if f.Applies && v != "" {
				applied = append(applied, f.Name+" "+safetext.Escape(v))
			}
		}
		msg := "No data " + where
		if len(applied) > 0 {
			msg += " (" + strings.Join(applied, ", ") + ")"
		}
		msg += "."
		if p.Empty != "" {
			msg += " " + p.Empty
		}
		return msg
	}
	if cd == nil || p.Rate == nil || len(cd.Multiples) > 0 {
		return ""
	}
	for _, ds := range cd.Datasets {
		for _, v := range ds.Data {
			if v != nil {
				return ""
			}
		}
	}
	minCalls := form.MinCalls
	if minCalls == "" {
		minCalls = strconv.Itoa(dashboards.DefaultMinCalls)
	}
	return fmt.Sprintf("Every point has fewer than %s calls (the minimum calls filter), so no rate is drawn; lower Min calls to see them.", minCalls)
}

// references are the dashed lines a chart draws for the alert rules watching its y column
// with a fixed threshold ("Alert: Dead-letter rate above 1%").
func references(p dashboards.Panel, cols dashboards.Columns, rules []alerts.Rule) []reference {
	if len(p.Y) != 1 || p.Chart == dashboards.ChartPie || p.Chart == dashboards.ChartFunnel {
		return nil
	}
	var out []reference
	for _, r := range rules {
		if r.Value != p.Y[0] || r.Threshold == nil {
			continue
		}
		v := r.Threshold.Above
		if v == nil {
			v = r.Threshold.Below
		}
		out = append(out, reference{Value: *v, Label: "Alert: " + cols.Label(r.Value) + " " + r.ThresholdText(cols)})
	}
	return out
}
