package misuse

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// SchemaTruncated's text pre-check never skips a schema the decode would find markers in:
// over every JSON object of the fixtures and the repository's corpus of served schemas, and
// over each with a marker put in.
func TestMarkerPrecheckAgreesWithTheDecode(t *testing.T) {
	var docs [][]byte
	for _, root := range []string{"testdata", "../testdata/mcp-tool-schemas"} {
		err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			var v any
			if json.Unmarshal(data, &v) != nil {
				return nil
			}
			collectObjects(v, &docs)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(docs) < 1000 {
		t.Fatalf("only %d objects found: the fixtures moved", len(docs))
	}
	skipped := 0
	for _, doc := range docs {
		variants := [][]byte{doc}
		if i := bytes.IndexByte(doc[1:], '"'); i >= 0 && bytes.HasPrefix(doc, []byte("{")) {
			for _, m := range []string{`"x":"[Object]",`, `"x":"\u005bArray]",`, `"token":"[redacted]",`} {
				variants = append(variants, append([]byte("{"+m), doc[1:]...))
			}
		}
		for _, v := range variants {
			parsed, err := jsonschema.UnmarshalJSON(bytes.NewReader(v))
			if err != nil {
				continue
			}
			want := containsMarkers(parsed)
			if !mayHoldMarkers(v) {
				skipped++
				if want {
					t.Errorf("pre-check skips a schema holding a marker: %.120s", v)
				}
			}
			if got := SchemaTruncated(v); got != want {
				t.Errorf("SchemaTruncated(%.120s) = %v, want %v", v, got, want)
			}
		}
	}
	if skipped == 0 {
		t.Error("the pre-check skipped no schema: it saves nothing")
	}
}

// collectObjects appends the JSON text of every object in v.
func collectObjects(v any, out *[][]byte) {
	switch v := v.(type) {
	case map[string]any:
		if b, err := json.Marshal(v); err == nil {
			*out = append(*out, b)
		}
		for _, e := range v {
			collectObjects(e, out)
		}
	case []any:
		for _, e := range v {
			collectObjects(e, out)
		}
	}
}

// BenchmarkSchemaTruncated: one served schema (PostHog's MCP tools of the repository's corpus,
// compact as the SDK sends them) checked for markers, as the consumer does for each tool of
// each tools/list event.
func BenchmarkSchemaTruncated(b *testing.B) {
	files, err := filepath.Glob("../testdata/mcp-tool-schemas/posthog/*.json")
	if err != nil {
		b.Fatal(err)
	}
	var schemas [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		var compact bytes.Buffer
		if json.Compact(&compact, data) == nil {
			schemas = append(schemas, compact.Bytes())
		}
	}
	if len(schemas) == 0 {
		b.Fatal("no schemas in ../testdata/mcp-tool-schemas/posthog")
	}
	b.ResetTimer()
	for i := range b.N {
		SchemaTruncated(schemas[i%len(schemas)])
	}
}
