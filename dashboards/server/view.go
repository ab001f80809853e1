package server

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/dashboards"
)

// chartData is what the page hands Chart.js for one panel, as JSON inside a
// <script type="application/json"> element (never as markup): labels and dataset names are
// caller-chosen strings that Chart.js only ever draws as text on its canvas.
type chartData struct {
	// Type is Chart.js's chart type: "line", "bar" or "pie".
	Type string `json:"type"`
	// Stacked stacks the bars (panel chart "stacked-bar").
	Stacked bool `json:"stacked"`
	// XTitle and YTitle name the axes (column names); empty for pie, YTitle also when several
	// Y columns are drawn (the legend names them).
	XTitle string `json:"xTitle"`
	YTitle string `json:"yTitle"`
	// Labels are the x-axis (or pie slice) labels, formatted as cellText formats cells.
	Labels   []string  `json:"labels"`
	Datasets []dataset `json:"datasets"`
}

// dataset is one Chart.js dataset: a value per label, null where the result has none.
type dataset struct {
	Label string     `json:"label"`
	Data  []*float64 `json:"data"`
}

// chartFor shapes a query result into chart data for p: without Series, one dataset per Y
// column and one label per row (rows in the query's order); with Series, one label per
// distinct X value and one dataset per distinct Series value, both in order of first
// appearance, holding Y[0] (null where that pair has no row).
func chartFor(p dashboards.Panel, res *dashboards.Result) chartData {
	cd := chartData{Type: p.Chart, XTitle: p.X, Labels: []string{}, Datasets: []dataset{}}
	if len(p.Y) == 1 { // several columns are named by the legend instead
		cd.YTitle = p.Y[0]
	}
	switch p.Chart {
	case "stacked-bar":
		cd.Type, cd.Stacked = "bar", true
	case "pie":
		cd.XTitle, cd.YTitle = "", ""
	}
	col := map[string]int{}
	types := map[string]string{}
	for i, c := range res.Columns {
		col[c.Name] = i
		types[c.Name] = c.Type
	}
	xi, ok := col[p.X]
	if !ok {
		return cd
	}
	label := func(row []any) string { return cellText(row[xi], types[p.X]) }
	if p.Series == "" {
		for _, y := range p.Y {
			cd.Datasets = append(cd.Datasets, dataset{Label: y, Data: []*float64{}})
		}
		for _, row := range res.Rows {
			cd.Labels = append(cd.Labels, label(row))
			for d, y := range p.Y {
				var v *float64
				if yi, ok := col[y]; ok {
					v = number(row[yi])
				}
				cd.Datasets[d].Data = append(cd.Datasets[d].Data, v)
			}
		}
		return cd
	}
	si, ok1 := col[p.Series]
	yi, ok2 := -1, len(p.Y) > 0
	if ok2 {
		yi, ok2 = col[p.Y[0]]
	}
	if !ok1 || !ok2 {
		return cd
	}
	labelIndex := map[string]int{}
	seriesIndex := map[string]int{}
	type point struct {
		x, s int
		v    *float64
	}
	var points []point
	for _, row := range res.Rows {
		x := label(row)
		if _, ok := labelIndex[x]; !ok {
			labelIndex[x] = len(cd.Labels)
			cd.Labels = append(cd.Labels, x)
		}
		s := cellText(row[si], types[p.Series])
		if _, ok := seriesIndex[s]; !ok {
			seriesIndex[s] = len(cd.Datasets)
			cd.Datasets = append(cd.Datasets, dataset{Label: s})
		}
		points = append(points, point{labelIndex[x], seriesIndex[s], number(row[yi])})
	}
	for d := range cd.Datasets {
		cd.Datasets[d].Data = make([]*float64, len(cd.Labels))
	}
	for _, pt := range points {
		cd.Datasets[pt.s].Data[pt.x] = pt.v
	}
	return cd
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

// cellText formats one result cell for a table, a chart label or a CSV field: NULL as
// "NULL", times in UTC ("2006-01-02" for a Date column, "2006-01-02 15:04:05" otherwise),
// whole numbers without a fraction, other numbers with at most 6 decimals.
func cellText(v any, typ string) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
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
