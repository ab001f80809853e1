package server

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// A query the URL parser cannot read whole (more than 10,000 parameters, a bad %-escape, a ";"
// separator) is answered 400 saying what is wrong, on pages and CSV downloads alike, never
// read as "no filters" and answered with unfiltered figures.
func TestMalformedQueriesAreRefusedWith400(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds}, idleClickHouse(t))
	paths := []string{
		"/",
		"/dashboards/" + url.PathEscape(ds[0].Name),
		"/dashboards/" + url.PathEscape(ds[0].Name) + "/csv/" + url.PathEscape(ds[0].Panels[0].ID),
	}
	cases := []struct{ name, query, want string }{
		{"10,001 parameters", strings.Repeat("x=1&", 10000) + "tool=search", "too many query parameters (10001; at most 10000)"},
		{"10,001 empty parameters", "tool=search" + strings.Repeat("&", 10000), "too many query parameters (10001; at most 10000)"},
		{"bad escape", "tool=%zz", `malformed query: invalid URL escape "%zz"`},
		{"bad escape in a key", "to%zol=search", `malformed query: invalid URL escape "%zo"`},
		{"semicolon", "tool=search;limit=5", "malformed query: invalid semicolon separator"},
	}
	for _, p := range paths {
		for _, c := range cases {
			resp, body := get(t, ts.URL+p+"?"+c.query, nil)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) {
				t.Errorf("%s: GET %s = %d %.200q; want 400 containing %q", c.name, p, resp.StatusCode, body, c.want)
			}
			if len(body) > 512 {
				t.Errorf("%s: GET %s: the 400 body is %d bytes; want a short message", c.name, p, len(body))
			}
		}
	}
	// Exactly 10,000 parameters are read (and, being unknown, refused by name).
	resp, body := get(t, ts.URL+"/?"+strings.Repeat("x=1&", 9999)+"tool=search", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, `unknown parameter "x"`) {
		t.Errorf("10,000 parameters: %d %.200q; want 400 naming the unknown parameter", resp.StatusCode, body)
	}
}

// A valid filtered request is still read whole: the index answers 200 and carries the filters
// on its links, and the filters are those of the URL.
func TestValidQueryKeepsItsFilters(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds}, idleClickHouse(t))
	resp, body := get(t, ts.URL+"/?tool=search&limit=5&client=", nil)
	link := `href="/dashboards/` + url.PathEscape(ds[0].Name) + `?limit=5&amp;tool=search"`
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, link) {
		t.Errorf("GET /?tool=search&limit=5 = %d; want 200 with the link %s:\n%.2000s", resp.StatusCode, link, body)
	}
	f, _, err := requestFilters(httptest.NewRequest(http.MethodGet, "/?tool=a%20b&limit=5&campaign=c%2Bd", nil))
	if err != nil || f.Tool != "a b" || f.Limit != 5 || f.Campaign != "c+d" {
		t.Errorf("requestFilters = %+v, %v; want tool \"a b\", limit 5, campaign \"c+d\"", f, err)
	}
}

// A bad value is quoted in the 400 by a short escaped prefix and its length, never whole: a
// 100 KB from, limit, parameter name or dashboard name costs a short answer that still names
// what is wrong.
func TestBadValuesAreEchoedShort(t *testing.T) {
	ds := testDashboards(t)
	ts := newTestServer(t, Config{Dashboards: ds}, idleClickHouse(t))
	long := strings.Repeat("9", 100*1024)
	page := "/dashboards/" + url.PathEscape(ds[0].Name)
	cases := []struct{ path, want string }{
		{page + "?from=" + long, `from="` + long[:64] + `"… (102400 bytes) is not a time`},
		{page + "/csv/" + url.PathEscape(ds[0].Panels[0].ID) + "?to=" + long, `to="` + long[:64] + `"… (102400 bytes) is not a time`},
		{page + "?limit=" + long, `limit="` + long[:64] + `"… (102400 bytes) must be a whole number`},
		{page + "?" + long + "=1", `unknown parameter "` + long[:64] + `"… (102400 bytes)`},
		{"/dashboards/" + long, `no dashboard named "` + long[:64] + `"… (102400 bytes)`},
		{page + "?from=%E2%80%AE" + long, `from="\u202e` + long[:63] + `"… (102403 bytes) is not a time`},
	}
	for _, c := range cases {
		resp, body := get(t, ts.URL+c.path, nil)
		if resp.StatusCode/100 != 4 || !strings.Contains(body, c.want) || len(body) >= 512 {
			t.Errorf("GET %.80s…: %d, %d bytes %.300q; want a 4xx under 512 bytes containing %q", c.path, resp.StatusCode, len(body), body, c.want)
		}
	}
	// Thousands of bad parameters are counted, not each listed.
	var q strings.Builder
	for i := range 5000 {
		fmt.Fprintf(&q, "p%d=1&", i)
	}
	resp, body := get(t, ts.URL+page+"?"+q.String()+"tool=x", nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "and 4990 more problems") || len(body) > 4096 {
		t.Errorf("5,000 unknown parameters: %d, %d bytes %.300q; want a 400 under 4 KB listing 10 and counting the rest", resp.StatusCode, len(body), body)
	}
}
