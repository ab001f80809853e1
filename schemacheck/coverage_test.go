package schemacheck

import (
	"encoding/json"
	"testing"
)

// covOf checks one schema and returns its basic and full (described, nested) counts.
func covOf(t *testing.T, schema string) (d, n, fd, fn int) {
	t.Helper()
	r := Check([]Tool{{Name: "t", InputSchema: json.RawMessage(schema)}}, Settings{})
	tr := r.PerTool[0]
	return tr.Described, tr.Nested, tr.FullDescribed, tr.FullNested
}

func TestCoverage(t *testing.T) {
	for _, tc := range []struct {
		name           string
		schema         string
		d, n, fd, fn   int
		wantNoProblems bool
	}{
		{name: "top-level properties do not count",
			schema:         `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string","description":"b"}}}`,
			wantNoProblems: true},
		{name: "the worked example in coverage.go", d: 1, n: 4, fd: 1, fn: 4, wantNoProblems: true,
			schema: `{"properties":{"query":{"type":"object","properties":{
				"kind":{"description":"..."},
				"series":{"type":"array","items":{"anyOf":[{"properties":{"event":{"type":"string"}}}]}},
				"required":{"type":"boolean"}}}}}`},
		{name: "empty description is undescribed, non-string description is undescribed", d: 1, n: 3, fd: 1, fn: 3,
			schema: `{"properties":{"o":{"properties":{"a":{"description":""},"b":{"description":5},"c":{"description":"c"}}}}}`},
		{name: "keyword-named parameters at several depths are ordinary parameters", d: 3, n: 6, fd: 3, fn: 6, wantNoProblems: true,
			schema: `{"type":"object","required":["required","properties"],"properties":{
				"required":{"type":"object","description":"top, not counted","properties":{
					"properties":{"type":"object","description":"d1","properties":{
						"type":{"type":"string","description":"d2"},
						"definitions":{"type":"string"},
						"required":{"type":"array","items":{"type":"string"}}}},
					"description":{"type":"string","description":"a parameter named description"},
					"items":{"type":"string"}}},
				"properties":{"type":"object"}}}`},
		{name: "a properties map holding description does not describe its parent", d: 0, n: 2, fd: 0, fn: 2,
			schema: `{"properties":{"o":{"properties":{"p":{"properties":{"description":{"type":"string"}}}}}}}`},
		{name: "boolean subschemas and $ref entries are undescribed unless described", d: 2, n: 5, fd: 2, fn: 6,
			schema: `{"$defs":{"X":{"type":"object","properties":{"x":{"type":"string"}}}},"properties":{"o":{"type":"object","properties":{
				"t":true,"f":false,"r":{"$ref":"#/$defs/X"},"rd":{"$ref":"#/$defs/X","description":"described ref"},
				"s":{"type":"string","description":"s"}}}}}`},
		{name: "anyOf/oneOf/allOf branches and object items walk at the same depth", d: 0, n: 4, fd: 0, fn: 4,
			schema: `{"anyOf":[{"properties":{"top":{}}}],"properties":{"o":{
				"oneOf":[{"properties":{"a":{}}}],"allOf":[{"properties":{"b":{}}}],"anyOf":[{"properties":{"c":{}}}],
				"items":{"properties":{"d":{}}}}}}`},
		{name: "root items walk at depth 0", d: 0, n: 1, fd: 0, fn: 1,
			schema: `{"items":{"properties":{"top":{"properties":{"nested":{}}}}}}`},
		{name: "full walks additionalProperties, patternProperties, items arrays, prefixItems", d: 1, n: 1, fd: 3, fn: 6,
			schema: `{"properties":{
				"map":{"type":"object","additionalProperties":{"type":"object","properties":{"k":{"description":"k"}}}},
				"pat":{"patternProperties":{"^x":{"properties":{"p":{}}}}},
				"tup":{"items":[{"properties":{"i":{"description":"i"}}}]},
				"pre":{"prefixItems":[{"properties":{"j":{}}},true],"items":{"properties":{"after":{"description":"a"}}}}},
				"additionalProperties":{"properties":{"deep":{}}}}`},
		{name: "root additionalProperties values are one level down", d: 0, n: 0, fd: 0, fn: 1,
			schema: `{"type":"object","additionalProperties":{"type":"object","properties":{"v":{}}}}`},
		{name: "basic coverage ignores additionalProperties and $ref targets", d: 0, n: 0, fd: 1, fn: 2,
			schema: `{"$defs":{"T":{"properties":{"a":{"description":"a"},"b":{}}}},"properties":{"r":{"$ref":"#/$defs/T"}}}`},
		{name: "definitions and escaped pointers (~0 ~1, percent-encoding)", d: 0, n: 3, fd: 1, fn: 5,
			schema: `{"definitions":{"a/b":{"properties":{"x":{"description":"x"}}},"c~d":{"properties":{"y":{}}}},
				"properties":{"o":{"properties":{
					"p":{"$ref":"#/definitions/a~1b"},"q":{"$ref":"#/definitions/c~0d"},"r":{"$ref":"#/definitions/a%7E1b"}}}}}`},
		{name: "each $ref target once", d: 0, n: 0, fd: 1, fn: 2,
			schema: `{"$defs":{"T":{"properties":{"a":{"description":"a"},"b":{}}}},"properties":{
				"r1":{"$ref":"#/$defs/T"},"r2":{"$ref":"#/$defs/T"},"r3":{"items":{"$ref":"#/$defs/T"}}}}`},
		{name: "a target reached at depth 0 and deeper is walked once for each", d: 0, n: 0, fd: 1, fn: 4,
			schema: `{"$defs":{"T":{"properties":{"a":{"description":"a"},"b":{"properties":{"c":{}}}}}},
				"anyOf":[{"$ref":"#/$defs/T"}],"properties":{"r":{"$ref":"#/$defs/T"}}}`},
		{name: "recursive tree terminates", d: 0, n: 0, fd: 1, fn: 2, wantNoProblems: true,
			schema: `{"$defs":{"Node":{"type":"object","properties":{"name":{"type":"string","description":"n"},
				"children":{"type":"array","items":{"$ref":"#/$defs/Node"}}}}},
				"type":"object","properties":{"root":{"$ref":"#/$defs/Node"}}}`},
		{name: "ref cycles are safe", d: 0, n: 0, fd: 0, fn: 1,
			schema: `{"$defs":{"A":{"$ref":"#/$defs/B","properties":{"x":{}}},"B":{"$ref":"#/$defs/A"}},"properties":{"p":{"$ref":"#/$defs/A"}},"$ref":"#"}`},
		{name: "non-schema entries count as undescribed", d: 0, n: 2, fd: 0, fn: 2,
			schema: `{"properties":{"o":{"properties":{"s":"string","n":null}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, n, fd, fn := covOf(t, tc.schema)
			if d != tc.d || n != tc.n || fd != tc.fd || fn != tc.fn {
				t.Fatalf("basic %d/%d full %d/%d; want %d/%d full %d/%d", d, n, fd, fn, tc.d, tc.n, tc.fd, tc.fn)
			}
			if tc.wantNoProblems {
				if p := Check([]Tool{{Name: "t", InputSchema: json.RawMessage(tc.schema)}}, Settings{}).PerTool[0].Problems; len(p) > 0 {
					t.Fatalf("unexpected problems: %q", p)
				}
			}
		})
	}
}

// TestCoveragePooled: the coverage is pooled over tools (described ÷ nested over all), not an
// average of per-tool shares, and is 1.0 when nothing is nested.
func TestCoveragePooled(t *testing.T) {
	a := `{"properties":{"o":{"properties":{"x":{"description":"x"}}}}}`               // 1/1
	b := `{"properties":{"o":{"properties":{"x":{},"y":{},"z":{"description":"z"}}}}}` // 1/3
	r := Check([]Tool{{Name: "a", InputSchema: json.RawMessage(a)}, {Name: "b", InputSchema: json.RawMessage(b)}}, Settings{})
	if r.NestedProperties != 4 || r.DescribedNestedProperties != 2 || r.NestedDescriptionCoverage != 0.5 {
		t.Fatalf("pooled %d/%d = %v, want 2/4 = 0.5", r.DescribedNestedProperties, r.NestedProperties, r.NestedDescriptionCoverage)
	}
	flat := Check([]Tool{{Name: "f", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{}}}`)}}, Settings{})
	if flat.NestedDescriptionCoverage != 1 || flat.FullNestedDescriptionCoverage != 1 {
		t.Fatalf("no nested properties: coverage %v / %v, want 1", flat.NestedDescriptionCoverage, flat.FullNestedDescriptionCoverage)
	}
	if empty := Check(nil, Settings{}); empty.NestedDescriptionCoverage != 1 || !empty.OK() {
		t.Fatalf("no tools: %+v", empty)
	}
}

// TestCoverageIgnoresInjection: coverage is on the schema as served; the injected context
// property is top-level and would not count anyway, but a schema with no properties map
// gains one by injection and must still count zero.
func TestCoverageIgnoresInjection(t *testing.T) {
	for _, inject := range []bool{true, false} {
		r := Check([]Tool{{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}}, Settings{InjectContext: &inject})
		if r.NestedProperties != 0 || r.FullNestedProperties != 0 {
			t.Fatalf("inject=%v: nested %d", inject, r.NestedProperties)
		}
	}
}
