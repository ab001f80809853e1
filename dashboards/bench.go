package dashboards

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Budget is the latency a panel's query must stay under on the demo's data at 1,000,000 events
// (the project's dashboard budget), measured as the median of BenchConfig.Runs runs.
const Budget = 200 * time.Millisecond

// BenchConfig says how Bench times the panels.
type BenchConfig struct {
	// Filters are bound to every query. Default: the zero Filters (all time, no selection,
	// DefaultLimit).
	Filters Filters
	// Warmup runs of each query are made and not timed. Default: 3.
	Warmup int
	// Runs are timed per query. Default: 20.
	Runs int
}

func (c *BenchConfig) setDefaults() {
	if c.Warmup <= 0 {
		c.Warmup = 3
	}
	if c.Runs <= 0 {
		c.Runs = 20
	}
}

// BenchResult is one panel's timing: the wall time from sending its query to reading its last
// row, over the same connection the dashboards use.
type BenchResult struct {
	Dashboard string  `json:"dashboard"`
	Panel     string  `json:"panel"`
	Query     string  `json:"query"`
	Rows      int     `json:"rows"`
	MedianMS  float64 `json:"median_ms"`
	P95MS     float64 `json:"p95_ms"`
	// RawQuery, RawMedianMS and RawP95MS time the panel's raw-table equivalent (nil when the
	// panel has none: it reads raw tables already).
	RawQuery    string   `json:"raw_query,omitempty"`
	RawMedianMS *float64 `json:"raw_median_ms"`
	RawP95MS    *float64 `json:"raw_p95_ms"`
	// Ratio is RawMedianMS / MedianMS: how many times faster the panel is than the same
	// figures computed from the raw tables (nil without a raw equivalent).
	Ratio *float64 `json:"ratio"`
	// UnderBudget says MedianMS < Budget.
	UnderBudget bool `json:"under_200ms"`
}

// Bench times every panel of every dashboard (and its raw equivalent) with cfg.Filters: Warmup
// untimed runs, then the median and 95th percentile (nearest rank) of Runs timed runs.
func Bench(ctx context.Context, conn driver.Conn, dashboards []Dashboard, cfg BenchConfig) ([]BenchResult, error) {
	cfg.setDefaults()
	var out []BenchResult
	for _, d := range dashboards {
		for _, p := range d.Panels {
			args := cfg.Filters.Args(p)
			rows, times, err := timeQuery(ctx, conn, p.Query, args, cfg)
			if err != nil {
				return nil, fmt.Errorf("%s/%s: %w", d.Name, p.ID, err)
			}
			r := BenchResult{Dashboard: d.Name, Panel: p.ID, Query: p.Query, Rows: rows,
				MedianMS: ms(percentile(times, 50)), P95MS: ms(percentile(times, 95))}
			r.UnderBudget = percentile(times, 50) < Budget
			if p.RawQuery != "" {
				_, raw, err := timeQuery(ctx, conn, p.RawQuery, args, cfg)
				if err != nil {
					return nil, fmt.Errorf("%s/%s raw: %w", d.Name, p.ID, err)
				}
				med, p95 := ms(percentile(raw, 50)), ms(percentile(raw, 95))
				ratio := math.Round(med/math.Max(r.MedianMS, 0.001)*10) / 10
				r.RawQuery, r.RawMedianMS, r.RawP95MS, r.Ratio = p.RawQuery, &med, &p95, &ratio
			}
			out = append(out, r)
		}
	}
	return out, nil
}

// timeQuery runs a query cfg.Warmup times, then cfg.Runs timed times; it returns the row count
// of the last run and the timings.
func timeQuery(ctx context.Context, conn driver.Conn, query string, args []any, cfg BenchConfig) (int, []time.Duration, error) {
	var rows int
	for range cfg.Warmup {
		if _, err := runQuery(ctx, conn, query, args); err != nil {
			return 0, nil, err
		}
	}
	times := make([]time.Duration, 0, cfg.Runs)
	for range cfg.Runs {
		start := time.Now()
		res, err := runQuery(ctx, conn, query, args)
		if err != nil {
			return 0, nil, err
		}
		times = append(times, time.Since(start))
		rows = len(res.Rows)
	}
	return rows, times, nil
}

// percentile is the nearest-rank percentile q (0 < q <= 100) of ds.
func percentile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(q / 100 * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}

func ms(d time.Duration) float64 { return math.Round(float64(d.Microseconds())/10) / 100 }

// PrintBenchTable writes the results as an aligned table: one line per panel with its median
// and p95, its raw-table equivalent's median and the ratio, and whether it is under Budget.
func PrintBenchTable(w io.Writer, results []BenchResult) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "DASHBOARD\tPANEL\tROWS\tMEDIAN ms\tP95 ms\tRAW MEDIAN ms\tRAW/PANEL\tUNDER 200 ms\t")
	for _, r := range results {
		raw, ratio := "-", "-"
		if r.RawMedianMS != nil {
			raw = strconv.FormatFloat(*r.RawMedianMS, 'f', 2, 64)
			ratio = strconv.FormatFloat(*r.Ratio, 'f', 1, 64) + "x"
		}
		under := "yes"
		if !r.UnderBudget {
			under = "NO"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%s\t%s\t%s\t\n", r.Dashboard, r.Panel, r.Rows, r.MedianMS, r.P95MS, raw, ratio, under)
	}
	return tw.Flush()
}
