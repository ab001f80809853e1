package schemacheck

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestDefaultContextDescription: the SDK default's shape (615 characters, plain ASCII, 8 of
// them double quotes JSON escapes), so it serializes to 623 characters plus quotes.
func TestDefaultContextDescription(t *testing.T) {
	if n := len(DefaultContextDescription); n != 615 {
		t.Fatalf("len = %d, want 615", n)
	}
	quotes := 0
	for i := 0; i < len(DefaultContextDescription); i++ {
		switch c := DefaultContextDescription[i]; {
		case c == '"':
			quotes++
		case c < 0x20 || c >= 0x7f || c == '\\':
			t.Fatalf("byte %d is %q: want plain ASCII", i, c)
		}
	}
	if quotes != 8 {
		t.Fatalf("%d double quotes, want 8 (the SDK default's)", quotes)
	}
	b, err := json.Marshal(DefaultContextDescription)
	if err != nil || len(b) != 623+2 {
		t.Fatalf("json.Marshal gives %d bytes, want 625 (%v)", len(b), err)
	}
	if got := string(appendJSString(nil, DefaultContextDescription)); got != string(b) {
		t.Fatalf("JSON.stringify form differs from json.Marshal")
	}
}

// TestDefaultContextDescriptionMatchesSDK takes the schemas @posthog/mcp 0.16.3 really served
// (recorded by the gateway's and misuse's fixtures), removes the context property the SDK
// injected, injects ours, and requires the same serialized size, tool by tool: the built-in
// stand-in measures exactly what a server on the SDK's default serves.
func TestDefaultContextDescriptionMatchesSDK(t *testing.T) {
	var listings []json.RawMessage
	for _, pattern := range []string{"../ingest/gateway/testdata/sdk/tools_list_*.json", "../misuse/testdata/sdk/*.json"} {
		files, _ := filepath.Glob(pattern)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var one struct {
				Event      string                     `json:"event"`
				Properties map[string]json.RawMessage `json:"properties"`
				Events     []struct {
					Event      string                     `json:"event"`
					Properties map[string]json.RawMessage `json:"properties"`
				} `json:"events"`
			}
			if err := json.Unmarshal(data, &one); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if one.Event == "$mcp_tools_list" {
				listings = append(listings, one.Properties["$mcp_response"])
			}
			for _, e := range one.Events {
				if e.Event == "$mcp_tools_list" {
					listings = append(listings, e.Properties["$mcp_response"])
				}
			}
		}
	}
	checked := 0
	for _, l := range listings {
		var resp struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(l, &resp); err != nil {
			t.Fatal(err)
		}
		for _, tool := range resp.Tools {
			served, err := parseJS(tool.InputSchema)
			if err != nil {
				t.Fatal(err)
			}
			props := served.get("properties")
			ctx := props.get("context")
			if ctx == nil {
				continue // not injected (a root union)
			}
			real := ctx.get("description")
			if real == nil || utf16Len(appendJSString(nil, real.str)) != utf16Len(appendJSString(nil, DefaultContextDescription)) {
				t.Fatalf("%s: the SDK's description does not serialize to the stand-in's length", tool.Name)
			}
			// The schema before the SDK's injection: no context property, not required.
			before := &jsValue{kind: jsObject}
			for _, m := range served.obj {
				switch m.key {
				case "properties":
					p := &jsValue{kind: jsObject}
					for _, pm := range m.val.obj {
						if pm.key != "context" {
							p.obj = append(p.obj, pm)
						}
					}
					m.val = p
				case "required":
					r := &jsValue{kind: jsArray}
					for _, el := range m.val.arr {
						if el.kind != jsString || el.str != "context" {
							r.arr = append(r.arr, el)
						}
					}
					m.val = r
				}
				before.obj = append(before.obj, m)
			}
			ours, injected := injectContext(before, "")
			if !injected {
				t.Fatalf("%s: not injected", tool.Name)
			}
			if got, want := utf16Len(appendJS(nil, ours)), utf16Len(appendJS(nil, served)); got != want {
				t.Errorf("%s: injected size %d, the SDK served %d", tool.Name, got, want)
			}
			checked++
		}
	}
	if checked < 10 {
		t.Fatalf("checked %d tools: the recordings are missing", checked)
	}
}

func TestInjectContext(t *testing.T) {
	const d = "why"
	ctx := `"context":{"type":"string","description":"why"}`
	for _, tc := range []struct {
		name, in, want string
		injected       bool
	}{
		{"adds at the end of properties and required",
			`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`,
			`{"type":"object","properties":{"a":{"type":"string"},` + ctx + `},"required":["a","context"]}`, true},
		{"creates required at the end",
			`{"type":"object","properties":{"a":{}}}`,
			`{"type":"object","properties":{"a":{},` + ctx + `},"required":["context"]}`, true},
		{"creates properties and required",
			`{"type":"object"}`,
			`{"type":"object","properties":{` + ctx + `},"required":["context"]}`, true},
		{"empty schema",
			`{}`,
			`{"properties":{` + ctx + `},"required":["context"]}`, true},
		{"deletes additionalProperties false, wherever it is",
			`{"additionalProperties":false,"type":"object","properties":{}}`,
			`{"type":"object","properties":{` + ctx + `},"required":["context"]}`, true},
		{"keeps additionalProperties true",
			`{"type":"object","additionalProperties":true}`,
			`{"type":"object","additionalProperties":true,"properties":{` + ctx + `},"required":["context"]}`, true},
		{"keeps additionalProperties schema",
			`{"type":"object","additionalProperties":{"type":"string"}}`,
			`{"type":"object","additionalProperties":{"type":"string"},"properties":{` + ctx + `},"required":["context"]}`, true},
		{"keeps additionalProperties that is falsy but not false",
			`{"additionalProperties":0}`,
			`{"additionalProperties":0,"properties":{` + ctx + `},"required":["context"]}`, true},
		{"replaces a non-array required",
			`{"properties":{"a":{}},"required":"a"}`,
			`{"properties":{"a":{},` + ctx + `},"required":["context"]}`, true},
		{"does not repeat context in required",
			`{"properties":{"a":{}},"required":["context","a"]}`,
			`{"properties":{"a":{},` + ctx + `},"required":["context","a"]}`, true},
		{"replaces a properties value that is not a map",
			`{"properties":["a"],"type":"object"}`,
			`{"properties":{` + ctx + `},"type":"object","required":["context"]}`, true},
		{"a root type other than object is still injected",
			`{"type":"string"}`,
			`{"type":"string","properties":{` + ctx + `},"required":["context"]}`, true},
		{"keeps $schema and every other keyword",
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"x":{"$ref":"#/$defs/X"}},"$defs":{"X":{}}}`,
			`{"$schema":"https://json-schema.org/draft/2020-12/schema","properties":{"x":{"$ref":"#/$defs/X"},` + ctx + `},"$defs":{"X":{}},"required":["context"]}`, true},
		{"numeric property names sort first, context still after the names",
			`{"properties":{"b":{},"1":{}}}`,
			`{"properties":{"1":{},"b":{},` + ctx + `},"required":["context"]}`, true},

		{"skips an existing context property", `{"type":"object","properties":{"context":{"type":"number"}}}`, "", false},
		{"skips an existing boolean context property", `{"properties":{"context":false},"additionalProperties":false}`, "", false},
		{"skips root $ref", `{"$ref":"#/$defs/A","$defs":{"A":{"type":"object"}}}`, "", false},
		{"skips root oneOf", `{"oneOf":[{"type":"object"}]}`, "", false},
		{"skips root anyOf", `{"type":"object","anyOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}`, "", false},
		{"skips root allOf", `{"allOf":[]}`, "", false},
		{"skips a non-object root", `["a"]`, "", false},
		{"skips a boolean root", `true`, "", false},
		{"skips a string root", `"x"`, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, ok, err := InjectContext(json.RawMessage(tc.in), d)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.injected {
				t.Fatalf("injected = %v, want %v", ok, tc.injected)
			}
			if !ok {
				if string(out) != tc.in {
					t.Fatalf("not injected, but output changed: %s", out)
				}
				return
			}
			if string(out) != tc.want {
				t.Fatalf("\ngot  %s\nwant %s", out, tc.want)
			}
			// The input is not modified (the tree is shared, not mutated).
			again, _, _ := InjectContext(json.RawMessage(tc.in), d)
			if string(again) != string(out) {
				t.Fatalf("second injection differs: %s", again)
			}
		})
	}
}

func TestInjectContextDefaultAndErrors(t *testing.T) {
	out, ok, err := InjectContext(json.RawMessage(`{}`), "")
	if err != nil || !ok || !strings.Contains(string(out), string(appendJSString(nil, DefaultContextDescription))) {
		t.Fatalf("empty description should mean the default: %s %v %v", out, ok, err)
	}
	if _, _, err := InjectContext(json.RawMessage(`{"a":`), "x"); err == nil {
		t.Fatal("invalid JSON: no error")
	}
}

// TestInjectionDoesNotMutateTree: Check measures coverage on the schema as served and size
// after injection from one parse, so injection must leave the parsed tree alone.
func TestInjectionDoesNotMutateTree(t *testing.T) {
	in := `{"type":"object","properties":{"a":{}},"required":["a"],"additionalProperties":false}`
	root, err := parseJS([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := injectContext(root, "x"); !ok {
		t.Fatal("not injected")
	}
	if got := string(appendJS(nil, root)); got != in {
		t.Fatalf("tree changed: %s", got)
	}
}

// schemaAtBoundary returns a schema whose serialized size after injection of
// DefaultContextDescription is exactly target UTF-16 units, padding a description with
// "é" (1 unit, 2 bytes) and "😀" (2 units, 4 bytes, 1 rune).
func schemaAtBoundary(t *testing.T, target int) json.RawMessage {
	t.Helper()
	mk := func(desc string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"` + desc + `"}},"required":["q"]}`)
	}
	base := Check([]Tool{{Name: "q", InputSchema: mk("")}}, Settings{}).PerTool[0].SchemaChars
	need := target - base
	emoji := need / 4 // half the padding in astral characters
	desc := strings.Repeat("😀", emoji) + strings.Repeat("é", need-2*emoji)
	s := mk(desc)
	if got := Check([]Tool{{Name: "q", InputSchema: s}}, Settings{}).PerTool[0].SchemaChars; got != target {
		t.Fatalf("built %d units, want %d", got, target)
	}
	return s
}

// TestOversizedBoundary: 16,383 UTF-16 units is under the limit, 16,384 reaches it
// (the ratchet's definitions: "Oversized: serialized size >= the server's char_limit"), counted in UTF-16
// units after injection, neither in bytes nor in runes.
func TestOversizedBoundary(t *testing.T) {
	for _, tc := range []struct {
		units     int
		oversized bool
	}{{16383, false}, {16384, true}} {
		s := schemaAtBoundary(t, tc.units)
		r := Check([]Tool{{Name: "q", InputSchema: s}}, Settings{})
		tr := r.PerTool[0]
		if tr.SchemaChars != tc.units || tr.Oversized != tc.oversized || !tr.Injected {
			t.Fatalf("%d units: got size %d oversized %v injected %v", tc.units, tr.SchemaChars, tr.Oversized, tr.Injected)
		}
		out, _, _ := InjectContext(s, "")
		if len(out) <= 16384 || utf8.RuneCount(out) >= tc.units {
			t.Fatalf("test schema does not tell units from bytes (%d) and runes (%d)", len(out), utf8.RuneCount(out))
		}
		if want := 1; tc.oversized && r.Oversized != want {
			t.Fatalf("report counts %d oversized", r.Oversized)
		}
		// Without injection the same schema is 615+ characters smaller and never oversized.
		off := Check([]Tool{{Name: "q", InputSchema: s}}, Settings{InjectContext: new(bool)}).PerTool[0]
		if off.Oversized || off.SchemaChars >= tc.units-615 {
			t.Fatalf("without injection: %d units, oversized %v", off.SchemaChars, off.Oversized)
		}
	}
}

// TestInjectionWithNonASCIIDescription: a configured description with non-ASCII text counts
// in UTF-16 units, and characters JSON escapes count with their escapes.
func TestInjectionWithNonASCIIDescription(t *testing.T) {
	s := json.RawMessage(`{"type":"object"}`)
	plain := Check([]Tool{{Name: "a", InputSchema: s}}, Settings{ContextDescription: "x"}).PerTool[0].SchemaChars
	for _, tc := range []struct {
		desc  string
		extra int
	}{{"é", 0}, {"😀", 1}, {"\"", 1}, {"\n", 1}, {"\x01", 5}} {
		got := Check([]Tool{{Name: "a", InputSchema: s}}, Settings{ContextDescription: tc.desc}).PerTool[0].SchemaChars
		if got != plain+tc.extra {
			t.Errorf("description %q: size %d, want %d", tc.desc, got, plain+tc.extra)
		}
	}
}
