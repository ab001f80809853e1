package dashboards

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// Bench times every panel and, where there is one, its raw-table equivalent, and reports them
// in the shape `mcpulse bench dashboards` prints (the figures themselves are not asserted:
// speed is measured by the command, not by tests).
func TestBenchReportsEveryPanelWithItsRawPeer(t *testing.T) {
	withDemoData(t)
	ds := mustLoad(t)
	results, err := Bench(context.Background(), demoData.ch, ds, BenchConfig{Warmup: 1, Runs: 3})
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	for _, d := range ds {
		for _, p := range d.Panels {
			if i >= len(results) {
				t.Fatalf("%d results, fewer than the panels", len(results))
			}
			r := results[i]
			i++
			if r.Dashboard != d.Name || r.Panel != p.ID || r.Query != p.Query || r.Rows == 0 || r.MedianMS <= 0 || r.P95MS < r.MedianMS {
				t.Errorf("%s/%s: %+v", d.Name, p.ID, r)
			}
			if r.UnderBudget != (time.Duration(r.MedianMS*float64(time.Millisecond)) < Budget) {
				t.Errorf("%s/%s: under budget %v with median %v ms", d.Name, p.ID, r.UnderBudget, r.MedianMS)
			}
			if (p.RawQuery != "") != (r.RawMedianMS != nil && r.Ratio != nil && r.RawP95MS != nil) || r.RawQuery != p.RawQuery {
				t.Errorf("%s/%s: raw query %q, raw median %v, ratio %v", d.Name, p.ID, p.RawQuery, r.RawMedianMS, r.Ratio)
			}
		}
	}
	if i != len(results) {
		t.Errorf("%d results for %d panels", len(results), i)
	}

	var table bytes.Buffer
	if err := PrintBenchTable(&table, results); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(table.String()), "\n")
	if len(lines) != len(results)+1 || !strings.Contains(lines[0], "RAW MEDIAN ms") || !strings.Contains(lines[1], results[0].Panel) {
		t.Errorf("table:\n%s", table.String())
	}
	data, err := json.Marshal(results)
	if err != nil {
		t.Fatal(err)
	}
	var objects []map[string]any
	if err := json.Unmarshal(data, &objects); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"dashboard", "panel", "rows", "median_ms", "p95_ms", "raw_median_ms", "ratio", "under_200ms"} {
		if _, ok := objects[0][key]; !ok {
			t.Errorf("JSON object lacks %q: %s", key, data[:200])
		}
	}
}
