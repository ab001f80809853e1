package gateway

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// FuzzDecodeRequest runs the API-key scan, the request decoder and the per-event normalization and validation
// on arbitrary bodies and headers: no input may panic, and every failure must be an *httpError
// with a 4xx status. Seeds are in testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"api_key":"k","batch":[{"event":"$mcp_tool_call","distinct_id":"d","properties":{"$mcp_tool_name":"t"}}],"sent_at":"2026-11-20T10:00:00Z"}`), uint8(0), "", "application/json", "")
	f.Add([]byte(`{"uuid":"0192f2a0-0000-7000-8000-000000000001","event":"$mcp_tool_call","distinct_id":"d","timestamp":"2026-11-20T10:00:00Z","properties":{}}`+"\n"), uint8(1), "", "", "")
	f.Add([]byte(`{"api_key":"k","sent_at":1795262400000,"batch":[{"uuid":"","event":"mcp interview invitation responded","distinct_id":"d","offset":1500,"properties":{"responded_at":"2026-11-20T10:00:00+01:00","response":"cancel"}},{"event":"$identify","timestamp":"2026-11-20T10:00:00Z","offset":-1,"distinct_id":"d"}]}`), uint8(0), "", "application/json", "")
	f.Add([]byte("data=eyJldmVudCI6IiRpZGVudGlmeSJ9"), uint8(0), "", "application/x-www-form-urlencoded", "")
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00}, uint8(0), "gzip", "", "gzip-js")
	f.Add([]byte(`[{"event":"e","distinct_id":"d","properties":{"token":"k","x":{"token":"z"}}},{"api_key":"k","event":"e","properties":{"$mcp_parameters":{"api_key":"z"}}}]`), uint8(0), "", "", "")
	// What @posthog/mcp really sent (testdata/sdk), gzipped as posthog-node sends it.
	if data, err := os.ReadFile(filepath.Join("testdata", "sdk", "requests.jsonl")); err == nil {
		for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
			var rec struct{ Body json.RawMessage }
			if json.Unmarshal(line, &rec) == nil {
				var gz bytes.Buffer
				zw := gzip.NewWriter(&gz)
				zw.Write(rec.Body)
				zw.Close()
				f.Add(gz.Bytes(), uint8(0), "gzip", "application/json", "")
			}
		}
	}
	cfg := Config{APIKeys: []string{"k", "phc_fixture_project_key_0123456789"}, Brokers: []string{"127.0.0.1:9092"}}
	g, err := New(cfg, &ingest.Publisher{})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, formByte uint8, contentEncoding, contentType, compression string) {
		form := bodyForm(formByte % 2)
		m := meta{ContentEncoding: contentEncoding, ContentType: contentType, Compression: compression}
		// The key checks run on the body's head and on its whole JSON text before it is decoded.
		g.newKeyCheck().inBody(inflatedHead(body, headBytes))
		if data, err := inflate(form, m, body, 1<<20); err == nil && form == formPostHog {
			// The one-pass scan never authorizes a body that keys read by decoding would refuse.
			kc := g.newKeyCheck()
			if complete := kc.inBody(data); complete && kc.verdict(form) == "" {
				if msg := referenceVerdict(g, data); msg != "" && msg != "bad JSON" { // bad JSON: refused 400 anyway
					t.Fatalf("scan authorized a body decoding refuses (%s): %q", msg, data)
				}
			}
		}
		p, err := decodeBody(form, m, body, 1<<20)
		if err != nil {
			he, ok := err.(*httpError)
			if !ok || he.Status < 400 || he.Status > 499 {
				t.Fatalf("decodeBody error %v (%T), want a 4xx *httpError", err, err)
			}
			return
		}
		res := g.process(p, form, newRequestClock(now, p.SentAt, DefaultTransitAllowance))
		others := 0 // published and reported as unrouted
		for _, ev := range res.events {
			if ev.Kind == ingest.KindOther {
				others++
			}
		}
		if n := len(res.events) - others + res.unrouted + res.duplicates + len(res.errors); n != len(p.Events) {
			t.Fatalf("%d events sorted into %d outcomes", len(p.Events), n)
		}
		for _, ev := range res.events {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("accepted event does not marshal: %v", err)
			}
		}
	})
}

// referenceVerdict decides a PostHog body's keys by decoding it with encoding/json: "" when at
// least one key is present and all are known, else why not ("bad JSON" when it does not decode).
func referenceVerdict(g *Gateway, data []byte) string {
	p, err := parsePayload(formPostHog, data)
	if err != nil {
		return "bad JSON"
	}
	var keys []string
	str := func(raw json.RawMessage) {
		var s string
		if len(raw) > 0 && raw[0] == '"' && json.Unmarshal(raw, &s) == nil {
			keys = append(keys, s)
		}
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) == nil {
		str(top["api_key"])
		str(top["token"])
	}
	for _, raw := range p.Events {
		var ev struct {
			APIKey     json.RawMessage            `json:"api_key"`
			Token      json.RawMessage            `json:"token"`
			Properties map[string]json.RawMessage `json:"properties"`
		}
		if json.Unmarshal(raw, &ev) != nil {
			continue
		}
		str(ev.APIKey)
		str(ev.Token)
		str(ev.Properties["token"])
	}
	if len(keys) == 0 {
		return "missing"
	}
	for _, k := range keys {
		if !g.known(k) {
			return "unknown"
		}
	}
	return ""
}
