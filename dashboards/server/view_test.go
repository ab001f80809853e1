package server

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/dashboards"
)

// A Series panel becomes one dataset per series value and one label per x value, both in
// order of first appearance, with null where a pair has no row; without Series each Y column
// is a dataset. Labels are formatted as table cells are (Date columns as days).
func TestChartDataFollowsThePanelShape(t *testing.T) {
	h1 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	h2 := h1.Add(time.Hour)
	res := &dashboards.Result{
		Columns: columns("hour", "DateTime", "reason", "String", "share", "Float64"),
		Rows:    [][]any{{h1, "b", 0.25}, {h1, "a", 0.75}, {h2, "a", 1.0}, {h2, "c", nil}},
	}
	p := dashboards.Panel{ID: "x", Chart: "stacked-bar", X: "hour", Y: []string{"share"}, Series: "reason"}
	got, _ := json.Marshal(chartFor(p, res))
	want := `{"type":"bar","stacked":true,"xTitle":"hour","yTitle":"share","labels":["2026-01-02 03:00:00","2026-01-02 04:00:00"],` +
		`"datasets":[{"label":"b","data":[0.25,null]},{"label":"a","data":[0.75,1]},{"label":"c","data":[null,null]}]}`
	if string(got) != want {
		t.Errorf("series chart\n got %s\nwant %s", got, want)
	}

	res = &dashboards.Result{
		Columns: columns("day", "Date", "sent", "UInt64", "opened", "UInt64"),
		Rows:    [][]any{{h1, 3.0, 1.0}, {h2.Add(24 * time.Hour), 4.0, 0.0}},
	}
	p = dashboards.Panel{ID: "y", Chart: "line", X: "day", Y: []string{"sent", "opened"}}
	got, _ = json.Marshal(chartFor(p, res))
	want = `{"type":"line","stacked":false,"xTitle":"day","yTitle":"","labels":["2026-01-02","2026-01-03"],` +
		`"datasets":[{"label":"sent","data":[3,4]},{"label":"opened","data":[1,0]}]}`
	if string(got) != want {
		t.Errorf("line chart\n got %s\nwant %s", got, want)
	}
}

// Cells are shown as text: NULL, whole and fractional numbers, UTC times.
func TestCellTextFormatsEachKind(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", -3600))
	for _, c := range []struct {
		v    any
		typ  string
		want string
	}{
		{nil, "Nullable(String)", "NULL"},
		{"<b>", "String", "<b>"},
		{42.0, "UInt64", "42"},
		{-3.0, "Int64", "-3"},
		{0.142857142857, "Float64", "0.142857"},
		{0.5, "Float64", "0.5"},
		{at, "DateTime", "2026-01-02 04:04:05"},
		{at, "Date", "2026-01-02"},
		{at, "Nullable(Date)", "2026-01-02"},
	} {
		if got := cellText(c.v, c.typ); got != c.want {
			t.Errorf("cellText(%v, %s) = %q, want %q", c.v, c.typ, got, c.want)
		}
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
