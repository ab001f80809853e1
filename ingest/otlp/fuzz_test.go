package otlp_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest/otlp"
)

// FuzzDecodeAndMap runs the decoder and the mapping on arbitrary bodies in both encodings: no
// input may panic; a refused body's error says which encoding was bad and stays short; an
// accepted one maps every span to exactly one outcome and only to JSON objects carrying a uuid,
// an event name, a distinct_id and a timestamp. Seeds: the recorded exports of the real
// instrumentations (testdata/exports) and testdata/fuzz/FuzzDecodeAndMap.
func FuzzDecodeAndMap(f *testing.F) {
	paths, _ := filepath.Glob(filepath.Join("testdata", "exports", "*"))
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data, strings.HasSuffix(p, ".json"))
	}
	f.Add([]byte(`{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"0102030405060708090a0b0c0d0e0f10","spanId":"0102030405060708","name":"tools/call x",`+
		`"startTimeUnixNano":"1","endTimeUnixNano":"2","attributes":[{"key":"mcp.method.name","value":{"stringValue":"tools/call"}},`+
		`{"key":"gen_ai.tool.call.arguments","value":{"stringValue":"{\"a\":"}}]}]}]}]}`), true)
	f.Fuzz(func(t *testing.T, body []byte, isJSON bool) {
		enc := otlp.Protobuf
		if isJSON {
			enc = otlp.JSON
		}
		req, err := otlp.Decode(enc, body, 0)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "bad OTLP ") || len(msg) > 300 {
				t.Fatalf("error %q", msg)
			}
			return
		}
		res := otlp.Map(req)
		total := 0
		for _, n := range res.Counts {
			total += n
		}
		if total != otlp.SpanCount(req) {
			t.Fatalf("%d outcomes for %d spans", total, otlp.SpanCount(req))
		}
		for _, raw := range res.Events {
			var env struct {
				UUID, Event, Timestamp string
				DistinctID             string `json:"distinct_id"`
				Properties             map[string]json.RawMessage
			}
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatalf("event %s: %v", raw, err)
			}
			if env.UUID == "" || env.Event == "" || env.Timestamp == "" || env.Properties == nil {
				t.Fatalf("event %s lacks a field", raw)
			}
		}
	})
}
