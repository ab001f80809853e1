package misuse_test

import (
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// benchResponses are SDK-shaped $mcp_response values of about 1 KB: a text result and an
// object result (as text and as structuredContent) naming no key (the common case), an object
// result (as text and as structuredContent) with
// `_ignoredKeys` and `_ignoredKeysNote`, and a text result with the notice appended.
func benchResponses() []struct{ name, response string } {
	rows := strings.Repeat(`{"id":42,"name":"Weekly signups by browser","url":"https://example.com/insights/42"},`, 10)
	obj := `{"ok":true,"tool":"create-insight","count":10,"results":[` + strings.TrimSuffix(rows, ",") + `]`
	note := `Ignored input keys: "title", "query.source.serie" and 2 more. These keys are not part of the tool's input schema, so the tool did not use them.`
	sdkRows := strings.Repeat(`{"id":10234,"name":"weekly-signups-123","status":"active","updated_at":"2026-11-01T10:00:00Z","url":"https://app.example.com/posthog/weekly-signups-123"},`, 3)
	sdkObj := `{"ok":true,"tool":"create-insight","count":3,"results":[` + strings.TrimSuffix(sdkRows, ",") + `],"next_cursor":"c_1x2y3z"}`
	keyed := obj + `,"_ignoredKeys":["title","query.source.serie"],"_ignoredKeysNote":` + mustJSON(note) + `}`
	return []struct{ name, response string }{
		{"none", textResult(obj + "}")},
		{"none-object", `{"content":[{"type":"text","text":` + mustJSON(sdkObj) + `}],"structuredContent":` + sdkObj + `}`},
		{"top", `{"content":[{"type":"text","text":` + mustJSON(keyed) + `}],"structuredContent":` + keyed + `}`},
		{"text", textResult("Found 10 results: " + rows + "\n\n" + note)},
	}
}

func BenchmarkFromResponse(b *testing.B) { benchmarkFromResponse(b, misuse.FromResponse) }

// BenchmarkFromResponseReference is BenchmarkFromResponse of the reference implementation
// (decoding into maps), for comparison.
func BenchmarkFromResponseReference(b *testing.B) {
	benchmarkFromResponse(b, misuse.FromResponseReference)
}

func benchmarkFromResponse(b *testing.B, fromResponse func([]byte) ([]string, int, bool)) {
	for _, r := range benchResponses() {
		b.Run(r.name, func(b *testing.B) {
			response := []byte(r.response)
			if _, _, ok := fromResponse(response); ok == strings.HasPrefix(r.name, "none") {
				b.Fatalf("%s: ok = %v", r.name, ok)
			}
			b.SetBytes(int64(len(response)))
			b.ReportAllocs()
			for b.Loop() {
				fromResponse(response)
			}
		})
	}
}
