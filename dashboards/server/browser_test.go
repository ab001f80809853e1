package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/mcpulse/mcpulse/dashboards"
)

// pageProbe reads, in the browser, what every panel of a dashboard page drew: the Chart.js
// instance's data and element counts (Chart.getChart) and the table's text.
const pageProbe = `JSON.stringify({
  images: document.querySelectorAll('img').length,
  scripts: Array.from(document.querySelectorAll('script')).map(s => s.src ? 'src:' + new URL(s.src).pathname : 'type:' + s.type),
  panels: Array.from(document.querySelectorAll('section.panel')).map(s => {
    const out = {id: s.dataset.panel, chart: s.dataset.chart, chartError: s.dataset.chartError === 'true',
      error: Array.from(s.querySelectorAll('.error')).map(e => e.textContent).join(' ')};
    const c = s.querySelector('canvas.chart');
    const chart = c ? Chart.getChart(c) : undefined;
    if (chart) {
      out.drawn = {type: chart.config.type, width: c.width, height: c.height, labels: chart.data.labels,
        datasets: chart.data.datasets.map((d, i) => ({label: d.label, data: d.data, elements: chart.getDatasetMeta(i).data.length}))};
    }
    const t = s.querySelector('table');
    if (t) {
      out.table = {head: Array.from(t.querySelectorAll('thead th')).map(e => e.textContent),
        rows: Array.from(t.querySelectorAll('tbody tr:not(.empty)')).map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent))};
    }
    return out;
  }),
})`

type probedPage struct {
	Images  int           `json:"images"`
	Scripts []string      `json:"scripts"`
	Panels  []probedPanel `json:"panels"`
}

type probedPanel struct {
	ID         string `json:"id"`
	Chart      string `json:"chart"`
	ChartError bool   `json:"chartError"`
	Error      string `json:"error"`
	Drawn      *struct {
		Type     string   `json:"type"`
		Width    int      `json:"width"`
		Height   int      `json:"height"`
		Labels   []string `json:"labels"`
		Datasets []struct {
			Label    string     `json:"label"`
			Data     []*float64 `json:"data"`
			Elements int        `json:"elements"`
		} `json:"datasets"`
	} `json:"drawn"`
	Table *struct {
		Head []string   `json:"head"`
		Rows [][]string `json:"rows"`
	} `json:"table"`
}

// Every dashboard, loaded in headless Chromium over demo data plus hostile events, draws each
// chart with exactly the figures its SQL returns (labels and values read back from the Chart.js
// instances) and each table with exactly its cells; hostile key names, client names and
// distinct ids show as text and run nothing (no dialog, no console error, no <img> from data).
//
// A full-page screenshot of each dashboard is saved as a test artifact; keep them with
//
//	mkdir -p /tmp/shots && go test ./dashboards/server -run TestEveryDashboardDrawsItsQueryFigures -artifacts -outputdir /tmp/shots
//
// (they land under /tmp/shots/_artifacts/...; without -artifacts they are removed).
func TestEveryDashboardDrawsItsQueryFigures(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("headless Chromium is needed: install Debian's chromium (apt-get install chromium; `command -v chromium` must find it): %v", err)
	}
	fx := sharedFixture(t)
	ts := newTestServer(t, Config{}, fx.ch)
	shots := t.ArtifactDir()

	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.WindowSize(1400, 1000), chromedp.UserDataDir(profile))
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelTimeout()

	// Subscribe before the first page loads, so nothing the pages do is missed.
	var (
		mu       sync.Mutex
		dialogs  []string
		problems []string
	)
	dialogEvents := chromedp.Events(ctx, page.JavascriptDialogOpening)
	console := chromedp.Console(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		for ev, err := range dialogEvents {
			if err != nil {
				return
			}
			mu.Lock()
			dialogs = append(dialogs, fmt.Sprintf("%s: %q", ev.Type, ev.Message))
			mu.Unlock()
			_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
		}
	})
	wg.Go(func() {
		for msg, err := range console {
			if err != nil {
				return
			}
			switch {
			case msg.Type == chromedp.ConsoleError || msg.IsException():
				mu.Lock()
				problems = append(problems, msg.String())
				mu.Unlock()
			case msg.Type == chromedp.ConsoleWarning:
				t.Logf("browser console: %s", msg)
			}
		}
	})

	// Control: the listeners do see a dialog and a console error, so their silence below means
	// the pages made none.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"),
		chromedp.Evaluate[chromedp.Void](`setTimeout(() => { console.error('control'); alert('control'); }, 0)`)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		seenBoth := len(dialogs) == 1 && len(problems) == 1
		if seenBoth || time.Now().After(deadline) {
			dialogs, problems = nil, nil
			mu.Unlock()
			if !seenBoth {
				t.Fatal("the control dialog and console error were not both observed; the checks below would prove nothing")
			}
			break
		}
		mu.Unlock()
	}

	if len(fx.dash) == 0 {
		t.Fatal("dashboards.Load returned no dashboard")
	}
	var seen, charted []string // every label, dataset name and cell the browser shows; those of charts
	for _, d := range fx.dash {
		t.Run(d.Name, func(t *testing.T) {
			if err := chromedp.Do(ctx,
				chromedp.Navigate(ts.URL+"/dashboards/"+url.PathEscape(d.Name)),
				chromedp.WaitReady(chromedp.CSS(`body[data-charts-ready="true"]`)),
			); err != nil {
				t.Fatal(err)
			}
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](pageProbe))
			if err != nil {
				t.Fatal(err)
			}
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100: PNG
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shots, d.Name+".png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
			var got probedPage
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatal(err)
			}
			if got.Images != 0 {
				t.Errorf("the page holds %d <img> elements; it has none of its own, so data made them", got.Images)
			}
			want := []string{"type:application/json", "src:/assets/chart.umd.min.js", "src:/assets/dashboard.js"}
			for _, s := range got.Scripts {
				if !slices.Contains(want, s) {
					t.Errorf("unexpected script element %q", s)
				}
			}
			if len(got.Panels) != len(d.Panels) {
				t.Fatalf("page shows %d panels, dashboard defines %d", len(got.Panels), len(d.Panels))
			}
			for i, p := range d.Panels {
				res, err := dashboards.Run(context.Background(), fx.ch, p, dashboards.Filters{})
				if err != nil {
					t.Fatalf("panel %s: %v", p.ID, err)
				}
				shown := checkPanel(t, p, res, got.Panels[i])
				seen = append(seen, shown...)
				if p.Chart != "table" {
					charted = append(charted, shown...)
				}
			}
		})
	}

	// A page opened with ?token= (how a browser presents the access token) draws as well: its
	// assets load without the token, and its links carry it.
	t.Run("token-in-URL", func(t *testing.T) {
		tok := newTestServer(t, Config{Token: "browser-token"}, fx.ch)
		d := fx.dash[0]
		if err := chromedp.Do(ctx,
			chromedp.Navigate(tok.URL+"/dashboards/"+url.PathEscape(d.Name)+"?token=browser-token"),
			chromedp.WaitReady(chromedp.CSS(`body[data-charts-ready="true"]`)),
		); err != nil {
			t.Fatal(err)
		}
		raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](`JSON.stringify({
			charts: Array.from(document.querySelectorAll('canvas.chart')).filter(c => Chart.getChart(c)).length,
			links: Array.from(document.querySelectorAll('a[download], header a')).map(a => new URL(a.href).searchParams.get('token')),
		})`))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Charts int       `json:"charts"`
			Links  []*string `json:"links"`
		}
		if err := json.Unmarshal([]byte(raw), &got); err != nil {
			t.Fatal(err)
		}
		charts := 0
		for _, p := range d.Panels {
			if p.Chart != "table" {
				charts++
			}
		}
		if got.Charts != charts {
			t.Errorf("%d charts drawn, dashboard %s has %d", got.Charts, d.Name, charts)
		}
		for _, l := range got.Links {
			if l == nil || *l != "browser-token" {
				t.Errorf("a link of the page does not carry the token: %v", l)
			}
		}
	})

	cancel() // ends the subscriptions
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for _, d := range dialogs {
		t.Errorf("a JavaScript dialog opened: %s", d)
	}
	for _, p := range problems {
		t.Errorf("browser console: %s", p)
	}
	for _, s := range append(slices.Clone(shownKeys), hostileClient, hostileTool) {
		if !slices.Contains(seen, s) {
			t.Errorf("hostile string %q is shown by no chart label or table cell; the pages must show it as text", s)
		}
	}
	if !slices.Contains(charted, hostileTool) {
		t.Errorf("hostile tool name %q is in no chart's labels, so chart text is not exercised", hostileTool)
	}
	t.Logf("screenshots in %s", shots)
}

// checkPanel compares what the browser drew for p with res, and returns the texts it showed.
func checkPanel(t *testing.T, p dashboards.Panel, res *dashboards.Result, got probedPanel) (shown []string) {
	t.Helper()
	where := "panel " + p.ID
	if got.ID != p.ID {
		t.Errorf("%s: the page shows panel %q in its place", where, got.ID)
		return nil
	}
	if got.Error != "" || got.ChartError {
		t.Errorf("%s: the page shows an error: %s (chart error: %v)", where, got.Error, got.ChartError)
		return nil
	}
	if len(res.Rows) == 0 {
		t.Errorf("%s: the query returned no rows over the demo data, so the test proves nothing for it", where)
	}
	if p.Chart == "table" {
		if got.Table == nil {
			t.Errorf("%s: no table drawn", where)
			return nil
		}
		var head []string
		for _, c := range res.Columns {
			head = append(head, c.Name)
		}
		if !slices.Equal(got.Table.Head, head) {
			t.Errorf("%s: table header %q, query columns %q", where, got.Table.Head, head)
		}
		if len(got.Table.Rows) != len(res.Rows) {
			t.Errorf("%s: table has %d rows, query returned %d", where, len(got.Table.Rows), len(res.Rows))
			return nil
		}
		for r, row := range res.Rows {
			for c, v := range row {
				wantText := cellText(v, res.Columns[c].Type)
				if c >= len(got.Table.Rows[r]) || got.Table.Rows[r][c] != wantText {
					t.Errorf("%s: row %d column %s: page shows %q, query returned %q", where, r, res.Columns[c].Name, got.Table.Rows[r], wantText)
					break
				}
			}
			shown = append(shown, got.Table.Rows[r]...)
		}
		return shown
	}

	drawn := got.Drawn
	if drawn == nil {
		t.Errorf("%s: no Chart.js chart on its canvas", where)
		return nil
	}
	wantType := map[string]string{"line": "line", "bar": "bar", "stacked-bar": "bar", "pie": "pie"}[p.Chart]
	if drawn.Type != wantType {
		t.Errorf("%s: Chart.js type %q, want %q for chart %q", where, drawn.Type, wantType, p.Chart)
	}
	if drawn.Width == 0 || drawn.Height == 0 {
		t.Errorf("%s: canvas is %dx%d", where, drawn.Width, drawn.Height)
	}
	for _, ds := range drawn.Datasets {
		if ds.Elements != len(drawn.Labels) {
			t.Errorf("%s: dataset %q drew %d elements for %d labels", where, ds.Label, ds.Elements, len(drawn.Labels))
		}
	}
	col := map[string]int{}
	for i, c := range res.Columns {
		col[c.Name] = i
	}
	xType := res.Columns[col[p.X]].Type
	shown = append(shown, drawn.Labels...)
	for _, ds := range drawn.Datasets {
		shown = append(shown, ds.Label)
	}

	if p.Series == "" {
		var labels []string
		for _, row := range res.Rows {
			labels = append(labels, cellText(row[col[p.X]], xType))
		}
		if !slices.Equal(drawn.Labels, labels) {
			t.Errorf("%s: labels %q, query returned %q", where, drawn.Labels, labels)
		}
		if len(drawn.Datasets) != len(p.Y) {
			t.Errorf("%s: %d datasets, panel draws %d columns %q", where, len(drawn.Datasets), len(p.Y), p.Y)
			return shown
		}
		for d, y := range p.Y {
			if drawn.Datasets[d].Label != y {
				t.Errorf("%s: dataset %d is %q, want column %q", where, d, drawn.Datasets[d].Label, y)
			}
			var want []*float64
			for _, row := range res.Rows {
				want = append(want, number(row[col[y]]))
			}
			if !equalValues(drawn.Datasets[d].Data, want) {
				t.Errorf("%s: %s values %s, query returned %s", where, y, showValues(drawn.Datasets[d].Data), showValues(want))
			}
		}
		return shown
	}

	// One dataset per Series value: every (x, series) cell of the result must be drawn at its
	// label in its dataset, and nothing else.
	type key struct{ x, s string }
	want := map[key]*float64{}
	var xs, ss []string
	for _, row := range res.Rows {
		k := key{cellText(row[col[p.X]], xType), cellText(row[col[p.Series]], res.Columns[col[p.Series]].Type)}
		want[k] = number(row[col[p.Y[0]]])
		if !slices.Contains(xs, k.x) {
			xs = append(xs, k.x)
		}
		if !slices.Contains(ss, k.s) {
			ss = append(ss, k.s)
		}
	}
	var names []string
	for _, ds := range drawn.Datasets {
		names = append(names, ds.Label)
	}
	if !slices.Equal(drawn.Labels, xs) || !slices.Equal(names, ss) {
		t.Errorf("%s: labels %q and series %q, query returned %q and %q", where, drawn.Labels, names, xs, ss)
		return shown
	}
	for _, ds := range drawn.Datasets {
		for i, v := range ds.Data {
			w := want[key{drawn.Labels[i], ds.Label}]
			if !equalValues([]*float64{v}, []*float64{w}) {
				t.Errorf("%s: series %q at %q: drawn %s, query returned %s", where, ds.Label, drawn.Labels[i], showValues([]*float64{v}), showValues([]*float64{w}))
			}
		}
	}
	return shown
}

func equalValues(a, b []*float64) bool {
	return slices.EqualFunc(a, b, func(x, y *float64) bool {
		return (x == nil && y == nil) || (x != nil && y != nil && *x == *y)
	})
}

func showValues(v []*float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		if x == nil {
			parts[i] = "null"
		} else {
			parts[i] = fmt.Sprint(*x)
		}
	}
	return "[" + strings.Join(parts, " ") + "]"
}
