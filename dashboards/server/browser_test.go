package server

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// pageProbe reads, in the browser, what every panel of a dashboard page shows: each Chart.js
// instance's data, dataset styles, axis types, titles and tick texts, and the tooltip text of
// every point (through the page's own tooltip callback); the tables' headers and cells (per
// collapsible group); the empty states and notes.
const pageProbe = `JSON.stringify({
  images: document.querySelectorAll('img').length,
  scripts: Array.from(document.querySelectorAll('script')).map(s => s.src ? 'src:' + new URL(s.src).pathname : 'type:' + s.type),
  text: document.body.innerText,
  panels: Array.from(document.querySelectorAll('section.panel')).map(s => {
    const out = {id: s.dataset.panel, chart: s.dataset.chart, chartError: s.dataset.chartError === 'true',
      error: Array.from(s.querySelectorAll('.error')).map(e => e.textContent).join(' '),
      empty: Array.from(s.querySelectorAll('.empty-state')).map(e => e.textContent.trim()).join(' '),
      notes: Array.from(s.querySelectorAll('.note')).map(e => e.textContent.trim()),
      charts: []};
    s.querySelectorAll('canvas.chart').forEach(c => {
      const chart = Chart.getChart(c);
      if (!chart) { out.charts.push(null); return; }
      const label = chart.config.options.plugins.tooltip.callbacks.label;
      const scale = id => chart.scales[id] ? {type: chart.scales[id].type, title: chart.scales[id].options.title.text || '',
        ticks: chart.scales[id].ticks.map(t => String(t.label)), max: chart.scales[id].options.max ?? null} : null;
      const ann = chart.config.options.plugins.annotation;
      out.charts.push({type: chart.config.type, width: c.width, height: c.height, title: c.getAttribute('aria-label'),
        references: Object.values((ann && ann.annotations) || {}).map(a => a.label.content + ' @' + a.value),
        labels: chart.data.labels.map(l => Array.isArray(l) ? l.join('\n') : String(l)), x: scale('x'), y: scale('y'),
        datasets: chart.data.datasets.map((d, i) => ({label: d.label, data: d.data,
          color: Array.isArray(d.backgroundColor) ? d.backgroundColor.join(',') : String(d.borderColor || d.backgroundColor),
          dashed: Array.isArray(d.borderDash) && d.borderDash.length > 0,
          elements: chart.getDatasetMeta(i).data.length,
          tips: d.data.map((v, j) => v === null ? null : label({dataset: d, dataIndex: j}) ?? null)}))});
    });
    const rows = t => Array.from(t.querySelectorAll('tbody tr')).map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.textContent));
    const groups = Array.from(s.querySelectorAll('details.group'));
    const t = s.querySelector('table');
    if (t) {
      out.table = {head: Array.from(t.querySelectorAll('thead th')).map(e => e.textContent),
        rows: groups.length ? [] : rows(t),
        groups: groups.map(g => ({title: g.querySelector('.group-title').textContent, open: g.open, rows: rows(g.querySelector('table'))}))};
    }
    return out;
  }),
})`

type probedPage struct {
	Images  int           `json:"images"`
	Scripts []string      `json:"scripts"`
	Text    string        `json:"text"`
	Panels  []probedPanel `json:"panels"`
}

type probedPanel struct {
	ID         string         `json:"id"`
	Chart      string         `json:"chart"`
	ChartError bool           `json:"chartError"`
	Error      string         `json:"error"`
	Empty      string         `json:"empty"`
	Notes      []string       `json:"notes"`
	Charts     []*probedChart `json:"charts"`
	Table      *struct {
		Head   []string   `json:"head"`
		Rows   [][]string `json:"rows"`
		Groups []struct {
			Title string     `json:"title"`
			Open  bool       `json:"open"`
			Rows  [][]string `json:"rows"`
		} `json:"groups"`
	} `json:"table"`
}

type probedChart struct {
	Type       string       `json:"type"`
	References []string     `json:"references"`
	Width      int          `json:"width"`
	Height     int          `json:"height"`
	Title      string       `json:"title"`
	Labels     []string     `json:"labels"`
	X          *probedScale `json:"x"`
	Y          *probedScale `json:"y"`
	Datasets   []struct {
		Label    string     `json:"label"`
		Data     []*float64 `json:"data"`
		Color    string     `json:"color"`
		Dashed   bool       `json:"dashed"`
		Elements int        `json:"elements"`
		Tips     []*string  `json:"tips"`
	} `json:"datasets"`
}

type probedScale struct {
	Type  string   `json:"type"`
	Title string   `json:"title"`
	Ticks []string `json:"ticks"`
	Max   *float64 `json:"max"`
}

// Every dashboard, loaded in headless Chromium over demo data plus hostile events, draws each
// chart with exactly the figures its SQL returns (labels and values read back from the Chart.js
// instances) and each table with exactly its cells; hostile key names, client names and
// distinct ids show as text and run nothing (no dialog, no console error, no <img> from data).
//
// A full-page screenshot of each dashboard (<name>.png, and <name>-empty.png over a range
// without data) is written to the folder named by $MCPULSE_SCREENSHOTS (a relative path is
// taken from the repository's root; `make screenshots` writes dashboards/screenshots/, the
// copies kept in the repository); without it, to the test's artifact directory (kept with
// `-artifacts -outputdir DIR`, else removed).
func TestEveryDashboardDrawsItsQueryFigures(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		t.Fatalf("headless Chromium is needed: install Debian's chromium (apt-get install chromium; `command -v chromium` must find it): %v", err)
	}
	fx := sharedFixture(t)
	ts := newTestServer(t, Config{}, fx.ch)
	shots := screenshotDir(t)

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
	rules, err := alerts.DefaultRules(fx.dash)
	if err != nil {
		t.Fatal(err)
	}
	referenced := false
	for _, r := range rules {
		referenced = referenced || r.Threshold != nil
	}
	if !referenced {
		t.Fatal("no built-in rule has a fixed threshold, so reference lines are not exercised")
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
			want := []string{"type:application/json", "src:/assets/dashboard.js"}
			for _, lib := range Libraries {
				want = append(want, "src:/assets/vendor/"+lib.Name)
			}
			for _, s := range got.Scripts {
				if !slices.Contains(want, s) {
					t.Errorf("unexpected script element %q", s)
				}
			}
			if len(got.Panels) != len(d.Panels) {
				t.Fatalf("page shows %d panels, dashboard defines %d", len(got.Panels), len(d.Panels))
			}
			if strings.Contains(got.Text, "NULL") {
				t.Error("the page shows the word NULL; a missing value is blank or says what it means")
			}
			if i := strings.IndexFunc(got.Text, hiddenNonASCII); i >= 0 {
				t.Errorf("the page's text holds a raw control or bidi character: %.80q", got.Text[max(0, i-40):])
			}
			for i, p := range d.Panels {
				res, err := dashboards.Run(context.Background(), fx.ch, p, dashboards.Filters{})
				if err != nil {
					t.Fatalf("panel %s: %v", p.ID, err)
				}
				shown := checkPanel(t, p, d.Columns, rules, res, got.Panels[i])
				seen = append(seen, shown...)
				if p.Chart != "table" {
					charted = append(charted, shown...)
				}
			}
		})
	}

	// Over a range without data every panel that takes the range and has no row says why it
	// is empty, in place of an empty chart or table.
	emptyRange := dashboards.Filters{From: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC), To: time.Date(2001, 1, 2, 0, 0, 0, 0, time.UTC)}
	t.Run("empty-states", func(t *testing.T) {
		for _, d := range fx.dash {
			if err := chromedp.Do(ctx,
				chromedp.Navigate(ts.URL+"/dashboards/"+url.PathEscape(d.Name)+"?from=2001-01-01&to=2001-01-02"),
				chromedp.WaitReady(chromedp.CSS(`body[data-charts-ready="true"]`)),
			); err != nil {
				t.Fatal(err)
			}
			raw, err := chromedp.Run(ctx, chromedp.Evaluate[string](pageProbe))
			if err != nil {
				t.Fatal(err)
			}
			shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shots, d.Name+"-empty.png"), shot, 0o644); err != nil {
				t.Fatal(err)
			}
			var got probedPage
			if err := json.Unmarshal([]byte(raw), &got); err != nil {
				t.Fatal(err)
			}
			for i, p := range d.Panels {
				if !slices.ContainsFunc(panelFilters(p), func(f filterUse) bool { return f.Name == "time range" && f.Applies }) {
					continue
				}
				res, err := dashboards.Run(context.Background(), fx.ch, p, emptyRange)
				if err != nil {
					t.Fatal(err)
				}
				g := got.Panels[i]
				if len(res.Rows) > 0 { // e.g. tool coverage: the tools listed, none called in the range
					if g.Empty != "" {
						t.Errorf("%s/%s: empty state %q over %d rows", d.Name, p.ID, g.Empty, len(res.Rows))
					}
					continue
				}
				want := "No data for these filters (time range 2001-01-01 to 2001-01-02)."
				if !strings.HasPrefix(g.Empty, want) || !strings.Contains(g.Empty, strings.Join(strings.Fields(p.Empty), " ")) {
					t.Errorf("%s/%s: empty state %q, want %q followed by the panel's own explanation %q", d.Name, p.ID, g.Empty, want, p.Empty)
				}
				if len(g.Charts) > 0 || g.Table != nil {
					t.Errorf("%s/%s: draws a chart or table over no data", d.Name, p.ID)
				}
			}
		}
	})

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
			canvases: document.querySelectorAll('canvas.chart').length,
			charts: Array.from(document.querySelectorAll('canvas.chart')).filter(c => Chart.getChart(c)).length,
			links: Array.from(document.querySelectorAll('a[download], header a')).map(a => new URL(a.href).searchParams.get('token')),
		})`))
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Canvases int       `json:"canvases"`
			Charts   int       `json:"charts"`
			Links    []*string `json:"links"`
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
		if got.Charts != got.Canvases || got.Charts < charts {
			t.Errorf("%d of %d canvases drawn, dashboard %s has %d chart panels", got.Charts, got.Canvases, d.Name, charts)
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
	for _, s := range seen {
		if strings.IndexFunc(s, hiddenNonASCII) >= 0 {
			t.Errorf("a chart label, tooltip or table cell holds a raw control or bidi character: %q", s)
		}
	}
	for _, s := range append(slices.Clone(shownKeys), hostileClient, hostileTool, hostileEvent) {
		if !slices.Contains(seen, shown(s)) {
			t.Errorf("hostile string %q is shown by no chart label or table cell as %q; the pages must show it as text, control and bidi characters escaped", s, shown(s))
		}
	}
	for _, s := range []string{hostileTool, hostileEvent} {
		if !slices.Contains(charted, shown(s)) {
			t.Errorf("hostile name %q is in no chart's labels as %q, so chart text is not exercised", s, shown(s))
		}
	}
	t.Logf("screenshots in %s", shots)
}

// screenshotsEnv names the folder the browser test writes its screenshots to.
const screenshotsEnv = "MCPULSE_SCREENSHOTS"

// screenshotDir is $MCPULSE_SCREENSHOTS (created; relative to the repository's root), or the
// test's artifact directory when it is not set.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return t.ArtifactDir()
	}
	if !filepath.IsAbs(dir) {
		_, file, _, _ := runtime.Caller(0)
		dir = filepath.Join(filepath.Dir(file), "..", "..", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("%s: %v", screenshotsEnv, err)
	}
	return filepath.Clean(dir)
}

// hiddenNonASCII reports a character outside ASCII that does not show as itself (U+202E and
// the other bidi and format characters, C1 controls, line separators).
func hiddenNonASCII(r rune) bool { return r >= 0x80 && safetext.Hidden(r) }

// percentText is a percentage as the pages show one: "22.9%", "0%", "<0.01%", "+35%".
var percentText = regexp.MustCompile(`^[+±-]?[<>]?-?[0-9]+(\.[0-9]+)?%$`)

// checkPanel compares what the browser shows for p with res (its query's rows under the
// default filters) and returns the texts it showed.
func checkPanel(t *testing.T, p dashboards.Panel, cols dashboards.Columns, rules []alerts.Rule, res *dashboards.Result, got probedPanel) (shown []string) {
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
		return nil
	}
	if got.Empty != "" {
		t.Errorf("%s: shows the empty state %q over %d rows", where, got.Empty, len(res.Rows))
	}
	for _, c := range res.Columns {
		if _, ok := cols[c.Name]; !ok {
			t.Errorf("%s: column %q has no label in dashboards/columns.yaml", where, c.Name)
		}
	}
	if p.Chart == dashboards.ChartTable {
		return checkTable(t, where, p, cols, res, got)
	}
	if len(got.Charts) == 0 {
		t.Errorf("%s: no chart drawn", where)
		return nil
	}
	for _, c := range got.Charts {
		if c == nil {
			t.Errorf("%s: a canvas has no Chart.js chart", where)
			return nil
		}
		if c.Width == 0 || c.Height == 0 {
			t.Errorf("%s: canvas is %dx%d", where, c.Width, c.Height)
		}
		for _, ds := range c.Datasets {
			if ds.Elements != len(c.Labels) {
				t.Errorf("%s: dataset %q drew %d elements for %d labels", where, ds.Label, ds.Elements, len(c.Labels))
			}
			shown = append(shown, ds.Label)
		}
		shown = append(shown, c.Labels...)
	}
	if p.Chart == dashboards.ChartFunnel {
		checkFunnel(t, where, p, cols, res, got.Charts)
		return shown
	}
	chart := got.Charts[0]
	if p.Layout == dashboards.LayoutMultiples {
		// Small multiples: one chart per series (with its thresholds), the same labels; check
		// them as the one chart they split.
		merged := *chart
		merged.Datasets = nil
		for _, c := range got.Charts {
			measured := 0
			for _, ds := range c.Datasets {
				if !ds.Dashed {
					measured++
					if ds.Label != c.Title {
						t.Errorf("%s: small multiple %q draws series %q", where, c.Title, ds.Label)
					}
				}
			}
			if measured != 1 || !slices.Equal(c.Labels, chart.Labels) {
				t.Errorf("%s: small multiple %q has %d series and %d labels, want 1 and %d", where, c.Title, measured, len(c.Labels), len(chart.Labels))
			}
			merged.Datasets = append(merged.Datasets, c.Datasets...)
		}
		chart = &merged
	} else if len(got.Charts) != 1 {
		t.Errorf("%s: %d charts, want 1", where, len(got.Charts))
	}
	checkChart(t, where, p, cols, res, chart)
	// Every alert rule with a fixed threshold on the column the chart draws is a dashed line
	// at that value, on every small multiple.
	var want []string
	for _, r := range rules {
		if len(p.Y) == 1 && r.Value == p.Y[0] && r.Threshold != nil && r.Threshold.Above != nil {
			want = append(want, fmt.Sprintf("Alert: %s above %s @%v", cols.Label(r.Value), dashboards.FormatValue(cols.Spec(r.Value).Format, *r.Threshold.Above), *r.Threshold.Above))
		}
	}
	for _, c := range got.Charts {
		if !slices.Equal(c.References, want) && (len(c.References) > 0 || len(want) > 0) {
			t.Errorf("%s: reference lines %q, want %q", where, c.References, want)
		}
	}
	return shown
}

// checkTable compares a table (or its groups) with the query's rows: human headers, every
// cell formatted by its column (percentages as "22.9%"), never "NULL".
func checkTable(t *testing.T, where string, p dashboards.Panel, cols dashboards.Columns, res *dashboards.Result, got probedPanel) (shown []string) {
	if got.Table == nil {
		t.Errorf("%s: no table drawn", where)
		return nil
	}
	var head []string
	groupCol := -1
	for i, c := range res.Columns {
		if p.Group != nil && c.Name == p.Group.By {
			groupCol = i
			continue
		}
		head = append(head, cols.Label(c.Name))
	}
	if !slices.Equal(got.Table.Head, head) {
		t.Errorf("%s: table header %q, want the columns' labels %q", where, got.Table.Head, head)
	}
	type shownRow struct {
		group string
		cells []string
	}
	var want []shownRow
	for _, row := range res.Rows {
		r := shownRow{}
		for c, v := range row {
			if c == groupCol {
				r.group = cols.Text(res.Columns[c].Name, v, res.Columns[c].Type)
				continue
			}
			r.cells = append(r.cells, cols.Text(res.Columns[c].Name, v, res.Columns[c].Type))
		}
		want = append(want, r)
	}
	var gotRows []shownRow
	if groupCol >= 0 {
		if len(got.Table.Groups) == 0 || (p.Top > 0 && len(got.Table.Groups) > p.Top) {
			t.Errorf("%s: %d groups, want 1 to %d", where, len(got.Table.Groups), p.Top)
		}
		for i, g := range got.Table.Groups {
			if g.Open != (i < p.Group.Open) {
				t.Errorf("%s: group %q open=%v, want the first %d open", where, g.Title, g.Open, p.Group.Open)
			}
			shown = append(shown, g.Title)
			for _, r := range g.Rows {
				gotRows = append(gotRows, shownRow{g.Title, r})
			}
		}
		// Only the first Top groups are shown: compare with those.
		var kept []shownRow
		titles := map[string]bool{}
		for _, g := range got.Table.Groups {
			titles[g.Title] = true
		}
		for _, r := range want {
			if titles[r.group] {
				kept = append(kept, r)
			}
		}
		want = kept
	} else {
		for _, r := range got.Table.Rows {
			gotRows = append(gotRows, shownRow{"", r})
		}
	}
	if len(gotRows) != len(want) {
		t.Errorf("%s: table shows %d rows, want %d", where, len(gotRows), len(want))
		return shown
	}
	for i := range want {
		if gotRows[i].group != want[i].group || !slices.Equal(gotRows[i].cells, want[i].cells) {
			t.Errorf("%s: row %d shows %q %q, want %q %q", where, i, gotRows[i].group, gotRows[i].cells, want[i].group, want[i].cells)
			break
		}
		shown = append(shown, gotRows[i].cells...)
	}
	for c, col := range res.Columns {
		spec := cols.Spec(col.Name)
		if spec.Format != dashboards.FormatPercent {
			continue
		}
		ci := c
		if groupCol >= 0 && c > groupCol {
			ci--
		}
		for _, r := range gotRows {
			if ci < len(r.cells) && r.cells[ci] != spec.Null && !percentText.MatchString(r.cells[ci]) {
				t.Errorf("%s: %s shows %q, want a percentage", where, col.Name, r.cells[ci])
			}
		}
	}
	for _, r := range gotRows {
		if slices.Contains(r.cells, "NULL") {
			t.Errorf("%s: a cell shows the word NULL: %q", where, r.cells)
		}
	}
	return shown
}

// checkFunnel checks one funnel per campaign (the largest Top), each step labelled with its
// count and its conversion from the previous step and the first, computed here from the rows.
func checkFunnel(t *testing.T, where string, p dashboards.Panel, cols dashboards.Columns, res *dashboards.Result, charts []*probedChart) {
	top := cmp.Or(p.Top, dashboards.DefaultTop)
	if len(charts) != min(len(res.Rows), top) {
		t.Errorf("%s: %d funnels for %d rows (top %d)", where, len(charts), len(res.Rows), top)
	}
	col := map[string]int{}
	for i, c := range res.Columns {
		col[c.Name] = i
	}
	byTitle := map[string][]any{}
	for _, row := range res.Rows {
		byTitle[cols.Text(p.X, row[col[p.X]], res.Columns[col[p.X]].Type)] = row
	}
	for _, c := range charts {
		row := byTitle[c.Title]
		if row == nil || c.Type != "funnel" || len(c.Labels) != len(p.Y) {
			t.Errorf("%s: funnel %q (%s) with labels %q matches no row", where, c.Title, c.Type, c.Labels)
			continue
		}
		steps := make([]float64, len(p.Y))
		for i, y := range p.Y {
			steps[i] = row[col[y]].(float64)
			if v := c.Datasets[0].Data[i]; v == nil || *v != steps[i] {
				t.Errorf("%s: funnel %q step %s drawn as %v, query returned %v", where, c.Title, y, v, steps[i])
			}
			prefix := cols.Label(y) + ": " + dashboards.FormatValue(dashboards.FormatCount, steps[i]) + "\n"
			if !strings.HasPrefix(c.Labels[i]+"\n", prefix) {
				t.Errorf("%s: funnel %q step label %q, want it to start %q", where, c.Title, c.Labels[i], prefix)
			}
			if i > 0 && steps[i-1] > 0 {
				conv := "\n" + dashboards.Percent(steps[i]/steps[i-1]) + " of previous · " + dashboards.Percent(steps[i]/steps[0]) + " of first"
				if !strings.HasSuffix(c.Labels[i], conv) {
					t.Errorf("%s: funnel %q step label %q, want the conversions %q", where, c.Title, c.Labels[i], conv)
				}
			}
		}
	}
}

// checkChart compares a line, bar or pie chart with the query's rows: axis type and titles,
// tick formats, the series kept (the top N by rank, never more than the palette's colours,
// none repeated) and "other" recomputed from the counts, rate points under the minimum calls
// left out, and a tooltip with the counts on every rate point.
func checkChart(t *testing.T, where string, p dashboards.Panel, cols dashboards.Columns, res *dashboards.Result, c *probedChart) {
	wantType := map[string]string{"line": "line", "bar": "bar", "stacked-bar": "bar", "pie": "pie"}[p.Chart]
	if c.Type != wantType {
		t.Errorf("%s: Chart.js type %q, want %q", where, c.Type, wantType)
	}
	col := map[string]int{}
	for i, rc := range res.Columns {
		col[rc.Name] = i
	}
	xType := res.Columns[col[p.X]].Type
	timeAxis := isTimeType(xType) && p.Chart != dashboards.ChartPie
	if p.Chart != dashboards.ChartPie {
		if c.X == nil || c.Y == nil {
			t.Fatalf("%s: no x or y scale", where)
		}
		if timeAxis != (c.X.Type == "time") {
			t.Errorf("%s: x scale %q for a %s column", where, c.X.Type, xType)
		}
		if c.X.Title != cols.Label(p.X) {
			t.Errorf("%s: x axis title %q, want %q", where, c.X.Title, cols.Label(p.X))
		}
		if len(p.Y) == 1 && c.Y.Title != cols.Label(p.Y[0]) {
			t.Errorf("%s: y axis title %q, want %q", where, c.Y.Title, cols.Label(p.Y[0]))
		}
		if cols.Spec(p.Y[0]).Format == dashboards.FormatPercent {
			for _, tk := range c.Y.Ticks {
				if !percentText.MatchString(tk) {
					t.Errorf("%s: y tick %q is not a percentage", where, tk)
				}
			}
		}
	}
	if len(c.Datasets) > dashboards.MaxSeries {
		t.Errorf("%s: %d series, at most %d", where, len(c.Datasets), dashboards.MaxSeries)
	}
	colors := map[string]string{}
	for _, ds := range c.Datasets {
		if ds.Dashed {
			continue
		}
		if prev, ok := colors[ds.Color]; ok && p.Chart != dashboards.ChartPie {
			t.Errorf("%s: series %q and %q share the colour %s", where, prev, ds.Label, ds.Color)
		}
		colors[ds.Color] = ds.Label
	}
	xKey := func(row []any) string {
		if timeAxis {
			return strconv.FormatInt(row[col[p.X]].(time.Time).UnixMilli(), 10)
		}
		return cols.Text(p.X, row[col[p.X]], xType)
	}
	minCalls := float64(dashboards.DefaultMinCalls)
	rateOf := func(num, den float64) *float64 {
		if den <= 0 || den < minCalls {
			return nil
		}
		v := num / den
		return &v
	}
	if p.Series == "" {
		var labels []string
		for _, row := range res.Rows {
			labels = append(labels, xKey(row))
		}
		if !slices.Equal(c.Labels, labels) {
			t.Errorf("%s: labels %q, query returned %q", where, c.Labels, labels)
		}
		if len(c.Datasets) != len(p.Y) {
			t.Errorf("%s: %d datasets for %d y columns", where, len(c.Datasets), len(p.Y))
			return
		}
		for d, y := range p.Y {
			if c.Datasets[d].Label != cols.Label(y) {
				t.Errorf("%s: dataset %d is %q, want %q", where, d, c.Datasets[d].Label, cols.Label(y))
			}
			var want []*float64
			for _, row := range res.Rows {
				want = append(want, number(row[col[y]]))
			}
			if !equalValues(c.Datasets[d].Data, want) {
				t.Errorf("%s: %s values %s, query returned %s", where, y, showValues(c.Datasets[d].Data), showValues(want))
			}
		}
		return
	}

	// One dataset per kept series value, "other" for the rest.
	type cell struct{ y, num, den *float64 }
	data := map[string]map[string]cell{}
	rank := map[string]float64{}
	var xs []string
	for _, row := range res.Rows {
		x, s := xKey(row), cols.Text(p.Series, row[col[p.Series]], res.Columns[col[p.Series]].Type)
		if data[s] == nil {
			data[s] = map[string]cell{}
		}
		ce := cell{y: number(row[col[p.Y[0]]])}
		if p.Rate != nil {
			ce.num, ce.den = number(row[col[p.Rate.Numerator]]), number(row[col[p.Rate.Denominator]])
		}
		data[s][x] = ce
		if v := number(row[col[p.RankColumn()]]); v != nil {
			rank[s] += *v
		}
		if !slices.Contains(xs, x) {
			xs = append(xs, x)
		}
	}
	if timeAxis {
		slices.SortFunc(xs, func(a, b string) int {
			ai, _ := strconv.ParseInt(a, 10, 64)
			bi, _ := strconv.ParseInt(b, 10, 64)
			return cmp.Compare(ai, bi)
		})
	}
	if !slices.Equal(c.Labels, xs) {
		t.Errorf("%s: %d labels, query has %d x values (%q... vs %q...)", where, len(c.Labels), len(xs), c.Labels[:min(3, len(c.Labels))], xs[:min(3, len(xs))])
		return
	}
	var kept []string
	var other *int
	for i, ds := range c.Datasets {
		switch {
		case ds.Dashed:
		case ds.Label == "other":
			other = &i
		default:
			kept = append(kept, ds.Label)
		}
	}
	folded := 0
	for s := range data {
		if !slices.Contains(kept, s) {
			folded++
			for _, k := range kept {
				if rank[s] > rank[k] {
					t.Errorf("%s: series %q (rank %v) is folded while %q (rank %v) is kept", where, s, rank[s], k, rank[k])
				}
			}
		}
	}
	if folded > 0 && other == nil && len(p.Thresholds) == 0 {
		t.Errorf("%s: %d series folded but no \"other\"", where, folded)
	}
	for _, ds := range c.Datasets {
		if ds.Dashed {
			continue
		}
		for i, x := range xs {
			var want *float64
			if ds.Label == "other" {
				var num, den, sum float64
				var seen bool
				for s, cells := range data {
					ce, ok := cells[x]
					if slices.Contains(kept, s) || !ok {
						continue
					}
					seen = true
					if p.Rate != nil {
						num += *ce.num
						if p.Rate.Share {
							den = *ce.den
						} else {
							den += *ce.den
						}
					} else if ce.y != nil {
						sum += *ce.y
					}
				}
				switch {
				case !seen:
				case p.Rate != nil:
					want = rateOf(num, den)
				default:
					want = &sum
				}
			} else if ce, ok := data[ds.Label][x]; ok {
				if p.Rate != nil {
					want = rateOf(*ce.num, *ce.den)
				} else {
					want = ce.y
				}
			}
			got := ds.Data[i]
			if (got == nil) != (want == nil) || (got != nil && math.Abs(*got-*want) > 1e-9) {
				t.Errorf("%s: series %q at %s: drawn %s, want %s", where, ds.Label, x, showValues([]*float64{got}), showValues([]*float64{want}))
			}
			if got != nil && p.Rate != nil && (ds.Tips[i] == nil || !strings.Contains(*ds.Tips[i], " of ")) {
				t.Errorf("%s: series %q at %s: tooltip %v, want the counts (\"n of m\")", where, ds.Label, x, ds.Tips[i])
			}
		}
	}
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
