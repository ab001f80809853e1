package schemacheck

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

func problemsOfSchema(t *testing.T, schema string) []string {
	t.Helper()
	return Check([]Tool{{Name: "t", InputSchema: json.RawMessage(schema)}}, Settings{}).PerTool[0].Problems
}

func TestStructuralProblems(t *testing.T) {
	for _, tc := range []struct {
		name   string
		schema string
		want   []string // substrings, one problem each, in order; empty: no problems
	}{
		{"clean", `{"type":"object","properties":{"a":{"type":"string"},"b":true,"c":false},"required":["a"]}`, nil},

		// a non-schema value inside a properties map
		{"string property", `{"type":"object","properties":{"a":"string"}}`,
			[]string{`property "a" at #/properties/a is a string ("string"), not a schema`}},
		{"number, null and array properties, nested", `{"properties":{"o":{"properties":{"n":1,"z":null,"l":[]}}}}`,
			[]string{`"n" at #/properties/o/properties/n is a number`, `"z" at #/properties/o/properties/z is null`, `"l" at #/properties/o/properties/l is an array`}},
		{"properties not a map", `{"properties":["a","b"]}`, []string{"properties at #/properties is an array, not an object"}},
		{"pattern value", `{"patternProperties":{"^x":"y"}}`, []string{`pattern "^x" at #/patternProperties/^x is a string`}},

		// required
		{"required names nothing", `{"type":"object","properties":{"a":{}},"required":["a","b"]}`,
			[]string{`required at #/required names "b", which is not a declared property`}},
		{"required without properties", `{"type":"object","required":["x"]}`, []string{`names "x"`}},
		{"required nested", `{"properties":{"o":{"type":"object","properties":{"a":{}},"required":["zz"]}}}`,
			[]string{`required at #/properties/o/required names "zz"`}},
		{"required not an array", `{"properties":{"a":{}},"required":"a"}`, []string{"required at #/required is a string, not an array"}},
		{"required draft-03 boolean", `{"properties":{"a":{"type":"string","required":true}}}`, []string{"required at #/properties/a/required is a boolean"}},
		{"required with a number", `{"properties":{"a":{}},"required":["a",1]}`, []string{"has a number at index 1"}},
		{"required from anyOf branches naming the parent's properties",
			`{"type":"object","properties":{"a":{},"b":{}},"anyOf":[{"required":["a"]},{"required":["b"]}]}`, nil},
		{"required naming allOf branch properties", `{"allOf":[{"properties":{"a":{}}}],"required":["a"]}`, nil},
		{"required naming $ref target properties", `{"$defs":{"B":{"properties":{"a":{}}}},"allOf":[{"$ref":"#/$defs/B"}],"required":["a"]}`, nil},
		{"required matched by patternProperties", `{"patternProperties":{"^x-":{}},"required":["x-a"]}`, nil},
		{"required not matched by patternProperties", `{"patternProperties":{"^x-":{}},"required":["y"]}`, []string{`names "y"`}},
		{"required with an ECMAScript-only pattern is not guessed", `{"patternProperties":{"^(?!y)":{}},"required":["y"]}`, nil},

		// keyword-named parameters are names: no problems from a parameter called required,
		// properties, $ref, type, items or definitions, whatever its schema
		{"keyword-named parameters", `{"type":"object","required":["required","properties","$ref","type"],"properties":{
			"required":{"type":"array","items":{"type":"string"}},
			"properties":{"type":"object","properties":{"required":{"type":"boolean"},"type":{"type":"string"}},"required":["required","type"]},
			"$ref":{"type":"string"},"type":{"type":"string"},"items":{"type":"number"},"definitions":{"type":"object"}}}`, nil},
		{"$ref and required inside default, const, enum and examples are data",
			`{"properties":{"a":{"default":{"$ref":"#/nowhere","required":"x"},"const":{"properties":"x"},"enum":[{"$ref":1}],"examples":[{"required":[1]}]}}}`, nil},

		// $ref
		{"resolvable refs", `{"$defs":{"a/b":{},"c~d":{},"A":{"$anchor":"anc"}},"definitions":{"X":{}},"properties":{
			"p":{"$ref":"#/$defs/a~1b"},"q":{"$ref":"#/$defs/c~0d"},"r":{"$ref":"#/definitions/X"},"s":{"$ref":"#"},
			"t":{"$ref":"#anc"},"u":{"$ref":"#/properties/p"},"v":{"$ref":"#/$defs/c%7E0d"},"w":{"$ref":"#/allOf/0"}},"allOf":[{}]}`, nil},
		{"unresolvable pointer", `{"properties":{"p":{"$ref":"#/$defs/Missing"}}}`,
			[]string{`unresolvable $ref "#/$defs/Missing" at #/properties/p/$ref: it points to nothing`}},
		{"unresolvable array index", `{"allOf":[{}],"properties":{"p":{"$ref":"#/allOf/1"},"q":{"$ref":"#/allOf/01"}}}`,
			[]string{`"#/allOf/1"`, `"#/allOf/01"`}},
		{"remote ref", `{"properties":{"p":{"$ref":"https://example.com/s.json#/x"}}}`, []string{"is not a local reference"}},
		{"unknown anchor", `{"properties":{"p":{"$ref":"#nope"}}}`, []string{"names an anchor"}},
		{"bad percent-encoding", `{"properties":{"p":{"$ref":"#/%zz"}}}`, []string{"invalid percent-encoding"}},
		{"non-string ref", `{"properties":{"p":{"$ref":5}}}`, []string{"$ref at #/properties/p/$ref is a number"}},
		{"unresolvable ref inside $defs", `{"$defs":{"A":{"$ref":"#/$defs/B"}}}`, []string{`"#/$defs/B"`}},
		{"recursive tree is not cyclic", `{"$defs":{"N":{"type":"object","properties":{"kids":{"type":"array","items":{"$ref":"#/$defs/N"}},"next":{"$ref":"#/$defs/N"}}}},"properties":{"root":{"$ref":"#/$defs/N"}},"type":"object"}`, nil},
		{"root property referring to the root is not cyclic", `{"type":"object","properties":{"self":{"$ref":"#"}}}`, nil},
		{"two-ref cycle", `{"$defs":{"A":{"$ref":"#/$defs/B"},"B":{"$ref":"#/$defs/A"}},"properties":{"p":{"$ref":"#/$defs/A"}}}`,
			[]string{`cyclic $ref "#/$defs/B" at #/$defs/A/$ref`}},
		{"self ref", `{"$defs":{"A":{"$ref":"#/$defs/A"}}}`, []string{`cyclic $ref "#/$defs/A" at #/$defs/A/$ref`}},
		{"root ref to itself", `{"$ref":"#"}`, []string{`cyclic $ref "#" at #/$ref`}},
		{"cycle through allOf", `{"$defs":{"A":{"allOf":[{"type":"object"},{"$ref":"#/$defs/A"}]}},"properties":{"p":{"$ref":"#/$defs/A"}}}`,
			[]string{`cyclic $ref "#/$defs/A" at #/$defs/A/allOf/1/$ref`}},
		{"cycle through anyOf and a pointer into the branch", `{"anyOf":[{"$ref":"#/anyOf/1"},{"oneOf":[{"$ref":"#/anyOf/0"}]}],"type":"object"}`,
			[]string{`cyclic $ref`}},

		// root
		{"root array", `[]`, []string{"the input schema is an array, not a JSON object"}},
		{"root string", `"object"`, []string{"is a string, not a JSON object"}},
		{"root true", `true`, []string{"is a boolean, not a JSON object"}},
		{"root null", `null`, []string{"is null, not a JSON object"}},
		{"root type string", `{"type":"string"}`, []string{`root type is "string", not "object"`}},
		{"root type array", `{"type":["object","null"]}`, []string{`root type is ["object","null"]`}},
		{"root without type is an object schema", `{"properties":{}}`, nil},

		// other keywords that must hold schemas
		{"items not a schema", `{"properties":{"a":{"type":"array","items":"string"}}}`, []string{"items at #/properties/a/items is a string, not a schema"}},
		{"anyOf not an array", `{"properties":{"a":{"anyOf":{"type":"string"}}}}`, []string{"anyOf at #/properties/a/anyOf is an object, not an array"}},
		{"anyOf entry not a schema", `{"properties":{"a":{"anyOf":[{},3]}}}`, []string{"anyOf entry at #/properties/a/anyOf/1 is a number"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := problemsOfSchema(t, tc.schema)
			if len(got) != len(tc.want) {
				t.Fatalf("got %d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q\nwant it to contain %q", i, got[i], w)
				}
			}
		})
	}
}

// TestProblemsNeverCrash: input that is not a usable schema is a problem with size 0, not a
// panic or an error.
func TestProblemsNeverCrash(t *testing.T) {
	deep := strings.Repeat(`{"properties":{"a":`, 5000) + "{}" + strings.Repeat("}}", 5000)
	for _, tc := range []struct {
		name, schema, want string
	}{
		{"invalid JSON", `{"type":"object",}`, "not valid JSON"},
		{"truncated", `{"type":"obj`, "not valid JSON"},
		{"empty", ``, "no inputSchema"},
		{"too deep", deep, "deeper than 1000 levels"},
		{"trailing garbage", `{} {}`, "not valid JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Check([]Tool{{Name: "t", InputSchema: json.RawMessage(tc.schema)}}, Settings{})
			tr := r.PerTool[0]
			if tr.SchemaChars != 0 || tr.Oversized || len(tr.Problems) != 1 || !strings.Contains(tr.Problems[0], tc.want) {
				t.Fatalf("got %+v", tr)
			}
		})
	}
}

// TestDeepButAllowedNesting: nesting within the bound is checked completely.
func TestDeepButAllowedNesting(t *testing.T) {
	n := maxNesting/2 - 1 // each level is two JSON objects: the schema and its properties map
	s := strings.Repeat(`{"properties":{"a":`, n) + `{"description":"leaf"}` + strings.Repeat("}}", n)
	r := Check([]Tool{{Name: "t", InputSchema: json.RawMessage(s)}}, Settings{})
	tr := r.PerTool[0]
	if len(tr.Problems) != 0 || tr.Nested != n-1 || tr.Described != 1 {
		t.Fatalf("nested %d described %d problems %q", tr.Nested, tr.Described, tr.Problems)
	}
}

// TestLongRefChainsAreBounded: a chain of $ref each pointing one definition further does not
// recurse without bound in the full coverage walk or the cycle check.
func TestLongRefChainsAreBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"properties":{"p":{"$ref":"#/$defs/d0"}},"$defs":{`)
	const n = 6000
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"d` + strconv.Itoa(i) + `":{"properties":{"x":{}},"$ref":"#/$defs/d` + strconv.Itoa(i+1) + `"}`)
	}
	b.WriteString(`,"d` + strconv.Itoa(n) + `":{}}}`)
	r := Check([]Tool{{Name: "t", InputSchema: json.RawMessage(b.String())}}, Settings{})
	tr := r.PerTool[0]
	found := false
	for _, p := range tr.Problems {
		found = found || strings.Contains(p, "nests more than")
	}
	if !found || tr.FullNested == 0 {
		t.Fatalf("full nested %d, problems %q", tr.FullNested, tr.Problems)
	}
}

// TestProblemsAreCapped: a schema with thousands of problems lists a bounded number.
func TestProblemsAreCapped(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"properties":{`)
	for i := 0; i < 500; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"p` + strconv.Itoa(i) + `":1`)
	}
	b.WriteString(`}}`)
	p := problemsOfSchema(t, b.String())
	if len(p) != maxProblemsPerTool+1 || !strings.HasPrefix(p[len(p)-1], "450 more problems") {
		t.Fatalf("%d problems, last %q", len(p), p[len(p)-1])
	}
}
