package misuse_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// textResult is a CallToolResult holding one text item.
func textResult(text string) string {
	b, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	return string(b)
}

// fromResponseCase is a tool result and what FromResponse reads from it.
type fromResponseCase struct {
	name, response string
	keys           []string
	total          int
	ok             bool
}

func fromResponseCases() []fromResponseCase {
	const note = `Ignored input keys: "title", "query.source.serie". These keys are not part of the tool's input schema, so the tool did not use them.`
	twentyFive := make([]string, 25)
	for i := range twentyFive {
		twentyFive[i] = fmt.Sprintf("k%d", i)
	}
	quoted, _ := json.Marshal(twentyFive[:20])
	return []fromResponseCase{
		{"object result as JSON text", textResult(`{"ok":true,"_ignoredKeys":["title","query.source.serie"],"_ignoredKeysNote":` + mustJSON(note) + `}`),
			[]string{"title", "query.source.serie"}, 2, true},
		{"array result wrapped", textResult(`{"results":[1,2],"_ignoredKeys":["series.0.maht"],"_ignoredKeysNote":"Ignored input keys: \"series.0.maht\"."}`),
			[]string{"series.0.maht"}, 1, true},
		{"structuredContent", `{"content":[{"type":"text","text":"{}"}],"structuredContent":{"ok":true,"_ignoredKeys":["a"]}}`, []string{"a"}, 1, true},
		{"top-level object", `{"ok":true,"_ignoredKeys":["a","b"]}`, []string{"a", "b"}, 2, true},
		{"notice appended to text", textResult("Created insight 42.\n\n" + note), []string{"title", "query.source.serie"}, 2, true},
		{"notice with bare keys", textResult("Done. Ignored input keys: title, query.source.serie. These keys are not part of the tool's input schema."),
			[]string{"title", "query.source.serie"}, 2, true},
		{"notice in a later text item", `{"content":[{"type":"text","text":"rows"},{"type":"text","text":` + mustJSON(note) + `}]}`,
			[]string{"title", "query.source.serie"}, 2, true},
		{"last notice wins", textResult("echo: Ignored input keys: \"fake\".\n\n" + note), []string{"title", "query.source.serie"}, 2, true},
		{"count of keys cut off", textResult(`Ignored input keys: ` + strings.Trim(strings.ReplaceAll(string(quoted), ",", ", "), "[]") + ` (and 5 more). These keys ...`),
			twentyFive[:20], 25, true},
		{"list capped at 20 with the total", `{"_ignoredKeys":` + mustJSON(twentyFive) + `}`, twentyFive[:20], 25, true},
		{"total from the note", `{"_ignoredKeys":` + string(quoted) + `,"_ignoredKeysNote":"Ignored input keys: \"k0\" ... 25 keys in total."}`, twentyFive[:20], 25, true},
		{"control characters masked", textResult("Ignored input keys: \"a\\nb\", \"c\u2028d\"."), []string{"a?b", "c?d"}, 2, true},
		{"bare string result", mustJSON(note), []string{"title", "query.source.serie"}, 2, true},
		{"no notice", textResult("Created insight 42."), nil, 0, false},
		{"empty list", `{"_ignoredKeys":[]}`, nil, 0, false},
		{"not JSON", `{"content":`, nil, 0, false},
		{"notice lost to the SDK's 32 KB cut", textResult(strings.Repeat("r", 32768) + "..."), nil, 0, false},
		{"error result", `{"content":[{"type":"text","text":"MCP error -32602: Tool x not found"}],"isError":true}`, nil, 0, false},
	}
}

func TestFromResponse(t *testing.T) {
	for _, tc := range fromResponseCases() {
		t.Run(tc.name, func(t *testing.T) {
			keys, total, ok := misuse.FromResponse([]byte(tc.response))
			if ok != tc.ok || total != tc.total || !reflect.DeepEqual(keys, tc.keys) {
				t.Fatalf("FromResponse = %q, %d, %v; want %q, %d, %v", keys, total, ok, tc.keys, tc.total, tc.ok)
			}
		})
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestDeriveOrder: reported beats response beats schema; not measurable says why.
func TestDeriveOrder(t *testing.T) {
	s, err := misuse.CompileSchema([]byte(`{"properties":{"a":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	params := []byte(`{"request":{"params":{"name":"t","arguments":{"a":1,"b":2}}}}`)
	resp := []byte(textResult(`Ignored input keys: "r".`))
	tests := []struct {
		name string
		call misuse.Call
		want misuse.IgnoredKeys
	}{
		{"reported", misuse.Call{Reported: true, ReportedKeys: []string{"x\ny"}, ReportedTotal: 3, Response: resp, Parameters: params, Schema: s},
			misuse.IgnoredKeys{Keys: []string{"x?y"}, Total: 3, Source: misuse.SourceReported}},
		{"reported empty", misuse.Call{Reported: true, Response: resp, Parameters: params, Schema: s},
			misuse.IgnoredKeys{Source: misuse.SourceReported}},
		{"response", misuse.Call{Response: resp, Parameters: params, Schema: s},
			misuse.IgnoredKeys{Keys: []string{"r"}, Total: 1, Source: misuse.SourceResponse}},
		{"schema", misuse.Call{Response: []byte(textResult("ok")), Parameters: params, Schema: s},
			misuse.IgnoredKeys{Keys: []string{"b"}, Total: 1, Source: misuse.SourceSchema}},
		{"no schema", misuse.Call{Parameters: params},
			misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonNoSchema}},
		{"no parameters", misuse.Call{Schema: s},
			misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonNoArguments}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := misuse.Derive(tc.call); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Derive = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestMaskControl(t *testing.T) {
	for in, want := range map[string]string{
		"plain":               "plain",
		"a\x00b\x1fc\x7fd":    "a?b?c?d",
		"\u0085x\u009f":       "?x?",
		"line\u2028sep\u2029": "line?sep?",
		"é\u00a0ok":           "é\u00a0ok",
	} {
		if got := misuse.MaskControl(in); got != want {
			t.Errorf("MaskControl(%q) = %q, want %q", in, got, want)
		}
	}
}
