package server

import (
	"bytes"
	"context"
	"encoding/csv"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/internal/safetext"
)

// idleClickHouse is a real clickhouse-go client pointed at a port nothing listens on; the
// tests that use it never reach a query (they stop at filters or access), which is what they
// prove.
func idleClickHouse(t *testing.T) driver.Conn {
	t.Helper()
	conn, err := clickhouse.Open(&clickhouse.Options{Addr: []string{"127.0.0.1:1"}, DialTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// testDashboards is one real definition (the first of dashboards.Load), so routes resolve.
func testDashboards(t *testing.T) []dashboards.Dashboard {
	t.Helper()
	ds, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(ds) == 0 || len(ds[0].Panels) == 0 {
		t.Fatal("dashboards.Load returned no dashboard with panels")
	}
	return ds
}

func get(t *testing.T, rawURL string, header http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, rawURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// A bad filter in the URL is answered 400 with a message naming the parameter and what is
// wrong with it, on pages and CSV downloads alike, before any query runs.
func TestBadFiltersAreRefusedWith400SayingWhatIsWrong(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds}, idleClickHouse(t))
	paths := []string{
		"/dashboards/" + url.PathEscape(ds[0].Name),
		"/dashboards/" + url.PathEscape(ds[0].Name) + "/csv/" + url.PathEscape(ds[0].Panels[0].ID),
		"/",
	}
	cases := []struct{ query, want string }{
		{"from=yesterday", `from="yesterday" is not a time`},
		{"to=2026-13-01", `to="2026-13-01" is not a time`},
		{"from=2026-02-01&to=2026-01-01", "from (2026-02-01T00:00:00Z) must be before to (2026-01-01T00:00:00Z)"},
		{"from=2026-01-01T10:00&to=2026-01-01T10:00", "must be before to"},
		{"from=1969-12-31", "outside 1970-01-01 to 2105-12-31"},
		{"limit=0", `limit="0" must be a whole number from 1 to 1000`},
		{"limit=5000", `limit="5000" must be a whole number`},
		{"limit=ten", `limit="ten" must be a whole number`},
		{"tools=search", `unknown parameter "tools"`},
		{"client=a&client=b", "parameter client is given 2 times"},
		{"campaign=%ff", "campaign is not valid UTF-8"},
		{"tool=" + strings.Repeat("x", 1001), "tool is 1001 bytes long; at most 1000"},
	}
	for _, p := range paths {
		for _, c := range cases {
			resp, body := get(t, ts.URL+p+"?"+c.query, nil)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Errorf("GET %s?%.60s: %d %q; want 400 containing %q", p, c.query, resp.StatusCode, body, c.want)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
				t.Errorf("GET %s?%.60s: Content-Type %q, want plain text", p, c.query, ct)
			}
		}
	}
	// Two problems at once are both named.
	_, body := get(t, ts.URL+paths[0]+"?from=x&limit=-1", nil)
	if !strings.Contains(body, `from="x"`) || !strings.Contains(body, `limit="-1"`) {
		t.Errorf("two bad parameters: %q names not both", body)
	}
	for _, p := range []string{"/dashboards/nope", paths[0] + "/csv/nope"} {
		if resp, body := get(t, ts.URL+p, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"nope"`) {
			t.Errorf("GET %s: %d %q, want 404 naming it", p, resp.StatusCode, body)
		}
	}
}

// Filters read from the URL: dates and datetime-local values are UTC, an RFC 3339 offset is
// honoured, empty values mean "all", and the form echoes the values as given.
func TestFiltersAreReadFromTheURL(t *testing.T) {
	q, _ := url.ParseQuery("from=2026-01-31&to=2026-02-01T13:30%2B02:00&campaign=c%3C1%3E&client=&tool=search&limit=5&token=x")
	f, form, err := parseFilters(q)
	if err != nil {
		t.Fatal(err)
	}
	want := dashboards.Filters{
		From: time.Date(2026, 1, 31, 0, 0, 0, 0, time.UTC), To: time.Date(2026, 2, 1, 11, 30, 0, 0, time.UTC),
		Campaign: "c<1>", Tool: "search", Limit: 5,
	}
	if !f.From.Equal(want.From) || !f.To.Equal(want.To) || f.From.Location() != time.UTC || f.Campaign != want.Campaign ||
		f.Client != "" || f.Tool != want.Tool || f.Limit != want.Limit {
		t.Errorf("parseFilters = %+v, want %+v", f, want)
	}
	if form.To != "2026-02-01T13:30+02:00" || form.Campaign != "c<1>" {
		t.Errorf("form = %+v", form)
	}
	if got := filterQuery(form, "").Encode(); got != "campaign=c%3C1%3E&from=2026-01-31&limit=5&to=2026-02-01T13%3A30%2B02%3A00&tool=search" {
		t.Errorf("filterQuery = %s", got)
	}
	f, _, err = parseFilters(url.Values{"from": {"2026-01-31T08:15"}})
	if err != nil || !f.From.Equal(time.Date(2026, 1, 31, 8, 15, 0, 0, time.UTC)) || !f.To.IsZero() {
		t.Errorf("datetime-local from: %+v, %v", f, err)
	}
}

// With a token and basic-auth credentials configured, pages, CSVs and /metrics answer 401
// (with both challenges) unless the request carries one of them; /healthz stays open for
// probes and /assets/ (no data) for pages opened with ?token=. A ?token= is carried on the
// page's own links.
func TestAccessNeedsTheConfiguredTokenOrBasicAuth(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds, Token: "s3cret-token", BasicUser: "ops", BasicPassword: "pa:ss"}, idleClickHouse(t))
	bearer := func(v string) http.Header { return http.Header{"Authorization": {"Bearer " + v}} }
	basic := func(u, p string) http.Header {
		r, _ := http.NewRequest(http.MethodGet, "/", nil)
		r.SetBasicAuth(u, p)
		return r.Header
	}
	badFilter := "/dashboards/" + url.PathEscape(ds[0].Name) + "?limit=0"
	cases := []struct {
		name   string
		path   string
		header http.Header
		want   int
	}{
		{"no credentials", "/", nil, 401},
		{"no credentials, dashboard", "/dashboards/" + url.PathEscape(ds[0].Name), nil, 401},
		{"no credentials, csv", "/dashboards/" + url.PathEscape(ds[0].Name) + "/csv/" + url.PathEscape(ds[0].Panels[0].ID), nil, 401},
		{"no credentials, metrics", "/metrics", nil, 401},
		{"wrong bearer", "/", bearer("s3cret-tokeN"), 401},
		{"bearer prefix of the token", "/", bearer("s3cret"), 401},
		{"wrong query token", "/?token=nope", nil, 401},
		{"wrong basic password", "/", basic("ops", "pa:sS"), 401},
		{"wrong basic user", "/", basic("op", "pa:ss"), 401},
		{"token as basic password", "/", basic("ops", "s3cret-token"), 401},
		{"bearer", "/", bearer("s3cret-token"), 200},
		{"bearer, lower-case scheme", "/", http.Header{"Authorization": {"bearer s3cret-token"}}, 200},
		{"query token", "/?token=s3cret-token", nil, 200},
		{"basic", "/", basic("ops", "pa:ss"), 200},
		{"bearer, metrics", "/metrics", bearer("s3cret-token"), 200},
		{"chart library needs nothing (no data; loaded by ?token= pages)", "/assets/vendor/chart.umd.min.js", nil, 200},
		{"chart plugins need nothing", "/assets/vendor/" + Libraries[len(Libraries)-1].Name, nil, 200},
		{"no other vendor file", "/assets/vendor/package.json", nil, 404},
		{"page script needs nothing", "/assets/dashboard.js", nil, 200},
		{"authorized bad filter is still 400", badFilter, bearer("s3cret-token"), 400},
		{"healthz needs nothing", "/healthz", nil, 200},
	}
	for _, c := range cases {
		resp, body := get(t, ts.URL+c.path, c.header)
		if resp.StatusCode != c.want {
			t.Errorf("%s: GET %s = %d %q, want %d", c.name, c.path, resp.StatusCode, body, c.want)
			continue
		}
		if c.want == 401 {
			challenges := strings.Join(resp.Header.Values("WWW-Authenticate"), " | ")
			if !strings.Contains(challenges, `Bearer realm="mcpulse dashboards"`) || !strings.Contains(challenges, `Basic realm="mcpulse dashboards"`) {
				t.Errorf("%s: WWW-Authenticate %q lacks the Bearer and Basic challenges", c.name, challenges)
			}
			if strings.Contains(body, "s3cret") || strings.Contains(body, "pa:ss") {
				t.Errorf("%s: the 401 body reveals a secret: %q", c.name, body)
			}
		}
	}
	_, body := get(t, ts.URL+"/?token=s3cret-token", nil)
	link := `href="/dashboards/` + url.PathEscape(ds[0].Name) + `?token=s3cret-token"`
	if !strings.Contains(body, link) {
		t.Errorf("index opened with ?token= lacks the link %s:\n%s", link, body)
	}
	_, body = get(t, ts.URL+"/", bearer("s3cret-token"))
	if strings.Contains(body, "s3cret-token") {
		t.Error("a page opened with the Authorization header writes the token into its links")
	}
	for _, bad := range []Config{{BasicUser: "ops"}, {BasicPassword: "x"}, {BasicUser: "a:b", BasicPassword: "x"}} {
		bad.ClickHouse, bad.AssetsDir, bad.Dashboards = idleClickHouse(t), assetsForTest(t), ds
		if _, err := New(bad); err == nil {
			t.Errorf("New(%+v) accepted an incomplete or invalid basic-auth configuration", bad)
		}
	}
}

// Without credentials configured every page is open, and the index lists every dashboard with
// a link to it.
func TestIndexListsEveryDashboard(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds}, idleClickHouse(t))
	resp, body := get(t, ts.URL+"/", nil)
	if resp.StatusCode != 200 || !strings.Contains(body, "<h1>Dashboards</h1>") {
		t.Fatalf("GET / = %d %q", resp.StatusCode, body)
	}
	for _, d := range ds {
		link := `<a href="/dashboards/` + url.PathEscape(d.Name) + `">` + template.HTMLEscapeString(d.Title) + `</a>`
		if !strings.Contains(body, link) {
			t.Errorf("index lacks %s", link)
		}
	}
}

// When ClickHouse does not answer, each panel shows its query's failure in place, the page is
// still drawn, and its status is 502 so monitors notice; a CSV download answers 502 too.
func TestUnreachableClickHouseShowsEachPanelsFailure(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds[:1]}, idleClickHouse(t))
	resp, body := get(t, ts.URL+"/dashboards/"+url.PathEscape(ds[0].Name), nil)
	if resp.StatusCode != http.StatusBadGateway {
		t.Errorf("status %d, want 502", resp.StatusCode)
	}
	if n := strings.Count(body, "this panel&#39;s query failed"); n != len(ds[0].Panels) {
		t.Errorf("%d panels show their failure, want %d:\n%s", n, len(ds[0].Panels), body)
	}
	if !strings.Contains(body, "panels could not be drawn") {
		t.Error("the page does not say that panels could not be drawn")
	}
	resp, body = get(t, ts.URL+"/dashboards/"+url.PathEscape(ds[0].Name)+"/csv/"+url.PathEscape(ds[0].Panels[0].ID), nil)
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, "query failed") {
		t.Errorf("CSV: %d %q, want 502 saying the query failed", resp.StatusCode, body)
	}
}

// CSV fields are quoted per RFC 4180 (commas, quotes, line breaks), text that a spreadsheet
// would evaluate as a formula gets a leading quote, numbers (negative ones too) are plain,
// NULL is empty and times are UTC.
func TestCSVQuotesFieldsAndDisarmsFormulas(t *testing.T) {
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	res := &dashboards.Result{
		Columns: columns("text", "String", "n", "Float64", "at", "DateTime", "day", "Date", "=col", "String"),
		Rows: [][]any{
			{"a,b", -2.5, ts, ts, nil},
			{`say "hi"`, 3.0, nil, ts, "ok"},
			{"multi\nline", 0.1, ts, nil, ""},
			{"=1+1", 1e21, ts, ts, "+1"},
			{"-1", -1.0, ts, ts, "@SUM(A1)"},
			{"\tx", 0.0, ts, ts, "\r=cmd|' /C calc'!A0"},
			{`=HYPERLINK("http://x","y")`, 12345678.9, ts, ts, " =not at start"},
		},
	}
	var b bytes.Buffer
	if err := writeCSV(&b, res); err != nil {
		t.Fatal(err)
	}
	records, err := csv.NewReader(bytes.NewReader(b.Bytes())).ReadAll()
	if err != nil {
		t.Fatalf("output is not valid CSV: %v\n%s", err, b.String())
	}
	want := [][]string{
		{"text", "n", "at", "day", "'=col"},
		{"a,b", "-2.5", "2026-01-02 02:04:05", "2026-01-02", ""},
		{`say "hi"`, "3", "", "2026-01-02", "ok"},
		{"multi\nline", "0.1", "2026-01-02 02:04:05", "", ""},
		{"'=1+1", "1000000000000000000000", "2026-01-02 02:04:05", "2026-01-02", "'+1"},
		{"'-1", "-1", "2026-01-02 02:04:05", "2026-01-02", "'@SUM(A1)"},
		{"'\tx", "0", "2026-01-02 02:04:05", "2026-01-02", "'\r=cmd|' /C calc'!A0"},
		{`'=HYPERLINK("http://x","y")`, "12345678.9", "2026-01-02 02:04:05", "2026-01-02", " =not at start"},
	}
	if len(records) != len(want) {
		t.Fatalf("%d records, want %d:\n%s", len(records), len(want), b.String())
	}
	for i := range want {
		for j := range want[i] {
			if records[i][j] != want[i][j] {
				t.Errorf("record %d field %d = %q, want %q", i, j, records[i][j], want[i][j])
			}
		}
	}
	for _, raw := range []string{`"a,b"`, `"say ""hi"""`, "\"multi\nline\"", `"'=HYPERLINK(""http://x"",""y"")"`} {
		if !strings.Contains(b.String(), raw) {
			t.Errorf("CSV lacks the quoted field %s:\n%s", raw, b.String())
		}
	}
}

// Each panel's CSV download holds exactly its query's result over the demo data (guarded as
// writeCSV does), the hostile key that looks like a formula arrives disarmed, and the tool
// name with U+202E arrives as stored (CSV is data, not display).
func TestCSVDownloadHoldsThePanelQueryResult(t *testing.T) {
	fx := sharedFixture(t)
	ts := newTestServer(t, Config{}, fx.ch)
	disarmed, faithful := false, false
	for _, d := range fx.dash {
		for _, p := range d.Panels {
			path := "/dashboards/" + url.PathEscape(d.Name) + "/csv/" + url.PathEscape(p.ID)
			resp, body := get(t, ts.URL+path, nil)
			if resp.StatusCode != 200 {
				t.Errorf("GET %s = %d %q", path, resp.StatusCode, body)
				continue
			}
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/csv; charset=utf-8") {
				t.Errorf("GET %s: Content-Type %q", path, ct)
			}
			if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") || !strings.Contains(cd, d.Name+"-"+p.ID+".csv") {
				t.Errorf("GET %s: Content-Disposition %q", path, cd)
			}
			res, err := dashboards.Run(context.Background(), fx.ch, p, dashboards.Filters{})
			if err != nil {
				t.Fatal(err)
			}
			var want bytes.Buffer
			if err := writeCSV(&want, res); err != nil {
				t.Fatal(err)
			}
			if body != want.String() {
				t.Errorf("GET %s: body differs from the panel's query result:\n got %.300q\nwant %.300q", path, body, want.String())
			}
			records, err := csv.NewReader(strings.NewReader(body)).ReadAll()
			if err != nil {
				t.Errorf("GET %s: not valid CSV: %v", path, err)
			}
			if len(records) != len(res.Rows)+1 {
				t.Errorf("GET %s: %d records, want a header and %d rows", path, len(records), len(res.Rows))
			}
			for _, rec := range records {
				for _, field := range rec {
					if field == hostileFormulaKey {
						t.Errorf("GET %s: the formula %q arrived armed", path, field)
					}
					if field == "'"+hostileFormulaKey {
						disarmed = true
					}
					if field == hostileTool {
						faithful = true
					}
				}
			}
		}
	}
	if !faithful {
		t.Errorf("no CSV holds the hostile tool name %q as stored", hostileTool)
	}
	if !disarmed {
		t.Errorf("no CSV holds the hostile ignored key %q (disarmed); some panel must list ignored keys", hostileFormulaKey)
	}
}

// Hostile strings in the data (ignored key names, a client name, a campaign id, a tool name
// with U+202E) reach the HTML only escaped: never as markup, inside the chart-data JSON never
// as a raw "<" or line separator, and nowhere (tables, chart data, empty states) with a raw
// control or bidi character: those are shown as escapes. Only the filter form echoes its
// values as typed, so that applying it again keeps the filter.
func TestHostileStringsAreEscapedInHTML(t *testing.T) {
	fx := sharedFixture(t)
	ts := newTestServer(t, Config{}, fx.ch)
	var pages strings.Builder
	scriptRE := regexp.MustCompile(`(?s)<script type="application/json" class="chart-data">(.*?)</script>`)
	formRE := regexp.MustCompile(`(?s)<form class="filters".*?</form>`)
	for _, d := range fx.dash {
		// The hostile strings also go through the filter form: values echoed into attributes.
		q := url.Values{"client": {hostileClient}, "campaign": {hostileCampaign}}
		for _, path := range []string{"/dashboards/" + url.PathEscape(d.Name), "/dashboards/" + url.PathEscape(d.Name) + "?" + q.Encode()} {
			resp, body := get(t, ts.URL+path, nil)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s = %d %q", path, resp.StatusCode, body)
			}
			if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
				t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
			}
			for _, bad := range []string{hostileKey, "<script>alert", "<b onmouseover", hostileDistinctID, "<img", "<svg"} {
				if strings.Contains(body, bad) {
					t.Errorf("GET %s: the page holds %q unescaped", path, bad)
				}
			}
			for _, m := range scriptRE.FindAllStringSubmatch(body, -1) {
				if strings.ContainsAny(m[1], "<\u2028\u2029") {
					t.Errorf("GET %s: chart data holds a raw '<' or line separator: %.200q", path, m[1])
				}
			}
			if got, want := strings.Count(body, "<script"), 1+len(Libraries)+len(scriptRE.FindAllString(body, -1)); got != want {
				t.Errorf("GET %s: %d <script elements, want %d (the page's script, the chart libraries and the chart data)", path, got, want)
			}
			outsideForm := formRE.ReplaceAllString(body, "")
			if i := strings.IndexFunc(outsideForm, func(r rune) bool { return r >= 0x80 && safetext.Hidden(r) }); i >= 0 {
				r, _ := utf8.DecodeRuneInString(outsideForm[i:])
				t.Errorf("GET %s: the page holds a raw %U outside the filter form: %.120q", path, r, outsideForm[max(0, i-60):])
			}
			pages.WriteString(body)
		}
	}
	all := pages.String()
	for _, s := range append(slices.Clone(shownKeys), hostileClient, hostileTool) {
		s = shown(s)
		escapedHTML := strings.NewReplacer("<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;").Replace(s)
		escapedJSON := strings.NewReplacer(`\`, `\\`, "<", `\u003c`, ">", `\u003e`, `"`, `\"`).Replace(s)
		if !strings.Contains(all, escapedHTML) && !strings.Contains(all, escapedJSON) {
			t.Errorf("hostile key %q appears on no page (escaped as %q or %q)", s, escapedHTML, escapedJSON)
		}
	}
	if !strings.Contains(all, "value=\"&lt;script&gt;alert(3)&lt;/script&gt;&#34;&#39;\u2028end\"") {
		t.Error("the filter form does not echo the hostile client escaped")
	}
}

// Without credentials the server listens on loopback only: an address other machines can reach
// is refused with a message that says why and what to do; with a token or basic auth any
// address is accepted. The default address is loopback.
func TestNonLoopbackAddressNeedsCredentials(t *testing.T) {
	for listen, wantOK := range map[string]bool{
		"127.0.0.2:8090": true,
		"[::1]:8090":     true,
		"localhost:8090": true,
		DefaultListen:    true,
		":8090":          false,
		"0.0.0.0:8090":   false,
		"[::]:8090":      false,
		"10.1.2.3:8090":  false,
		"192.0.2.7:8090": false,
	} {
		err := ExposedWithoutAuth(listen, false)
		if (err == nil) != wantOK {
			t.Errorf("ExposedWithoutAuth(%q, no auth) = %v, want ok=%v", listen, err, wantOK)
		}
		if err != nil && (!strings.Contains(err.Error(), "--token") || !strings.Contains(err.Error(), "email")) {
			t.Errorf("ExposedWithoutAuth(%q): %v, want a message naming --token and why (email addresses)", listen, err)
		}
		if err := ExposedWithoutAuth(listen, true); err != nil {
			t.Errorf("ExposedWithoutAuth(%q, with auth) = %v, want nil", listen, err)
		}
	}
	base := Config{ClickHouse: idleClickHouse(t), AssetsDir: assetsForTest(t), Dashboards: testDashboards(t)}
	open := base
	open.Listen = ":8090"
	if _, err := New(open); err == nil || !strings.Contains(err.Error(), "refusing") {
		t.Errorf("New with --listen :8090 and no credentials = %v, want a refusal", err)
	}
	withToken := open
	withToken.Token = "s3cret"
	if _, err := New(withToken); err != nil {
		t.Errorf("New with --listen :8090 and a token: %v", err)
	}
	withBasic := open
	withBasic.BasicUser, withBasic.BasicPassword = "ana", "pw"
	if _, err := New(withBasic); err != nil {
		t.Errorf("New with --listen :8090 and basic auth: %v", err)
	}
	if _, err := New(base); err != nil {
		t.Errorf("New with the default address and no credentials: %v", err)
	}
}
