package misuse_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// derive compiles schema and derives the ignored keys of args.
func derive(t *testing.T, schema, args string) misuse.IgnoredKeys {
	t.Helper()
	s, err := misuse.CompileSchema([]byte(schema))
	if err != nil {
		t.Fatalf("CompileSchema(%s): %v", schema, err)
	}
	checkValidWalk(t, s, []byte(`{"request":{"params":{"arguments":`+args+`}}}`))
	return misuse.FromArguments(s, []byte(args))
}

func TestFromArgumentsJSONSchemaSemantics(t *testing.T) {
	const seriesSchema = `{"type":"object","properties":{"series":{"type":"array","items":{"type":"object","properties":{"event":{"type":"string"},"math":{"type":"string"}}}}}}`
	tests := []struct {
		name, schema, args string
		want               []string
	}{
		{"clean call", `{"type":"object","properties":{"a":{"type":"number"}}}`, `{"a":1}`, nil},
		{"top-level key", `{"type":"object","properties":{"a":{}}}`, `{"a":1,"b":2}`, []string{"b"}},
		{"order follows the arguments", `{"properties":{"m":{}}}`, `{"z":1,"m":2,"a":3}`, []string{"z", "a"}},
		{"nested key", `{"properties":{"query":{"type":"object","properties":{"kind":{"type":"string"}}}}}`,
			`{"query":{"kind":"x","source":{"serie":1}}}`, []string{"query.source"}},
		{"array item by index", seriesSchema, `{"series":[{"event":"a","math":"x"},{"event":"b","maht":"y"}]}`, []string{"series.1.maht"}},
		{"undeclared subtree reported once", `{"properties":{"a":{}}}`, `{"b":{"c":{"d":1}},"a":1}`, []string{"b"}},
		{"empty properties declares nothing", `{"type":"object","properties":{}}`, `{"x":1}`, []string{"x"}},
		{"additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, `{"a":1,"b":2}`, []string{"b"}},
		{"additionalProperties true declares every key", `{"properties":{"a":{}},"additionalProperties":true}`, `{"a":1,"b":{"c":1}}`, nil},
		{"additionalProperties {} declares every key", `{"properties":{},"additionalProperties":{}}`, `{"free":{"form":1}}`, nil},
		{"additionalProperties schema: keys it admits are declared, values checked", `{"type":"object","additionalProperties":{"type":"object","properties":{"v":{}}}}`,
			`{"any":{"v":1,"w":2}}`, []string{"any.w"}},
		{"patternProperties", `{"properties":{"a":{}},"patternProperties":{"^x-":{"properties":{"k":{}}}}}`,
			`{"x-one":{"k":1,"j":2},"y":1}`, []string{"x-one.j", "y"}},
		{"patternProperties is a search, not anchored", `{"patternProperties":{"id":{}}}`, `{"user_id":1,"name":2}`, []string{"name"}},
		{"schema without key keywords admits anything", `{"properties":{"meta":{"type":"object"}}}`, `{"meta":{"x":{"y":1}}}`, nil},
		{"true subschema admits anything", `{"properties":{"meta":true}}`, `{"meta":{"x":1}}`, nil},
		{"$ref into $defs", `{"$defs":{"S":{"type":"object","properties":{"event":{}}}},"properties":{"series":{"type":"array","items":{"$ref":"#/$defs/S"}}}}`,
			`{"series":[{"event":1,"typo":2}]}`, []string{"series.0.typo"}},
		{"draft-07 tuple items without $schema read as prefixItems", `{"properties":{"pair":{"type":"array","items":[{"properties":{"a":{}}},{"properties":{"b":{}}}],"additionalItems":{"properties":{"c":{}}}}}}`,
			`{"pair":[{"a":1,"x":1},{"b":1,"y":1},{"c":1,"z":1}]}`, []string{"pair.0.x", "pair.1.y", "pair.2.z"}},
		{"draft-07 tuple items under draft-07", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"pair":{"items":[{"properties":{"a":{}}}]}}}`,
			`{"pair":[{"a":1,"x":1},{"free":1}]}`, []string{"pair.0.x"}},
		{"$ref into definitions (draft-07)", `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"S":{"properties":{"a":{}}}},"properties":{"s":{"$ref":"#/definitions/S"}}}`,
			`{"s":{"a":1,"b":2}}`, []string{"s.b"}},
		{"root $ref", `{"$ref":"#/$defs/Root","$defs":{"Root":{"type":"object","properties":{"a":{}}}}}`, `{"a":1,"b":2}`, []string{"b"}},
		{"recursive $ref", `{"$defs":{"N":{"properties":{"v":{},"next":{"$ref":"#/$defs/N"}}}},"$ref":"#/$defs/N"}`,
			`{"v":1,"next":{"v":2,"next":{"v":3,"nxt":{}}}}`, []string{"next.next.nxt"}},
		{"$anchor", `{"$defs":{"S":{"$anchor":"item","properties":{"a":{}}}},"properties":{"x":{"$ref":"#item"}}}`, `{"x":{"a":1,"b":1}}`, []string{"x.b"}},
		{"escaped pointer", `{"$defs":{"a/b~c":{"properties":{"k":{}}}},"properties":{"x":{"$ref":"#/$defs/a~1b~0c"}}}`, `{"x":{"k":1,"l":1}}`, []string{"x.l"}},
		{"allOf: declared by any part", `{"allOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}`, `{"a":1,"b":2,"c":3}`, []string{"c"}},
		{"allOf with an annotation-only part", `{"allOf":[{"$ref":"#/$defs/A"},{"description":"d"}],"$defs":{"A":{"properties":{"a":{}}}}}`, `{"a":1,"z":2}`, []string{"z"}},
		{"nested anyOf: reported only when no branch declares it", `{"properties":{"q":{"anyOf":[{"properties":{"kind":{},"series":{}}},{"properties":{"kind":{},"steps":{}}}]}}}`,
			`{"q":{"kind":1,"series":2,"steps":3,"nope":4}}`, []string{"q.nope"}},
		{"nested oneOf with a branch admitting any object", `{"properties":{"q":{"oneOf":[{"properties":{"a":{}}},{"type":"object"}]}}}`,
			`{"q":{"b":1}}`, nil},
		{"nested anyOf with a scalar branch", `{"properties":{"q":{"anyOf":[{"type":"string"},{"type":"object","properties":{"a":{}}}]}}}`,
			`{"q":{"a":1,"b":2}}`, []string{"q.b"}},
		{"nullable object (type list)", `{"properties":{"q":{"type":["object","null"],"properties":{"a":{}}}}}`, `{"q":{"a":1,"b":2}}`, []string{"q.b"}},
		{"prefixItems by index", `{"properties":{"t":{"prefixItems":[{"properties":{"a":{}}},{"properties":{"b":{}}}],"items":{"properties":{"c":{}}}}}}`,
			`{"t":[{"a":1,"x":1},{"b":1,"x":1},{"c":1,"x":1},{"x":1}]}`, []string{"t.0.x", "t.1.x", "t.2.x", "t.3.x"}},
		{"draft-07 tuple items with additionalItems", `{"$schema":"http://json-schema.org/draft-07/schema#","properties":{"t":{"items":[{"properties":{"a":{}}}],"additionalItems":{"properties":{"b":{}}}}}}`,
			`{"t":[{"a":1,"z":1},{"b":1,"z":1}]}`, []string{"t.0.z", "t.1.z"}},
		{"array without items admits anything", `{"properties":{"t":{"type":"array"}}}`, `{"t":[{"x":1}]}`, nil},
		{"arrays of arrays", `{"properties":{"m":{"items":{"items":{"properties":{"v":{}}}}}}}`, `{"m":[[{"v":1}],[{"v":1,"w":1}]]}`, []string{"m.1.0.w"}},
		{"if/then/else branches declare", `{"properties":{"k":{}},"if":{"properties":{"k":{"const":1}}},"then":{"properties":{"a":{}}},"else":{"properties":{"b":{}}}}`,
			`{"k":1,"a":1,"b":1,"c":1}`, []string{"c"}},
		{"dependentSchemas declare", `{"properties":{"a":{}},"dependentSchemas":{"a":{"properties":{"b":{}}}}}`, `{"a":1,"b":1,"c":1}`, []string{"c"}},
		{"unevaluatedProperties false", `{"allOf":[{"properties":{"a":{}}}],"unevaluatedProperties":false}`, `{"a":1,"b":1}`, []string{"b"}},
		{"unevaluatedProperties schema admits", `{"properties":{"a":{}},"unevaluatedProperties":{"type":"string"}}`, `{"a":1,"b":"x"}`, nil},
		{"validation keywords are not read", `{"properties":{"a":{"type":"string","minLength":"oops","enum":1}},"required":true}`, `{"a":1,"b":1}`, []string{"b"}},
		{"unknown $schema falls back to 2020-12", `{"$schema":"https://example.com/my-meta","properties":{"a":{}}}`, `{"a":1,"b":1}`, []string{"b"}},
		{"a key named like a keyword", `{"properties":{"properties":{},"required":{}}}`, `{"properties":1,"required":2,"type":3}`, []string{"type"}},
		{"constructor and __proto__ are ordinary keys", `{"properties":{"a":{}}}`, `{"constructor":1,"__proto__":{}}`, []string{"constructor", "__proto__"}},
		{"null arguments are an empty object", `{"properties":{"a":{}}}`, `null`, nil},
		{"absent arguments are an empty object", `{"properties":{"a":{}}}`, ``, nil},
		{"root {} admits anything", `{}`, `{"x":1}`, nil},
		{"no inputSchema properties: tool without arguments", `{"type":"object","properties":{},"required":[]}`, `{"x":1,"y":2}`, []string{"x", "y"}},
		{"dotted and empty keys kept as they are", `{"properties":{}}`, `{"a.b":1,"":2}`, []string{"a.b", ""}},
		{"control characters masked", `{"properties":{}}`, "{\"a\\nb\\u2028c\\u0000\":1}", []string{"a?b?c?"}},
		{"duplicate names are walked as sent", `{"properties":{"a":{}}}`, `{"b":1,"b":2}`, []string{"b", "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := derive(t, tc.schema, tc.args)
			if got.Source != misuse.SourceSchema || got.Reason != "" {
				t.Fatalf("not measurable: %+v", got)
			}
			if !reflect.DeepEqual(got.Keys, tc.want) || got.Total != len(tc.want) {
				t.Fatalf("keys = %q (total %d), want %q", got.Keys, got.Total, tc.want)
			}
		})
	}
}

func TestFromArgumentsCapAndTotal(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 45 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%02d":1`, i)
	}
	b.WriteString(`,"a":1}`)
	got := derive(t, `{"properties":{"a":{}}}`, b.String())
	if got.Total != 45 || len(got.Keys) != misuse.MaxKeys || got.Keys[0] != "k00" || got.Keys[19] != "k19" {
		t.Fatalf("got %d keys (%q...), total %d; want the first 20 of 45", len(got.Keys), got.Keys[:1], got.Total)
	}
}

func TestFromArgumentsNotMeasurable(t *testing.T) {
	const plain = `{"type":"object","properties":{"a":{},"meta":{"type":"object","properties":{"x":{}}},"secret":{"type":"string"},"token":{}}}`
	deep := strings.Repeat(`{"a":`, misuse.MaxDepth+1) + "1" + strings.Repeat("}", misuse.MaxDepth+1)
	tests := []struct {
		name, schema, args string
		want               misuse.Reason
	}{
		{"root anyOf", `{"anyOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}`, `{"c":1}`, misuse.ReasonRootUnion},
		{"root oneOf behind $ref", `{"$ref":"#/$defs/U","$defs":{"U":{"oneOf":[{"properties":{"a":{}}}]}}}`, `{"c":1}`, misuse.ReasonRootUnion},
		{"root allOf holding a union", `{"allOf":[{"anyOf":[{"properties":{"a":{}}}]}]}`, `{"c":1}`, misuse.ReasonRootUnion},
		{"depth marker in the arguments", plain, `{"meta":{"x":"[Object]"}}`, misuse.ReasonArgumentsTruncated},
		{"array depth marker", plain, `{"a":"[Array]"}`, misuse.ReasonArgumentsTruncated},
		{"object cut at 100 keys", plain, `{"a":1,"...":"[MaxProperties ~]"}`, misuse.ReasonArgumentsTruncated},
		{"array cut at 100 items", `{"properties":{"l":{"items":{"properties":{"v":{}}}}}}`, `{"l":[{"v":1},"[MaxProperties ~]"]}`, misuse.ReasonArgumentsTruncated},
		{"whole arguments cut", plain, `"[Object]"`, misuse.ReasonArgumentsTruncated},
		{"redacted where an object may be", plain, `{"token":"[redacted]"}`, misuse.ReasonArgumentsRedacted},
		{"too deep", `{"$defs":{"N":{"properties":{"a":{"$ref":"#/$defs/N"}}}},"$ref":"#/$defs/N"}`, deep, misuse.ReasonArgumentsTooDeep},
		{"arguments not an object", plain, `[1,2]`, misuse.ReasonArgumentsInvalid},
		{"arguments not JSON", plain, `{"a":`, misuse.ReasonArgumentsInvalid},
		{"whole schema cut", `"[Object]"`, `{"a":1}`, misuse.ReasonSchemaTruncated},
		{"schema cut where an object goes", `{"properties":{"q":"[Object]"}}`, `{"q":{"a":1}}`, misuse.ReasonSchemaTruncated},
		{"schema redacted where an object goes", `{"properties":{"password":"[redacted]"}}`, `{"password":{"a":1}}`, misuse.ReasonSchemaTruncated},
		{"schema properties cut at 100", `{"properties":{"a":{},"...":"[MaxProperties ~]"}}`, `{"a":1,"zz":1}`, misuse.ReasonSchemaTruncated},
		{"schema cut items", `{"properties":{"l":{"items":"[Object]"}}}`, `{"l":[{"a":1}]}`, misuse.ReasonSchemaTruncated},
		{"pattern Go cannot run", `{"properties":{"a":{}},"patternProperties":{"^(?!x)":{}}}`, `{"a":1,"b":1}`, misuse.ReasonSchemaUnsupported},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := derive(t, tc.schema, tc.args)
			if got.Source != misuse.SourceNotMeasurable || got.Reason != tc.want || got.Keys != nil {
				t.Fatalf("got %+v, want not measurable (%s)", got, tc.want)
			}
		})
	}
}

func TestFromArgumentsMeasurableDespiteMarkers(t *testing.T) {
	tests := []struct {
		name, schema, args string
		want               []string
	}{
		// The SDK cut a leaf schema: a scalar value there hides nothing.
		{"scalar under a cut schema", `{"properties":{"event":"[Object]","math":"[Object]"}}`, `{"event":"e","maht":"x"}`, []string{"maht"}},
		// A redacted string where the schema only admits a string hides nothing.
		{"redacted string", `{"properties":{"password":{"type":"string"}}}`, `{"password":"[redacted]","pasword":"[redacted]"}`, []string{"pasword"}},
		// A redacted value under an additionalProperties string map.
		{"redacted map value", `{"properties":{"tags":{"type":"object","additionalProperties":{"type":"string"}}}}`, `{"tags":{"token":"[redacted]"}}`, nil},
		// The marker below an undeclared key: the key is reported, its subtree is not read.
		{"marker below an undeclared key", `{"properties":{"a":{}}}`, `{"a":1,"deep":{"l1":"[Object]"}}`, []string{"deep"}},
		// A marker below a position that admits anything hides nothing reportable.
		{"marker below a free-form object", `{"properties":{"meta":{}}}`, `{"meta":{"x":"[Object]"}}`, nil},
		// A schema properties list cut at 100 still declares what it kept.
		{"key kept by a cut list", `{"properties":{"a":{},"...":"[MaxProperties ~]"}}`, `{"a":1}`, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := derive(t, tc.schema, tc.args)
			if got.Source != misuse.SourceSchema || !reflect.DeepEqual(got.Keys, tc.want) {
				t.Fatalf("got %+v, want keys %q", got, tc.want)
			}
		})
	}
}

func TestCompileSchemaRefusesRemoteRefs(t *testing.T) {
	for _, ref := range []string{"file:///etc/passwd", "http://127.0.0.1:1/schema.json", "other.json#/x", "#/$defs/missing"} {
		s, err := misuse.CompileSchema([]byte(`{"properties":{"a":{"$ref":"` + ref + `"}}}`))
		if err == nil {
			t.Errorf("$ref %q: compiled", ref)
			continue
		}
		if got := misuse.FromArguments(s, []byte(`{"a":{"b":1}}`)); got.Reason != misuse.ReasonSchemaUnsupported {
			t.Errorf("$ref %q: got %+v, want schema_unsupported", ref, got)
		}
	}
}

func TestCompileSchemaInvalid(t *testing.T) {
	s, err := misuse.CompileSchema([]byte(`{"properties":`))
	if err == nil || s == nil {
		t.Fatalf("invalid JSON: schema %v, err %v", s, err)
	}
	if got := misuse.FromArguments(s, []byte(`{}`)); got.Reason != misuse.ReasonSchemaUnsupported {
		t.Fatalf("got %+v", got)
	}
	// A malformed subschema is opaque, not fatal: a scalar there is fine.
	s, err = misuse.CompileSchema([]byte(`{"properties":{"a":"string","b":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got := misuse.FromArguments(s, []byte(`{"a":"x","c":1}`)); !reflect.DeepEqual(got.Keys, []string{"c"}) {
		t.Fatalf("got %+v", got)
	}
	if got := misuse.FromArguments(s, []byte(`{"a":{"x":1}}`)); got.Reason != misuse.ReasonSchemaUnsupported {
		t.Fatalf("object under a malformed subschema: got %+v", got)
	}
}

func TestNilSchemaIsNoSchema(t *testing.T) {
	if got := misuse.FromArguments(nil, []byte(`{"a":1}`)); got.Reason != misuse.ReasonNoSchema || got.Measurable() {
		t.Fatalf("got %+v", got)
	}
	if got := misuse.FromParameters(nil, []byte(`{}`)); got.Reason != misuse.ReasonNoSchema {
		t.Fatalf("got %+v", got)
	}
}

func TestFromParameters(t *testing.T) {
	s, err := misuse.CompileSchema([]byte(`{"properties":{"a":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, params string
		want         misuse.IgnoredKeys
	}{
		{"SDK shape", `{"request":{"id":5,"jsonrpc":"2.0","method":"tools/call","params":{"name":"t","arguments":{"a":1,"b":2}}}}`,
			misuse.IgnoredKeys{Keys: []string{"b"}, Total: 1, Source: misuse.SourceSchema}},
		{"no arguments sent", `{"request":{"method":"tools/call","params":{"name":"t"}}}`, misuse.IgnoredKeys{Source: misuse.SourceSchema}},
		{"absent", ``, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonNoArguments}},
		{"null", `null`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonNoArguments}},
		{"no request", `{}`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonNoArguments}},
		{"request cut", `{"request":"[Object]"}`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonArgumentsTruncated}},
		{"params cut", `{"request":{"params":"[Object]"}}`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonArgumentsTruncated}},
		{"arguments cut", `{"request":{"params":{"arguments":"[Object]"}}}`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonArgumentsTruncated}},
		{"not JSON", `{"request":`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonArgumentsInvalid}},
		{"params not an object", `{"request":{"params":[1]}}`, misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonArgumentsInvalid}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := misuse.FromParameters(s, []byte(tc.params)); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
			checkValidWalk(t, s, []byte(tc.params))
		})
	}
}

func TestSchemaTruncated(t *testing.T) {
	for in, want := range map[string]bool{
		`{"properties":{"a":{"type":"string"}}}`:                                       false,
		`{"properties":{"a":"[Object]"}}`:                                              true,
		`{"properties":{"token":"[redacted]"}}`:                                        true,
		`{"properties":{"a":{},"...":"[MaxProperties ~]"}}`:                            true,
		`{"properties":{"a":{"enum":["x","[MaxProperties ~]"]}}}`:                      true,
		`{"properties":{"a":{"description":"` + strings.Repeat("d", 32768) + `..."}}}`: true,
		`{"properties":{"a":"\u005bObject]"}}`:                                         true,
		`{"properties":{"a":{"description":"a [redacted] word"}}}`:                     false,
		`not json`: false,
	} {
		if got := misuse.SchemaTruncated([]byte(in)); got != want {
			t.Errorf("SchemaTruncated(%.60s) = %v, want %v", in, got, want)
		}
		s, _ := misuse.CompileSchema([]byte(in))
		if s.Truncated() != want {
			t.Errorf("CompileSchema(%.60s).Truncated() = %v, want %v", in, s.Truncated(), want)
		}
	}
}

// TestSchemaBounds: nested combinators cannot make one position's schemas grow without
// bound; beyond the cap the position is not measurable rather than slow.
func TestSchemaBounds(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"properties":{"q":{"allOf":[`)
	for i := range 300 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"properties":{"k%d":{}}}`, i)
	}
	b.WriteString(`]}}}`)
	got := derive(t, b.String(), `{"q":{"k1":1,"zz":2}}`)
	if got.Reason != misuse.ReasonSchemaUnsupported {
		t.Fatalf("300 allOf parts: %+v", got)
	}
	if got := derive(t, b.String(), `{"q":"scalar","r":1}`); !reflect.DeepEqual(got.Keys, []string{"r"}) {
		t.Fatalf("positions the cap does not reach still derive: %+v", got)
	}
}

// A capture of arguments made after validation (the marker as the arguments) is not
// measurable whatever the schema says; the marker as an argument's value is an agent's text.
func TestFromParametersArgumentsSeenAfterValidation(t *testing.T) {
	s, err := misuse.CompileSchema([]byte(`{"type":"object","properties":{"a":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	marker, _ := json.Marshal(misuse.MarkerArgumentsValidated)
	validated := []byte(`{"request":{"method":"tools/call","params":{"name":"t","arguments":` + string(marker) + `}}}`)
	for _, schema := range []*misuse.Schema{s, nil} {
		if got := misuse.FromParameters(schema, validated); got.Source != misuse.SourceNotMeasurable || got.Reason != misuse.ReasonArgumentsValidated {
			t.Errorf("schema %v: %+v, want not measurable, %s", schema != nil, got, misuse.ReasonArgumentsValidated)
		}
	}
	asValue := []byte(`{"request":{"params":{"name":"t","arguments":{"a":` + string(marker) + `,"b":1}}}}`)
	if got := misuse.FromParameters(s, asValue); got.Source != misuse.SourceSchema || len(got.Keys) != 1 || got.Keys[0] != "b" {
		t.Errorf("marker as a value: %+v, want b ignored", got)
	}
}
