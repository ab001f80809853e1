package otlp_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/ingest/otlp"
)

// FuzzDecodeAndMap runs the decoder and the mapping on arbitrary bodies in both encodings: no
// input may panic; a refused body's error says which encoding was bad and stays short; the
// spans counted before decoding are the spans decoded (a limit of that many passes, one fewer
// refuses); an accepted body maps only to JSON objects carrying an event name, a distinct_id,
// a timestamp and the uuid its span and name give (EventUUID). Seeds: the recorded exports of
// the real instrumentations (testdata/exports) and the hostile bodies below.
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
		if n := otlp.SpanCount(req); n > 0 {
			if _, err := otlp.Decode(enc, body, n); err != nil {
				t.Fatalf("%d spans decoded, refused at a limit of %d: %v", n, n, err)
			}
			var tooMany *otlp.TooManySpansError
			if _, err := otlp.Decode(enc, body, n-1); n > 1 && !errors.As(err, &tooMany) { // 0 is no limit
				t.Fatalf("%d spans decoded, not refused at a limit of %d: %v", n, n-1, err)
			}
		}
		res := otlp.Map(req)
		for _, raw := range res.Events {
			var env struct {
				UUID, Event, Timestamp string
				DistinctID             string `json:"distinct_id"`
				Properties             map[string]json.RawMessage
			}
			if err := json.Unmarshal(raw, &env); err != nil {
				t.Fatalf("event %s: %v", raw, err)
			}
			if env.Event == "" || env.DistinctID == "" || env.Timestamp == "" || env.Properties == nil {
				t.Fatalf("event %s lacks a field", raw)
			}
			var trace, span string
			_ = json.Unmarshal(env.Properties["$otel_trace_id"], &trace)
			_ = json.Unmarshal(env.Properties["$otel_span_id"], &span)
			tid, _ := hex.DecodeString(trace)
			sid, _ := hex.DecodeString(span)
			if want := otlp.EventUUID(tid, sid, env.Event).String(); env.UUID != want {
				t.Fatalf("event %s: uuid %s, want %s from its trace, span and name", raw, env.UUID, want)
			}
		}
	})
}
