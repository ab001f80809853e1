package misuse_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// checkSameAsReference asserts that FromResponse reads response as the reference (decoding
// with encoding/json into maps) does.
func checkSameAsReference(t *testing.T, response []byte) {
	t.Helper()
	keys, total, ok := misuse.FromResponse(response)
	wantKeys, wantTotal, wantOK := misuse.FromResponseReference(response)
	if ok != wantOK || total != wantTotal || !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("response %q:\nFromResponse = %q, %d, %v\nreference    = %q, %d, %v", response, keys, total, ok, wantKeys, wantTotal, wantOK)
	}
}

// sdkResult is a result as PostHog's MCP server returns it through the SDK: the object both
// as text and as structuredContent, or the text alone.
func sdkResult(obj string, text bool) string {
	if text {
		return textResult(obj)
	}
	return `{"content":[{"type":"text","text":` + mustJSON(obj) + `}],"structuredContent":` + obj + `}`
}

// equalityResponses are the results the differential test reads: FromResponse's test cases,
// SDK-shaped results, the SDK fixtures' results, and adversarial ones.
func equalityResponses(t *testing.T) []string {
	var out []string
	for _, tc := range fromResponseCases() {
		out = append(out, tc.response)
	}
	for _, r := range benchResponses() {
		out = append(out, r.response)
	}

	// SDK-shaped: object results with the keys, arrays wrapped, notices appended to text.
	notice := func(keys []string, total int) string {
		q := make([]string, len(keys))
		for i, k := range keys {
			q[i] = mustJSON(k)
		}
		s := "Ignored input keys: " + strings.Join(q, ", ")
		if more := total - len(keys); more > 0 {
			s += fmt.Sprintf(" and %d more", more)
		}
		return s + ". These keys are not part of the tool's input schema, so the tool did not use them."
	}
	many := make([]string, 20)
	for i := range many {
		many[i] = fmt.Sprintf("query.series.%d.maht", i)
	}
	for _, keys := range [][]string{{"title"}, {"query.source.serie", "tags.0"}, many} {
		for _, total := range []int{len(keys), len(keys) + 5} {
			n := notice(keys, total)
			rows := `[{"id":10234,"name":"weekly-signups-123","status":"active","updated_at":"2026-11-01T10:00:00Z","url":"https://app.example.com/posthog/weekly-signups-123"}]`
			obj := `{"ok":true,"tool":"create-insight","count":1,"results":` + rows + `,"next_cursor":"c_1x2y","_ignoredKeys":` + mustJSON(keys) + `,"_ignoredKeysNote":` + mustJSON(n) + `}`
			wrapped := `{"results":` + rows + `,"_ignoredKeys":` + mustJSON(keys) + `,"_ignoredKeysNote":` + mustJSON(n) + `}`
			out = append(out,
				sdkResult(obj, false), sdkResult(obj, true), sdkResult(wrapped, false), sdkResult(wrapped, true),
				obj, wrapped,
				textResult("Found 1 result(s) for create-insight: weekly-signups-123.\n\n"+n),
				textResult("Found 1 result(s).\n\n"+strings.Replace(n, fmt.Sprintf(" and %d more", total-len(keys)), fmt.Sprintf(" (%d total)", total), 1)),
				mustJSON("Created.\n\n"+n),
				`{"content":[{"type":"text","text":"rows"},{"type":"text","text":`+mustJSON(n)+`},{"type":"image","data":"x"}]}`,
			)
		}
	}

	// The SDK fixtures' results.
	files, _ := filepath.Glob(filepath.Join("testdata", "sdk", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var s sdkSession
		if err := json.Unmarshal(data, &s); err != nil {
			t.Fatal(err)
		}
		for _, e := range s.Events {
			if r, ok := e.Properties["$mcp_response"]; ok {
				out = append(out, string(r))
			}
		}
	}

	// Adversarial: what map and struct decoding, validity and the literal prefilter decide.
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	for _, depth := range []int{9999, 10000, 10001} {
		// The nesting limit: the object itself is one level.
		arrays := strings.Repeat("[", depth-1) + strings.Repeat("]", depth-1)
		objects := strings.Repeat(`{"a":`, depth-1) + "1" + strings.Repeat("}", depth-1)
		out = append(out, `{"_ignoredKeys":["a"],"x":`+arrays+`}`, `{"_ignoredKeys":["a"],"x":`+objects+`}`,
			`{"content":[{"type":"text","text":"Ignored input keys: a"}],"x":`+arrays+`}`)
	}
	out = append(out,
		`{"_ignoredKeys":["a"],"_ignoredKeys":["b"]}`,
		`{"_ignoredKeys":["a"],"_ignoredKeys":null}`,
		`{"_ignoredKeys":["a"],"_ignoredKeys":[]}`,
		`{"_ignoredKeys":["a"],"_ignoredKeysNote":"Ignored input keys: a (9 total)","_ignoredKeysNote":1}`,
		`{"_ignoredKeys":["a"],"_ignoredKeysNote":1,"_ignoredKeysNote":"Ignored input keys: a (9 total)"}`,
		`{"_IGNOREDKEYS":["a"],"Ignored input keys":1}`,
		`{"_IgnoredKeys":["a"],"_ignoredKeysX":["b"]}`,
		`{"\u005fignoredKeys":["a"],"x":"_ignoredKeys"}`,
		`{"\u005fignoredKeys":["a"]}`,
		`{"_ignoredKeys":["\u005fignored","\ud800","\"q\"","a\\b"],"_ignoredKeysNote":"_ignoredKeys"}`,
		`{"structuredContent":{"_ignoredKeys":["s"]},"structuredContent":null,"x":"_ignoredKeys"}`,
		`{"structuredContent":{"_ignoredKeys":["s"],"_ignoredKeys":[1]},"content":[{"type":"text","text":"Ignored input keys: c"}]}`,
		`{"StructuredContent":{"_ignoredKeys":["s"]}}`,
		`{"structuredContent":"{\"_ignoredKeys\":[\"s\"]}"}`,
		`{"structuredContent":[{"_ignoredKeys":["s"]}]}`,
		`{"content":[{"TYPE":"text","TEXT":"Ignored input keys: a"}]}`,
		`{"content":[{"tYpE":"text","Text":"Ignored input keys: a","text":null}]}`,
		`{"content":[{"type":"text","text":"Ignored input keys: a","text":1}]}`,
		`{"content":[{"type":"text","text":"Ignored input keys: a","type":["text"]}]}`,
		`{"content":[{"\u0074ype":"text","text":"Ignored input keys: a"}]}`,
		`{"content":[{"ty\u212ae":"text","text":"Ignored input keys: a"},{"type":"text","te\u212at":"Ignored input keys: b"}]}`,
		"{\"content\":[{\"ty\u212ae\":\"text\",\"text\":\"Ignored input keys: a\"}]}",
		`{"content":[null,"x",1,[],{"type":"text","text":"Ignored input keys: a"},true]}`,
		`{"content":{"type":"text","text":"Ignored input keys: a"}}`,
		`{"content":"Ignored input keys: a"}`,
		`{"content":[{"type":"text","text":"Ignored input keys: a"}],"content":[]}`,
		`{"content":[{"type":"text","text":" {\"_ignoredKeys\":[\"j\"]} "}],"x":"_ignoredKeys"}`,
		`{"content":[{"type":"text","text":"{\"_ignoredKeys\":[\"j\"]} trailing Ignored input keys: t"}]}`,
		`{"content":[{"type":"text","text":"{\"_ignoredKeys\":[1e999,\"j\"]} Ignored input keys: t"}]}`,
		`{"content":[{"type":"text","text":"{\"_ignoredKeys\":[\"j\"],\"_ignoredKeys\":[]} Ignored input keys: t"}]}`,
		`{"_ignoredKeys":["a",1e999]}`,
		`{"_ignoredKeys":["a",[1e999]]}`,
		`{"_ignoredKeys":["a",{"b":1e-999}]}`,
		`{"_ignoredKeys":["a",1,true,null,{},[],""]}`,
		`{"_ignoredKeys":[1,"a"]}`,
		`{"_ignoredKeys":{"a":"b"}}`,
		`{"_ignoredKeys":"a"}`,
		`{"_ignoredKeys":null}`,
		`{"_ignoredKeys":[null]}`,
		`{"_ignoredKeys":[""]}`,
		` { "_ignoredKeys" : [ "a" , "b" ] , "_ignoredKeysNote" : "Ignored input keys: a, b and 3 more" } `,
		`{"_ignoredKeys":["a"]} x`,
		`{"_ignoredKeys":["a"]}{}`,
		`{"_ignoredKeys":["a"],}`,
		`{"_ignoredKeys":["a",]}`,
		`{"_ignoredKeys":["a"] "b":1}`,
		`{"_ignoredKeys"["a"]}`,
		`,{"_ignoredKeys":["a"]}`,
		`:{"_ignoredKeys":["a"]}`,
		`{"_ignoredKeys":["a"],"b":}`,
		`{"_ignoredKeys":["a"],"b"}`,
		`{"_ignoredKeys":["a"`,
		`{"_ignoredKeys":["a\`,
		`{"_ignoredKeys":["a"],"b":tru}`,
		`{"_ignoredKeys":["a"],"b":01}`,
		`{"_ignoredKeys":["a"],"b":"`+"\x01"+`"}`,
		"{\"_ignoredKeys\":[\"a\xff\",\"\xc3\"],\"_ignoredKeysNote\":\"Ignored input keys: \xfe (5 total)\"}",
		"{\"_ignoredKeys\xff\":[\"a\"],\"x\":\"_ignoredKeys\"}",
		"\xef\xbb\xbf{\"_ignoredKeys\":[\"a\"]}",
		`{"_ignoredKeys":["a"],"deep":`+deep+`}`,
		`{"x":`+deep+`,"content":[{"type":"text","text":"Ignored input keys: a"}]}`,
		`{"_ignoredKeys":["a"],"deep":`+strings.Repeat(`{"a":`, 500)+`1`+strings.Repeat("}", 500)+`}`,
		`["_ignoredKeys"]`,
		`[{"_ignoredKeys":["a"]}]`,
		`"_ignoredKeys"`,
		`"Ignored input keys: a\u0000b"`,
		`"Ignored input keys: a" `,
		`"Ignored input keys: a" x`,
		`"Ignored input keys: \ud83d\ude00, b"`,
		`null`,
		` null `,
		`1`,
		``,
		`_ignoredKeys`,
		`Ignored input keys: a`,
		`{"x":"Ignored input\u0020keys: a"}`,
		`{"content":[{"type":"text","text":"Ignored input\u0020keys: a"}]}`,
		`{"content":[{"type":"text","text":"Ignored input keys: a"}],"x":"\ignored"}`,
		`{"content":[{"type":"text","text":"Ignored\u0020input keys: a"}],"x":"Ignored input keys"}`,
		`{"content":[{"type":"text","text":"_ignoredKeys Ignored input keys: a"}]}`,
		// Quoted keys in a notice, decoded as JSON strings.
		textResult("Ignored input keys: \"a\u0001b\", \"c\"."),
		textResult("Ignored input keys: \"a\tb\", \"c\"."),
		textResult(`Ignored input keys: "a\ud800b", "\ud83d\ude00", "\ud83dx", "\x", "c".`),
		textResult(`Ignored input keys: "\u00e9\/\"", "é", "c".`),
		"{\"content\":[{\"type\":\"text\",\"text\":\"Ignored input keys: \\\"a\xffb\\\", \\\"\xc3\\\".\"}]}",
		"\"Ignored input keys: \\\"a\xffb\\\", \\\"\xed\xa0\x80\\\".\"",
		`{"_ignoredKeys":["a"],"_ignoredKeysNote":"Ignored input keys: \"a\ud800\" (7 total)"}`,
	)
	return out
}

// TestValidJSON: validJSON is json.Valid on the differential test's results.
func TestValidJSON(t *testing.T) {
	for _, r := range equalityResponses(t) {
		for _, b := range []string{r, r + "x", " [" + r + "] "} {
			if got, want := misuse.ValidJSON([]byte(b)), json.Valid([]byte(b)); got != want {
				t.Fatalf("validJSON(%q) = %v, json.Valid %v", b, got, want)
			}
		}
	}
}

// TestFromResponseMatchesReference: FromResponse reads every result as decoding with
// encoding/json into maps did.
func TestFromResponseMatchesReference(t *testing.T) {
	for _, r := range equalityResponses(t) {
		checkSameAsReference(t, []byte(r))
	}
}

// FuzzFromResponseMatchesReference: FromResponse reads any result as the reference does.
// Seeds: testdata/fuzz/FuzzFromResponseMatchesReference, and testdata/fuzz/FuzzFromResponse's.
func FuzzFromResponseMatchesReference(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzFromResponse", "*"))
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		if err != nil {
			f.Fatal(err)
		}
		// go test fuzz v1: one []byte("...") line.
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		if len(lines) == 2 && strings.HasPrefix(lines[1], "[]byte(") {
			var b string
			if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"), "%q", &b); err == nil {
				f.Add([]byte(b))
			}
		}
	}
	f.Fuzz(func(t *testing.T, response []byte) {
		checkSameAsReference(t, response)
		if got, want := misuse.ValidJSON(response), json.Valid(response); got != want {
			t.Fatalf("validJSON(%q) = %v, json.Valid %v", response, got, want)
		}
	})
}
