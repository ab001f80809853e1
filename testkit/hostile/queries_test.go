package hostile

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	dashserver "github.com/mcpulse/mcpulse/dashboards/server"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

const apiKey = "phc_hostile_suite_key_0123456789"

// shortAnswer is the most bytes a refusal of a hostile query may take.
const shortAnswer = 512

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// Hostile queries on both HTTP surfaces, against the real stores: a 100 KB `from` and 10,001
// query parameters on the dashboards, 10,001 parameters in the gateway's URL query and form
// body. Each is a 4xx with a short answer; the filters and events around them still work.
func TestHostileQueriesAreRefusedShortAndNeighboursServed(t *testing.T) {
	e := env{testenv.New(t, testenv.Options{}), t}

	// The dashboards, with stand-in chart libraries (the pages' scripts play no part here).
	assets := t.TempDir()
	for _, lib := range dashserver.Libraries {
		path := filepath.Join(assets, lib.Path)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte("/* stand-in */"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv, err := dashserver.New(dashserver.Config{ClickHouse: e.ClickHouse, AssetsDir: assets})
	if err != nil {
		t.Fatal(err)
	}
	dash := httptest.NewServer(srv)
	defer dash.Close()
	page := dash.URL + "/dashboards/tool-diagnostics"
	long := strings.Repeat("9", 100*1024)
	for name, url := range map[string]string{
		"100 KB from":        page + "?from=" + long,
		"10,001 parameters":  page + "?" + strings.Repeat("tool=x&", 10_000) + "limit=5",
		"100 KB param name":  page + "?" + long + "=1",
		"10,001 empty pairs": page + "?tool=search" + strings.Repeat("&", 10_000),
	} {
		code, body := get(t, url)
		if code != http.StatusBadRequest || len(body) > shortAnswer || strings.Contains(body, long[:100]) {
			t.Errorf("dashboards, %s: %d, %d bytes (%.120q); want a 400 of at most %d bytes", name, code, len(body), body, shortAnswer)
		}
	}
	if code, body := get(t, page+"?tool=search&limit=5"); code != http.StatusOK {
		t.Errorf("dashboards, a filtered neighbour: %d %.200q, want 200", code, body)
	}

	// The gateway.
	gw, err := gateway.New(gateway.Config{APIKeys: []string{apiKey}, Brokers: e.Stack.KafkaBrokers}, e.Publisher)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(gw.Handler())
	defer ts.Close()
	post := func(path, contentType string, body []byte) (int, string) {
		t.Helper()
		resp, err := http.Post(ts.URL+path, contentType, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	batch := func(n int) []byte {
		return []byte(`{"api_key":"` + apiKey + `","batch":[` + string(call(n, "gateway-agent", "ses-gw", "srv", "curl", "search", map[string]any{"q": "x"})) + `]}`)
	}
	many := strings.Repeat("p=1&", 10_000) + "api_key=" + apiKey
	if code, body := post("/batch/?"+many, "application/json", batch(201)); code/100 != 4 || len(body) > shortAnswer {
		t.Errorf("gateway, 10,001 URL parameters: %d %.200q, want a short 4xx", code, body)
	}
	form := "data=" + strings.ReplaceAll(string(batch(202)), "&", "%26") + strings.Repeat("&p=1", 10_000)
	if code, body := post("/batch/", "application/x-www-form-urlencoded", []byte(form)); code/100 != 4 || len(body) > shortAnswer {
		t.Errorf("gateway, a form body of 10,001 parameters: %d %.200q, want a short 4xx", code, body)
	}
	if code, body := post("/batch/?ver=1&_=1767225600000", "application/json", batch(203)); code != http.StatusOK {
		t.Errorf("gateway, a neighbour: %d %.200q, want 200", code, body)
	}
	e.drain()
	got := query[string](t, e.ClickHouse, "SELECT toString(uuid) FROM mcpulse.tool_calls FINAL WHERE distinct_id = 'gateway-agent'")
	if len(got) != 1 || got[0] != uuidN(203) {
		t.Errorf("stored from the gateway: %q, want only the neighbour %s", got, uuidN(203))
	}
}
