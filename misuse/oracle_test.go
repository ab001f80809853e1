package misuse

// The oracle: how input schemas were compiled before the resolver, with
// github.com/santhosh-tekuri/jsonschema/v6 resolving references and a converter turning its
// compiled graph into rules. The library's compile takes time quadratic in the number of
// subschemas (see DESIGN.md §8), so it stays here, in the tests, as the reference the resolver
// must match on every schema the tests compile, every schema of the corpus and fuzzed ones.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// oracleCompile is CompileSchema as it was, with the library.
func oracleCompile(inputSchema []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(inputSchema))
	if err != nil {
		return &Schema{failed: ReasonSchemaUnsupported}, fmt.Errorf("misuse: input schema is not JSON: %w", err)
	}
	if defaultsToDraft2020(doc) {
		tuplesAsPrefixItems(doc)
	}
	p := &preparer{opaque: map[string]Reason{}, redacted: map[string]bool{}, cut: map[string]bool{}}
	cleaned := p.schema(doc, "")
	truncated := p.truncated || containsMarkers(doc)
	failed := func(err error) (*Schema, error) {
		r := ReasonSchemaUnsupported
		if truncated {
			r = ReasonSchemaTruncated
		}
		return &Schema{failed: r, truncated: truncated}, fmt.Errorf("misuse: input schema: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{})
	c.UseRegexpEngine(lenientRegexp)
	const loc = "urn:mcpulse:input-schema"
	if err := c.AddResource(loc, cleaned); err != nil {
		return failed(err)
	}
	compiled, err := c.Compile(loc)
	if err != nil {
		return failed(err)
	}
	conv := &converter{rules: map[*jsonschema.Schema]*rule{}, prep: p, loc: loc + "#"}
	root := conv.rule(compiled)
	if len(conv.rules) > maxRules {
		return failed(fmt.Errorf("%d subschemas, more than the %d this check reads", len(conv.rules), maxRules))
	}
	return &Schema{root: root, truncated: truncated}, nil
}

// maxRules capped the subschemas the oracle converts; the resolver needs no such cap (its
// cost is linear, bounded by the schema's size and its time budget), so the comparisons stay
// below it.
const maxRules = 50000

// refuseLoader refuses every URL: no remote reference is followed.
type refuseLoader struct{}

func (refuseLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("%q is outside the input schema: remote references are not followed", url)
}

// badPattern is a pattern Go's regexp cannot run: it matches nothing.
type badPattern struct{ src string }

func (b badPattern) String() string          { return b.src }
func (b badPattern) MatchString(string) bool { return false }

func lenientRegexp(s string) (jsonschema.Regexp, error) {
	re, err := regexp.Compile(s)
	if err != nil {
		return badPattern{s}, nil
	}
	return re, nil
}

// converter turns a compiled schema graph into rules, once per schema node.
type converter struct {
	rules map[*jsonschema.Schema]*rule
	prep  *preparer
	loc   string // Location prefix of the document's own pointers
}

func (c *converter) rule(s *jsonschema.Schema) *rule {
	if s == nil {
		return nil
	}
	if r, ok := c.rules[s]; ok {
		return r
	}
	r := &rule{types: admitsObject | admitsArray}
	c.rules[s] = r
	ptr, own := strings.CutPrefix(s.Location, c.loc)
	if own {
		// The library percent-encodes each pointer token in Location (a space is "%20"); the
		// preparer's marks are by the pointer itself. (The converter in production missed
		// them under such names, taking a malformed or cut subschema there as `true`; the
		// resolver does not, and the oracle is corrected to match.)
		if dec, err := url.PathUnescape(ptr); err == nil {
			ptr = dec
		}
		if why, ok := c.prep.opaque[ptr]; ok {
			r.opaque = why
			r.redacted = c.prep.redacted[ptr]
			return r
		}
		r.cut = c.prep.cut[ptr]
	}
	if s.Bool != nil {
		r.never = !*s.Bool
		return r
	}
	if s.Types != nil {
		r.types = 0
		for _, t := range s.Types.ToStrings() {
			switch t {
			case "object":
				r.types |= admitsObject
			case "array":
				r.types |= admitsArray
			}
		}
	}

	if s.Properties != nil {
		r.objKeys = true
		r.props = make(map[string]*rule, len(s.Properties))
		for k, sub := range s.Properties {
			r.props[k] = c.rule(sub)
		}
	}
	if s.PatternProperties != nil {
		r.objKeys = true
		for re, sub := range s.PatternProperties {
			if _, bad := re.(badPattern); bad {
				r.badRegex = true
				continue
			}
			r.patterns = append(r.patterns, patternRule{re: re, r: c.rule(sub)})
		}
	}
	for _, ap := range []any{s.AdditionalProperties, unevaluated(s.UnevaluatedProperties)} {
		switch ap := ap.(type) {
		case bool:
			r.objKeys = true
			if ap && r.extra == nil {
				r.extra = &rule{types: admitsObject | admitsArray}
			}
		case *jsonschema.Schema:
			r.objKeys = true
			if sub := c.rule(ap); !sub.never && r.extra == nil {
				r.extra = sub
			}
		}
	}

	// Arrays: draft 2020-12 prefixItems/items, earlier items (one schema or a tuple) with
	// additionalItems.
	switch {
	case s.PrefixItems != nil || s.Items2020 != nil:
		r.arrKeys = true
		for _, sub := range s.PrefixItems {
			r.prefix = append(r.prefix, c.rule(sub))
		}
		if s.Items2020 != nil {
			r.items = c.rule(s.Items2020)
		}
	case s.Items != nil:
		r.arrKeys = true
		switch it := s.Items.(type) {
		case *jsonschema.Schema:
			r.items = c.rule(it)
		case []*jsonschema.Schema:
			for _, sub := range it {
				r.prefix = append(r.prefix, c.rule(sub))
			}
			switch ai := s.AdditionalItems.(type) {
			case *jsonschema.Schema:
				r.items = c.rule(ai)
			case bool:
				if ai {
					r.items = &rule{types: admitsObject | admitsArray}
				}
			}
		}
	}
	if r.items != nil && r.items.never {
		r.items = nil
	}

	add := func(sub *jsonschema.Schema) {
		if sub != nil {
			r.conj = append(r.conj, c.rule(sub))
		}
	}
	add(s.Ref)
	add(s.RecursiveRef)
	if s.DynamicRef != nil {
		add(s.DynamicRef.Ref)
	}
	for _, sub := range s.AllOf {
		add(sub)
	}
	add(s.Then)
	add(s.Else)
	// In key order (the resolver's), so the two conjunctions compare in order.
	for _, k := range slices.Sorted(maps.Keys(s.DependentSchemas)) {
		add(s.DependentSchemas[k])
	}
	for _, k := range slices.Sorted(maps.Keys(s.Dependencies)) {
		if sub, ok := s.Dependencies[k].(*jsonschema.Schema); ok {
			add(sub)
		}
	}
	for _, sub := range append(append([]*jsonschema.Schema(nil), s.AnyOf...), s.OneOf...) {
		r.union = append(r.union, c.rule(sub))
	}
	return r
}

// unevaluated turns a nil *Schema into a nil interface (so the type switch skips it).
func unevaluated(s *jsonschema.Schema) any {
	if s == nil {
		return nil
	}
	return s
}

// dumpRules writes the rule graph from root in a canonical form: rules numbered in the order a
// depth-first walk meets them (map members in key order, patterns in source order), each
// written once, a rule met again by its number.
func dumpRules(root *rule) string {
	var b strings.Builder
	ids := map[*rule]int{}
	var walk func(r *rule) string
	walk = func(r *rule) string {
		if r == nil {
			return "-"
		}
		if id, ok := ids[r]; ok {
			return fmt.Sprintf("#%d", id)
		}
		id := len(ids)
		ids[r] = id
		var parts []string
		parts = append(parts, fmt.Sprintf("opaque=%q redacted=%v cut=%v never=%v types=%d objKeys=%v badRegex=%v arrKeys=%v",
			r.opaque, r.redacted, r.cut, r.never, r.types, r.objKeys, r.badRegex, r.arrKeys))
		if r.props != nil {
			var ps []string
			for _, k := range slices.Sorted(maps.Keys(r.props)) {
				ps = append(ps, fmt.Sprintf("%q:%s", k, walk(r.props[k])))
			}
			parts = append(parts, "props{"+strings.Join(ps, ",")+"}")
		}
		pats := slices.Clone(r.patterns)
		slices.SortFunc(pats, func(a, b patternRule) int { return strings.Compare(a.re.String(), b.re.String()) })
		for _, p := range pats {
			parts = append(parts, fmt.Sprintf("pattern %q:%s", p.re.String(), walk(p.r)))
		}
		parts = append(parts, "extra:"+walk(r.extra))
		for _, x := range r.prefix {
			parts = append(parts, "prefix:"+walk(x))
		}
		parts = append(parts, "items:"+walk(r.items))
		for _, x := range r.conj {
			parts = append(parts, "conj:"+walk(x))
		}
		for _, x := range r.union {
			parts = append(parts, "union:"+walk(x))
		}
		fmt.Fprintf(&b, "%d: %s\n", id, strings.Join(parts, " "))
		return fmt.Sprintf("#%d", id)
	}
	walk(root)
	return b.String()
}

// compareWithOracle reports how the resolver's compile of text differs from the oracle's: in
// failing or not (and the reason), truncation, or the rule graph.
func compareWithOracle(text []byte) string {
	want, werr := oracleCompile(text)
	got, gerr := compileSchema(context.Background(), text, time.Time{})
	if (werr == nil) != (gerr == nil) {
		return fmt.Sprintf("oracle error %v, resolver error %v", werr, gerr)
	}
	if got.failed != want.failed || got.truncated != want.truncated {
		return fmt.Sprintf("oracle failed=%q truncated=%v, resolver failed=%q truncated=%v", want.failed, want.truncated, got.failed, got.truncated)
	}
	if werr != nil {
		return ""
	}
	if w, g := dumpRules(want.root), dumpRules(got.root); w != g {
		return fmt.Sprintf("rules differ:\noracle:\n%s\nresolver:\n%s", w, g)
	}
	return ""
}

// observed collects every schema text the package's tests compile (compileObserved).
var observed struct {
	sync.Mutex
	texts map[string]bool
}

// TestMain runs the package's tests, recording each schema they compile, then checks that the
// resolver derives of each exactly what the library-based oracle derives: the existing tests
// are the oracle of 2020-12 behaviour, and their schemas are the cases that matter.
func TestMain(m *testing.M) {
	observed.texts = map[string]bool{}
	compileObserved = func(text []byte) {
		if len(text) > 64<<10 {
			return // the big ones are benchmarks' and limits' own, compared in TestResolverMatchesOracle
		}
		observed.Lock()
		observed.texts[string(text)] = true
		observed.Unlock()
	}
	code := m.Run()
	compileObserved = nil
	if code == 0 {
		bad := 0
		for _, text := range slices.Sorted(maps.Keys(observed.texts)) {
			if diff := compareWithOracle([]byte(text)); diff != "" {
				fmt.Fprintf(os.Stderr, "resolver and oracle differ on a schema the tests compile:\n%s\n%s\n", text, diff)
				bad++
			}
		}
		if bad > 0 {
			code = 1
		}
		if testing.Verbose() {
			fmt.Fprintf(os.Stderr, "resolver and oracle compared on the %d schemas the tests compiled: %d differ\n", len(observed.texts), bad)
		}
	}
	os.Exit(code)
}

// corpusDir is the shared corpus of real tool listings, outside the module: $MCPULSE_CORPUS,
// else the first shared/corpus found in the directories above (the test skips without one).
func corpusDir() string {
	if d := os.Getenv("MCPULSE_CORPUS"); d != "" {
		return d
	}
	dir, _ := filepath.Abs(".")
	for {
		if st, err := os.Stat(filepath.Join(dir, "shared", "corpus")); err == nil && st.IsDir() {
			return filepath.Join(dir, "shared", "corpus")
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "shared/corpus"
		}
		dir = up
	}
}

// corpusSchemas returns every JSON object of the corpus's JSON files found under a key naming a
// schema (inputSchema, outputSchema, parameters, schema, ...), as JSON text, by file.
func corpusSchemas(t testing.TB) map[string][]byte {
	out := map[string][]byte{}
	root := corpusDir()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var doc any
		if json.Unmarshal(raw, &doc) != nil {
			return nil
		}
		n := 0
		var walk func(v any, key string)
		walk = func(v any, key string) {
			switch v := v.(type) {
			case map[string]any:
				k := strings.ToLower(key)
				if strings.Contains(k, "schema") || k == "parameters" {
					text, _ := json.Marshal(v)
					out[fmt.Sprintf("%s#%d", path, n)] = text
					n++
				}
				for k, e := range v {
					walk(e, k)
				}
			case []any:
				for _, e := range v {
					walk(e, key)
				}
			}
		}
		walk(doc, "")
		return nil
	})
	if os.IsNotExist(err) {
		t.Skipf("no corpus at %s", root)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResolverMatchesOracle: on every schema of the corpus, and on hand-made schemas that
// exercise references, ids, anchors and drafts, the resolver derives exactly what the
// library-based oracle derives.
func TestResolverMatchesOracle(t *testing.T) {
	cases := map[string][]byte{}
	for name, text := range corpusSchemas(t) {
		cases[name] = text
	}
	if len(cases) < 100 {
		t.Fatalf("only %d schemas in the corpus", len(cases))
	}
	for i, text := range oracleSeeds {
		cases[fmt.Sprintf("seed %d", i)] = []byte(text)
	}
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		if diff := compareWithOracle(cases[name]); diff != "" {
			t.Errorf("%s: %s\nschema: %s", name, diff, cases[name])
		}
	}
	t.Logf("%d schemas compared", len(cases))
}

// oracleSeeds are schemas that exercise what the resolver must resolve as the library does.
var oracleSeeds = []string{
	`{"$ref":"#/$defs/a","$defs":{"a":{"properties":{"x":{"$ref":"#"}}}}}`,
	`{"$defs":{"n":{"$anchor":"node","properties":{"next":{"$ref":"#node"}}}},"properties":{"head":{"$ref":"#node"}}}`,
	`{"$id":"https://x.example/root","properties":{"a":{"$id":"sub","properties":{"b":{"$ref":"#/properties/c"},"c":{}}},"d":{"$ref":"sub#/properties/b"}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/a","properties":{"hidden":{}},"definitions":{"a":{"properties":{"x":{}}}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/a","if":{},"then":{"properties":{"t":{}}},"definitions":{"a":{"properties":{"x":{}}}}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","id":"http://x.example/a#","properties":{"a":{"id":"#frag","properties":{"z":{}}},"b":{"$ref":"#frag"}}}`,
	`{"$schema":"https://json-schema.org/draft/2019-09/schema","$recursiveAnchor":true,"properties":{"kids":{"items":{"$recursiveRef":"#"}}},"unevaluatedProperties":false}`,
	`{"$dynamicAnchor":"meta","properties":{"a":{"$dynamicRef":"#meta"}}}`,
	`{"items":[{"properties":{"a":{}}},{"type":"string"}],"additionalItems":{"properties":{"b":{}}}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"properties":{"a":{}}}],"additionalItems":false}`,
	`{"prefixItems":[{}],"items":[{}]}`,
	`{"if":true,"then":{"properties":{"a":{}}},"else":{"properties":{"b":{}}}}`,
	`{"if":false,"then":{"properties":{"a":{}}},"else":{"properties":{"b":{}}}}`,
	`{"dependentSchemas":{"b":{"properties":{"c":{}}},"a":{"properties":{"d":{}}}},"dependencies":{"x":["y"],"z":{"properties":{"w":{}}}}}`,
	`{"dependencies":{"x":["y","y"]}}`,
	`{"$schema":"http://json-schema.org/draft-04/schema#","dependencies":{"x":[]}}`,
	`{"$ref":"https://elsewhere.example/schema.json"}`,
	`{"$ref":"#/$defs/missing"}`,
	`{"$ref":"#nowhere"}`,
	`{"$anchor":"1bad"}`,
	`{"$id":"https://x.example/a#frag"}`,
	`{"properties":{"a":{"$id":"https://x.example/same"},"b":{"$id":"https://x.example/same"}}}`,
	`{"$defs":{"a":{"$anchor":"x"},"b":{"$anchor":"x"}}}`,
	`{"patternProperties":{"^(?!x)":{},"^y":{"type":"object"}},"additionalProperties":{"type":"string"}}`,
	`{"anyOf":[{"properties":{"a":{}}},{"type":"string"}],"oneOf":[{"$ref":"#"}],"allOf":[{"not":{"$ref":"#/$defs/x"}}]}`,
	`{"properties":{"a":"[Object]","b":"[redacted]","...":"[MaxProperties ~]"}}`,
	`{"$ref":"#/properties","properties":{"a":{"type":"object"},"properties":{"b":{}}}}`,
	`{"$ref":"#/properties/a/type","properties":{"a":{"type":"object"}}}`,
	`{"allOf":[{"$ref":"#/allOf/01"},{"properties":{"x":{}}}]}`,
	`{"$schema":"https://json-schema.org/draft/2019-09/schema","items":[{}],"additionalItems":true,"unevaluatedProperties":{"properties":{"q":{}}}}`,
	`{"contains":{"$ref":"#/nope"}}`,
	`{"$schema":"http://json-schema.org/draft-06/schema#","if":{"$ref":"#/nope"}}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","$id":"http://[::1/x"}`,
	`{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"a\\b"}`,
	`{"properties":{"a":{"$schema":"http://json-schema.org/draft-07/schema#","$id":"http://x.example/s7","items":[{"properties":{"p":{}}}],"$ref":"#/x"}}}`,
	`true`,
	`false`,
	`{}`,
	`[]`,
	`{"properties":{"a~b":{},"c/d":{"$ref":"#/properties/a~0b"}}}`,
}

// FuzzResolverMatchesOracle: on any schema, the resolver derives what the library-based oracle
// derives (but for references to the drafts' own meta-schemas, which the library holds and
// the resolver refuses as outside the document). Seeds: testdata/fuzz/FuzzResolverMatchesOracle.
func FuzzResolverMatchesOracle(f *testing.F) {
	for _, s := range oracleSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		if len(text) > 16<<10 || refersToMetaSchema(text) {
			return
		}
		if diff := compareWithOracle(text); diff != "" {
			t.Fatalf("%s\nschema: %s", diff, text)
		}
	})
}

// BenchmarkOracleCompileProperties compares, on one object of n properties, the library-based
// compile (the oracle: quadratic in n, (*Compiler).enqueue scans its queue for every subschema
// it enqueues) with the resolver (linear). The library at 100,000 takes minutes: run it with
// -benchtime 1x, or skip it with -bench 'Oracle.*/resolver'.
func BenchmarkOracleCompileProperties(b *testing.B) {
	wide := func(n int) []byte {
		var s strings.Builder
		s.WriteString(`{"type":"object","properties":{`)
		for i := range n {
			if i > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `"k%d":{"type":"string"}`, i)
		}
		s.WriteString(`}}`)
		return []byte(s.String())
	}
	for _, n := range []int{1000, 10_000, 20_000, 100_000} {
		text := wide(n)
		b.Run(fmt.Sprintf("library/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := oracleCompile(text); err != nil && n < maxRules {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("resolver/%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := compileSchema(context.Background(), text, time.Time{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// refersToMetaSchema reports whether a reference ($ref, $dynamicRef, $recursiveRef) or an id of
// the JSON text holds a json-schema.org URL: the library resolves those to the meta-schemas it
// holds, the resolver refuses them.
func refersToMetaSchema(text []byte) bool {
	var doc any
	if json.Unmarshal(text, &doc) != nil {
		return false
	}
	var walk func(v any) bool
	walk = func(v any) bool {
		switch v := v.(type) {
		case map[string]any:
			for k, e := range v {
				if s, ok := e.(string); ok && (strings.HasSuffix(k, "Ref") || k == "$ref" || k == "$id" || k == "id") && strings.Contains(s, "json-schema.org") {
					return true
				}
				if walk(e) {
					return true
				}
			}
		case []any:
			for _, e := range v {
				if walk(e) {
					return true
				}
			}
		}
		return false
	}
	return walk(doc)
}
