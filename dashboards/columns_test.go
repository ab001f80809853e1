package dashboards

import (
	"strings"
	"testing"
	"time"
)

// Every format reads as a person expects: percentages with one decimal (small shares kept
// visible, never rounded up to 100%), counts with thousands separators, durations in ms or
// s, blanks (or the column's null text) for NULL, never the word NULL.
func TestColumnFormats(t *testing.T) {
	for _, tc := range []struct {
		format string
		v      float64
		want   string
	}{
		{FormatPercent, 0.228571, "22.9%"},
		{FormatPercent, 0, "0%"},
		{FormatPercent, 1, "100%"},
		{FormatPercent, 0.99999, "99.9%"},
		{FormatPercent, 0.0004, "0.04%"},
		{FormatPercent, 0.00001, "<0.01%"},
		{FormatPercent, 0.5, "50%"},
		{FormatCount, 1234567, "1,234,567"},
		{FormatCount, 999, "999"},
		{FormatCount, -1234, "-1,234"},
		{FormatChars, 27719, "27,719 chars"},
		{FormatMillis, 840.4, "840 ms"},
		{FormatMillis, 1240, "1.24 s"},
		{FormatMillis, 2.5, "2.5 ms"},
		{FormatMillis, 90000, "1.5 min"},
		{FormatNumber, 1.87512, "1.875"},
		{FormatNumber, 3, "3"},
		{FormatBool, 1, "yes"},
		{FormatBool, 0, "no"},
		{FormatPoints, 0.021, "+2.1 pp"},
		{FormatPoints, -0.05, "-5 pp"},
		{FormatPoints, -0.0004, "±0 pp"},
		{FormatChange, 0.35, "+35%"},
		{FormatChange, -0.5, "-50%"},
	} {
		if got := FormatValue(tc.format, tc.v); got != tc.want {
			t.Errorf("FormatValue(%s, %v) = %q, want %q", tc.format, tc.v, got, tc.want)
		}
	}
	cols := Columns{
		"rate": {Label: "Rate", Format: FormatPercent, Null: "not measured"},
		"day":  {Label: "Day", Format: FormatDate},
		"at":   {Label: "At", Format: FormatTime},
		"hour": {Label: "Hour", Format: FormatHour},
	}
	hour := time.Date(2026, 11, 30, 14, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		col  string
		v    any
		typ  string
		want string
	}{
		{"rate", nil, "Nullable(Float64)", "not measured"},
		{"rate", 0.0, "Float64", "0%"},
		{"other", nil, "Nullable(String)", ""},
		{"day", hour, "Date", "2026-11-30"},
		{"hour", hour, "DateTime('UTC')", "2026-11-30 14:00"},
		{"at", hour, "DateTime('UTC')", "2026-11-30 14:00:00"},
		{"at", hour.Add(7 * time.Second), "DateTime('UTC')", "2026-11-30 14:00:07"},
		{"other", "text", "String", "text"},
	} {
		if got := cols.Text(tc.col, tc.v, tc.typ); got != tc.want {
			t.Errorf("Text(%s, %v) = %q, want %q", tc.col, tc.v, got, tc.want)
		}
	}
	if got := cols.Label("unlisted"); got != "unlisted" {
		t.Errorf("Label of an unlisted column = %q, want its name", got)
	}
}

// The embedded columns.yaml loads, labels every column, and a bad entry is refused naming it.
func TestColumnsFileLoads(t *testing.T) {
	cs, err := LoadColumns()
	if err != nil {
		t.Fatal(err)
	}
	if cs.Spec("ignored_key_rate").Format != FormatPercent || cs.Spec("ignored_key_rate").Null != "not measured" {
		t.Errorf("ignored_key_rate: %+v, want a percentage shown as 'not measured' when NULL", cs.Spec("ignored_key_rate"))
	}
	_, err = parseColumns([]byte("a: {label: A, format: money}\nb: {format: count}\n"))
	if err == nil || !strings.Contains(err.Error(), `column "a": unknown format "money"`) || !strings.Contains(err.Error(), `column "b" has no label`) {
		t.Errorf("bad columns file: %v", err)
	}
	if _, err := parseColumns([]byte("a: {label: A, colour: red}\n")); err == nil {
		t.Error("an unknown field was accepted")
	}
}

// The previous period has the range's length and ends where the range starts; an open range
// compares the DefaultPeriod before now with the one before that.
func TestPreviousPeriod(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 30, 0, 0, time.UTC)
	from, to := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC), time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	pf, pt, cf, ct := Filters{From: from, To: to, Now: now}.Previous()
	if !cf.Equal(from) || !ct.Equal(to) || !pt.Equal(from) || !pf.Equal(from.Add(-48*time.Hour)) {
		t.Errorf("closed range: previous %v..%v, current %v..%v", pf, pt, cf, ct)
	}
	pf, pt, cf, ct = Filters{Now: now}.Previous()
	if !ct.Equal(now) || !cf.Equal(now.Add(-DefaultPeriod)) || !pt.Equal(cf) || !pf.Equal(cf.Add(-DefaultPeriod)) {
		t.Errorf("open range: previous %v..%v, current %v..%v", pf, pt, cf, ct)
	}
	p := Panel{ID: "p", Params: []string{ParamPeriodFrom, ParamPeriodTo, ParamPrevFrom, ParamPrevTo, ParamMinCalls}}
	args := Filters{From: from, To: to, Now: now}.Args(p)
	want := []time.Time{from, to.Add(-time.Second), from.Add(-48 * time.Hour), from.Add(-time.Second)}
	for i, w := range want {
		if !args[i].(time.Time).Equal(w) {
			t.Errorf("arg %s = %v, want %v", p.Params[i], args[i], w)
		}
	}
	if args[4] != uint64(DefaultMinCalls) {
		t.Errorf("min_calls = %v, want %d", args[4], DefaultMinCalls)
	}
}
