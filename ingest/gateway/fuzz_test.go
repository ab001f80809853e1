package gateway

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// FuzzDecodeRequest runs the request decoder and the per-event normalization and validation
// on arbitrary bodies and headers: no input may panic, and every failure must be an *httpError
// with a 4xx status. Seeds are in testdata/fuzz/FuzzDecodeRequest.
func FuzzDecodeRequest(f *testing.F) {
	f.Add([]byte(`{"api_key":"k","batch":[{"event":"$mcp_tool_call","distinct_id":"d","properties":{"$mcp_tool_name":"t"}}],"sent_at":"2026-11-20T10:00:00Z"}`), uint8(0), "", "application/json", "")
	f.Add([]byte(`{"uuid":"0192f2a0-0000-7000-8000-000000000001","event":"$mcp_tool_call","distinct_id":"d","timestamp":"2026-11-20T10:00:00Z","properties":{}}`+"\n"), uint8(1), "", "", "")
	f.Add([]byte(`{"api_key":"k","sent_at":1795262400000,"batch":[{"uuid":"","event":"mcp interview invitation responded","distinct_id":"d","offset":1500,"properties":{"responded_at":"2026-11-20T10:00:00+01:00","response":"cancel"}},{"event":"$identify","timestamp":"2026-11-20T10:00:00Z","offset":-1,"distinct_id":"d"}]}`), uint8(0), "", "application/json", "")
	f.Add([]byte("data=eyJldmVudCI6IiRpZGVudGlmeSJ9"), uint8(0), "", "application/x-www-form-urlencoded", "")
	f.Add([]byte{0x1f, 0x8b, 0x08, 0x00}, uint8(0), "gzip", "", "gzip-js")
	cfg := Config{APIKeys: []string{"k"}, Brokers: []string{"127.0.0.1:9092"}}
	g, err := New(cfg, &ingest.Publisher{})
	if err != nil {
		f.Fatal(err)
	}
	now := time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body []byte, formByte uint8, contentEncoding, contentType, compression string) {
		form := bodyForm(formByte % 2)
		p, err := decodeBody(form, meta{ContentEncoding: contentEncoding, ContentType: contentType, Compression: compression}, body, 1<<20)
		if err != nil {
			he, ok := err.(*httpError)
			if !ok || he.Status < 400 || he.Status > 499 {
				t.Fatalf("decodeBody error %v (%T), want a 4xx *httpError", err, err)
			}
			return
		}
		res := g.process(p, form, newRequestClock(now, p.SentAt, DefaultTransitAllowance))
		if n := len(res.events) + res.unrouted + res.duplicates + len(res.errors); n != len(p.Events) {
			t.Fatalf("%d events sorted into %d outcomes", len(p.Events), n)
		}
		for _, ev := range res.events {
			if _, err := json.Marshal(ev); err != nil {
				t.Fatalf("accepted event does not marshal: %v", err)
			}
		}
	})
}
