package misuse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// Markers the PostHog MCP analytics SDK (@posthog/mcp 0.16.3) writes in place of what it cut
// or hid, in both the tool arguments ($mcp_parameters) and the tools/list result
// ($mcp_response) it captures:
//   - src/extensions/truncation.ts normalize(): an object or array below depth 10 (less when
//     the event is over its 100 KB budget) becomes "[Object]" / "[Array]"; an object with more
//     than 100 keys keeps the first 100 and gets the key "..." with value "[MaxProperties ~]";
//     an array with more than 100 items keeps 100 and ends with the item "[MaxProperties ~]";
//     strings over 32,768 UTF-16 units are cut and end in "...".
//   - src/extensions/mcp-payloads.ts sanitizeCapturedValue(): the value of any key matching
//     sensitiveKeyRE is replaced by "[redacted]", whatever it was (an object too).
const (
	markerObject   = "[Object]"
	markerArray    = "[Array]"
	markerBreadth  = "[MaxProperties ~]"
	markerCircular = "[Circular ~]"
	markerRedacted = "[redacted]"
	breadthKey     = "..."
	// maxStringUnits is the SDK's MAX_STRING_LENGTH: a longer string is cut to this many UTF-16
	// units plus "...".
	maxStringUnits = 32768
)

// sensitiveKeyRE is the SDK's SENSITIVE_KEY_PATTERN (src/extensions/mcp-payloads.ts): the
// keys whose values it redacts.
var sensitiveKeyRE = regexp.MustCompile(`(?i)^(authorization|cookie|set-cookie|x-api-key|api[-_]?key|api[-_]?token|access[-_]?token|refresh[-_]?token|token|password|secret|client[-_]?secret|private[-_]?key)$`)

// isCutMarker reports whether a string value is one of the SDK's truncation markers.
func isCutMarker(s string) bool {
	return s == markerObject || s == markerArray || s == markerBreadth || s == markerCircular
}

// Schema is a tool's input schema as served, compiled for FromArguments. Build one with
// CompileSchema; a Schema is immutable and safe for concurrent use.
type Schema struct {
	root *rule
	// failed is ReasonSchemaUnsupported (or ReasonSchemaTruncated when the SDK's cuts broke
	// the schema) when the schema could not be compiled.
	failed    Reason
	truncated bool
	// textBytes is the length of the text it was compiled from, for Listings.Bytes (set by
	// Listings.compiled).
	textBytes int
	// sum is the SHA-256 of that text when hashed (set by Listings.compiled), DeriveCache's key.
	sum    [sha256.Size]byte
	hashed bool
}

// Truncated reports whether the schema as captured carries the SDK's truncation or redaction
// markers (see SchemaTruncated).
func (s *Schema) Truncated() bool { return s != nil && s.truncated }

// CompileSchema compiles a tool's inputSchema JSON text, exactly as the tools/list result (or
// the SDK's capture of it in $mcp_response.tools[].inputSchema) held it, without limits or time
// budget: CompileSchemaContext with a background context and no bounds. It is for trusted
// schemas and tests; served schemas go through CompileSchemaContext.
//
// The returned Schema is never nil. When the schema cannot be compiled the error says why and
// the Schema derives SourceNotMeasurable with ReasonSchemaUnsupported (or
// ReasonSchemaTruncated when the SDK's own cuts broke it), so a caller may cache it either way.
//
// What is read: only what declares keys and reaches values: `properties`,
// `patternProperties`, `additionalProperties`, `unevaluatedProperties`, `items`,
// `prefixItems`, `additionalItems`, `$ref`/`$dynamicRef`/`$recursiveRef` with `$defs`,
// `definitions`, `$id` and `$anchor`, `allOf`/`anyOf`/`oneOf`, `if`/`then`/`else`,
// `dependentSchemas`/`dependencies`, `type` and `$schema` (the draft: 2020-12 when absent, as
// the MCP specification says for inputSchema). Validation keywords (`required`, `enum`,
// `pattern`, `format`, bounds, ...) and annotations are dropped before compiling, so a schema
// that is wrong only in those still derives. References are resolved inside the document by
// the resolver (resolve.go), in time linear in the schema's size; a $ref outside the document
// is refused, never fetched (the schema is untrusted).
//
// SDK markers (see markerObject) in schema positions become opaque subschemas: arguments
// that reach one with an object or array are not measurable (ReasonSchemaTruncated).
func CompileSchema(inputSchema []byte) (*Schema, error) {
	return compileSchema(context.Background(), inputSchema, time.Time{})
}

// CompileSchemaContext is CompileSchema for a served, untrusted schema: the text is first
// checked against lim (CheckSchema; zero fields take their defaults), then compiled within
// lim.MaxCompileTime.
//
//   - Over a limit, or over the time budget: the Schema derives SourceNotMeasurable with
//     ReasonSchemaOverLimit and the error is an *OverLimit naming the limit (LimitTime for the
//     budget, its Max and Seen in milliseconds). This is the schema's verdict: keep it.
//   - ctx done (shutdown): the Schema is nil and the error wraps ctx.Err(); this is no verdict
//     on the schema, and the caller must not keep it.
//   - Otherwise as CompileSchema.
func CompileSchemaContext(ctx context.Context, inputSchema []byte, lim SchemaLimits) (*Schema, error) {
	lim = lim.withDefaults()
	if o := CheckSchema(inputSchema, lim); o != nil {
		return &Schema{failed: ReasonSchemaOverLimit}, o
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("misuse: input schema not compiled: %w", err)
	}
	start := time.Now()
	s, err := compileSchema(ctx, inputSchema, start.Add(lim.MaxCompileTime))
	switch {
	case errors.Is(err, errBudget):
		spent := time.Since(start)
		return &Schema{failed: ReasonSchemaOverLimit}, &OverLimit{Limit: LimitTime, Max: int(lim.MaxCompileTime.Milliseconds()), Seen: int(spent.Milliseconds())}
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return nil, fmt.Errorf("misuse: input schema not compiled: %w", err)
	}
	return s, err
}

// compileSchema compiles inputSchema, giving up with errBudget past deadline (zero: none) and
// with ctx's error when ctx is done.
func compileSchema(ctx context.Context, inputSchema []byte, deadline time.Time) (*Schema, error) {
	if compileObserved != nil {
		compileObserved(inputSchema)
	}
	doc, err := decodeJSON(inputSchema)
	if err != nil {
		return &Schema{failed: ReasonSchemaUnsupported}, fmt.Errorf("misuse: input schema is not JSON: %w", err)
	}
	if defaultsToDraft2020(doc) {
		tuplesAsPrefixItems(doc)
	}
	p := &preparer{opaque: map[string]Reason{}, redacted: map[string]bool{}, cut: map[string]bool{}}
	cleaned := p.schema(doc, "")
	truncated := p.truncated || containsMarkers(doc)
	root, err := newResolver(ctx, deadline, cleaned, p, schemaURL).resolve()
	if err != nil {
		if errors.Is(err, errBudget) || ctx.Err() != nil {
			return nil, err
		}
		r := ReasonSchemaUnsupported
		if truncated {
			r = ReasonSchemaTruncated
		}
		return &Schema{failed: r, truncated: truncated}, fmt.Errorf("misuse: input schema: %w", err)
	}
	return &Schema{root: root, truncated: truncated}, nil
}

// compileObserved, when set (by the package's tests only), sees every schema text compiled:
// the tests compare what the resolver derives of each with the library-based oracle.
var compileObserved func(inputSchema []byte)

// schemaURL is the base URL of an input schema document: references resolve against it (or an
// $id within), and none leaves it.
const schemaURL = "urn:mcpulse:input-schema"

// decodeJSON decodes one JSON value, numbers kept as json.Number; text after it is an error.
func decodeJSON(text []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("invalid character after top-level value")
	}
	return v, nil
}

// SchemaTruncated reports whether an inputSchema as captured by the SDK carries its
// truncation or redaction markers anywhere (a marker string as a value, the "..." key of a
// cut object, a string cut at 32,768 units): the snapshot is then not the schema exactly as
// served, and its size is a lower bound. Invalid JSON is not truncated.
func SchemaTruncated(inputSchema []byte) bool {
	if !mayHoldMarkers(inputSchema) {
		return false
	}
	doc, err := decodeJSON(inputSchema)
	if err != nil {
		return false
	}
	return containsMarkers(doc)
}

// markerTexts are the SDK's marker strings as they appear in JSON text unescaped; none holds a
// character JSON must escape.
var markerTexts = [][]byte{[]byte(markerObject), []byte(markerArray), []byte(markerBreadth), []byte(markerCircular), []byte(markerRedacted)}

// mayHoldMarkers is false only when the JSON text raw cannot decode to a value holding an SDK
// marker: no marker's text, no \u escape (which could spell one) and too short for a string
// cut at maxStringUnits (each UTF-16 unit takes at least one byte). SchemaTruncated then
// needs no decode: served schemas are decoded on every tools/list event, and almost none is cut.
func mayHoldMarkers(raw []byte) bool {
	if len(raw) > maxStringUnits || bytes.Contains(raw, []byte(`\u`)) {
		return true
	}
	for _, m := range markerTexts {
		if bytes.Contains(raw, m) {
			return true
		}
	}
	return false
}

// containsMarkers reports whether any value in doc is an SDK marker.
func containsMarkers(v any) bool {
	switch v := v.(type) {
	case string:
		return isCutMarker(v) || v == markerRedacted || isCutString(v)
	case []any:
		for _, e := range v {
			if containsMarkers(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if k == breadthKey && e == markerBreadth {
				return true
			}
			if containsMarkers(e) {
				return true
			}
		}
	}
	return false
}

// isCutString reports whether s is a string the SDK cut at maxStringUnits.
func isCutString(s string) bool {
	return len(s) >= maxStringUnits+3 && strings.HasSuffix(s, "...") && utf16Units(s) == maxStringUnits+3
}

func utf16Units(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// Keywords kept for compiling, by the shape of their value.
var (
	keepString = map[string]bool{"$schema": true, "$id": true, "id": true, "$anchor": true, "$dynamicAnchor": true,
		"$ref": true, "$dynamicRef": true, "$recursiveRef": true}
	schemaMaps   = map[string]bool{"properties": true, "patternProperties": true, "$defs": true, "definitions": true, "dependentSchemas": true}
	schemaSingle = map[string]bool{"additionalProperties": true, "unevaluatedProperties": true, "additionalItems": true,
		"unevaluatedItems": true, "contains": true, "propertyNames": true, "not": true, "if": true, "then": true, "else": true}
	schemaArrays = map[string]bool{"allOf": true, "anyOf": true, "oneOf": true, "prefixItems": true}
	knownTypes   = map[string]bool{"null": true, "boolean": true, "number": true, "integer": true, "string": true, "array": true, "object": true}
)

// knownDrafts are the $schema values the resolver knows (scheme and trailing
// '#' aside); any other $schema is dropped (the default draft applies) rather than fetched.
var knownDrafts = []string{"json-schema.org/draft-04/schema", "json-schema.org/draft-06/schema",
	"json-schema.org/draft-07/schema", "json-schema.org/draft/2019-09/schema", "json-schema.org/draft/2020-12/schema"}

// defaultsToDraft2020 reports whether a schema document is read as draft 2020-12: its root
// declares that draft, or no draft it knows (isKnownDraft), as MCP's inputSchema defaults.
func defaultsToDraft2020(doc any) bool {
	root, ok := doc.(map[string]any)
	if !ok {
		return true
	}
	s, _ := root["$schema"].(string)
	return !isKnownDraft(s) || strings.Contains(s, "2020-12")
}

// tuplesAsPrefixItems rewrites, in place, every object of doc whose `items` is an array (a
// tuple, up to draft 2019-09) into draft 2020-12's form: the array becomes `prefixItems` and
// `additionalItems`, if any, becomes `items`. Servers publish schemas from generators that
// still write draft-07 tuples (zod-to-json-schema's for z.tuple) without a `$schema`, and
// their own validators read them as tuples; draft 2020-12 refuses an array `items`, which
// left every such tool unmeasurable. Keywords CompileSchema drops (enum, const, default,
// examples) may be rewritten too: they are dropped either way.
func tuplesAsPrefixItems(v any) {
	switch v := v.(type) {
	case map[string]any:
		if tuple, ok := v["items"].([]any); ok {
			if _, taken := v["prefixItems"]; !taken {
				delete(v, "items")
				v["prefixItems"] = tuple
				if rest, ok := v["additionalItems"]; ok {
					v["items"] = rest
					delete(v, "additionalItems")
				}
			}
		}
		for _, e := range v {
			tuplesAsPrefixItems(e)
		}
	case []any:
		for _, e := range v {
			tuplesAsPrefixItems(e)
		}
	}
}

// preparer copies a schema document keeping only what CompileSchema reads, replacing SDK
// markers and malformed subschemas with `true` and remembering where (JSON pointers).
type preparer struct {
	opaque    map[string]Reason // pointer of a subschema whose content is unknown -> why
	redacted  map[string]bool   // pointer of a subschema the SDK redacted (a secret-named property)
	cut       map[string]bool   // pointer of a schema whose key or branch list the SDK cut
	truncated bool
}

// schema prepares the subschema v at pointer ptr.
func (p *preparer) schema(v any, ptr string) any {
	switch v := v.(type) {
	case bool:
		return v
	case map[string]any:
		return p.object(v, ptr)
	case string:
		if isCutMarker(v) || v == markerRedacted {
			p.truncated = true
			p.opaque[ptr] = ReasonSchemaTruncated
			if v == markerRedacted {
				p.redacted[ptr] = true
			}
			return true
		}
	}
	p.opaque[ptr] = ReasonSchemaUnsupported
	return true
}

func (p *preparer) object(m map[string]any, ptr string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		at := ptr + "/" + escapePointer(k)
		switch {
		case k == "$schema":
			if s, ok := v.(string); ok && isKnownDraft(s) {
				out[k] = s
			}
		case keepString[k]:
			if s, ok := v.(string); ok {
				out[k] = s
			}
		case k == "$recursiveAnchor":
			if b, ok := v.(bool); ok {
				out[k] = b
			}
		case k == "type":
			if t := cleanType(v); t != nil {
				out[k] = t
			}
		case schemaMaps[k]:
			entries, ok := v.(map[string]any)
			if !ok {
				if s, isStr := v.(string); isStr && (isCutMarker(s) || s == markerRedacted) {
					p.truncated = true
				}
				// The whole list is unknown: keep the keyword (the schema still enumerates
				// keys) with nothing in it, and remember the schema's list as cut.
				p.cut[ptr] = true
				if k == "properties" || k == "patternProperties" {
					out[k] = map[string]any{}
				}
				continue
			}
			cleaned := make(map[string]any, len(entries))
			for name, sub := range entries {
				if name == breadthKey && sub == markerBreadth {
					p.truncated = true
					p.cut[ptr] = true
					continue
				}
				cleaned[name] = p.schema(sub, at+"/"+escapePointer(name))
			}
			out[k] = cleaned
		case k == "dependencies":
			entries, ok := v.(map[string]any)
			if !ok {
				continue
			}
			cleaned := map[string]any{}
			for name, sub := range entries {
				switch sub := sub.(type) {
				case bool, map[string]any:
					cleaned[name] = p.schema(sub, at+"/"+escapePointer(name))
				case []any:
					var names []any
					for _, n := range sub {
						if s, ok := n.(string); ok {
							names = append(names, s)
						}
					}
					cleaned[name] = names
				}
			}
			out[k] = cleaned
		case schemaSingle[k]:
			out[k] = p.schema(v, at)
		case k == "items":
			if arr, ok := v.([]any); ok {
				out[k] = p.schemaArray(arr, at, ptr)
			} else {
				out[k] = p.schema(v, at)
			}
		case schemaArrays[k]:
			arr, ok := v.([]any)
			if !ok {
				// Cut as a whole ("[Array]"): one unknown branch keeps a union a union.
				if s, isStr := v.(string); isStr && isCutMarker(s) {
					p.truncated = true
				}
				p.cut[ptr] = true
				p.opaque[at+"/0"] = ReasonSchemaTruncated
				out[k] = []any{true}
				continue
			}
			out[k] = p.schemaArray(arr, at, ptr)
		}
	}
	return out
}

// schemaArray prepares an array of subschemas; a trailing breadth marker marks the owner cut.
func (p *preparer) schemaArray(arr []any, at, owner string) []any {
	out := make([]any, 0, len(arr))
	for i, sub := range arr {
		if sub == markerBreadth && i == len(arr)-1 {
			p.truncated = true
			p.cut[owner] = true
			continue
		}
		out = append(out, p.schema(sub, at+"/"+strconv.Itoa(i)))
	}
	if len(out) == 0 {
		// allOf/anyOf/oneOf must not be empty; an empty tuple is fine but keep one shape.
		p.opaque[at+"/0"] = ReasonSchemaTruncated
		out = append(out, true)
	}
	return out
}

// cleanType keeps a `type` of known type names (a string or an array of them), else nil.
func cleanType(v any) any {
	switch v := v.(type) {
	case string:
		if knownTypes[v] {
			return v
		}
	case []any:
		var out []any
		seen := map[string]bool{}
		for _, t := range v {
			if s, ok := t.(string); ok && knownTypes[s] && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		if len(out) > 0 {
			return out
		}
	}
	return nil
}

func isKnownDraft(s string) bool {
	s = strings.TrimSuffix(strings.TrimPrefix(strings.TrimPrefix(s, "https://"), "http://"), "#")
	for _, d := range knownDrafts {
		if s == d {
			return true
		}
	}
	return false
}

// escapePointer escapes a JSON Pointer reference token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// Type bits of a rule.
const (
	admitsObject = 1 << iota
	admitsArray
)

// rule is one compiled subschema, reduced to what the key walk needs.
type rule struct {
	opaque Reason // content unknown: the SDK cut or hid it, or it was malformed
	// redacted: the SDK replaced this subschema with "[redacted]" because the property is
	// named like a secret (see sensitiveKeyRE).
	redacted bool
	cut      bool // the SDK cut this schema's properties or branch list
	never    bool // the false schema
	types    int  // admitsObject | admitsArray, from `type` (both when absent)

	// Objects: objKeys says the schema enumerates keys (properties or patternProperties
	// present, even empty, or additionalProperties / unevaluatedProperties present).
	objKeys  bool
	props    map[string]*rule
	patterns []patternRule
	badRegex bool  // a pattern Go cannot run: undeclared keys are unknown
	extra    *rule // additionalProperties (or unevaluatedProperties) schema admitting other keys

	// Arrays.
	arrKeys bool
	prefix  []*rule
	items   *rule // items beyond prefix; nil when unconstrained or forbidden

	// Composition: conj apply together ($ref, allOf, then/else, dependent schemas); union
	// are anyOf/oneOf branches.
	conj  []*rule
	union []*rule

	flat *flatView
}

type patternRule struct {
	re matcher
	r  *rule
}

// matcher is a compiled patternProperties regular expression.
type matcher interface {
	MatchString(string) bool
	String() string
}

// match reports whether the member name k matches (a search, as JSON Schema's patterns are).
func (p patternRule) match(k []byte) bool {
	if re, ok := p.re.(*regexp.Regexp); ok {
		return re.Match(k)
	}
	return p.re.MatchString(string(k))
}

// Bounds on what one schema may cost: a served schema is untrusted input. The subschemas of
// one schema are bounded by its size (SchemaLimits) and the time to resolve them by
// SchemaLimits.MaxCompileTime.
const (
	// maxMembers caps the schemas that apply at one position through $ref, allOf and unions
	// (real schemas have a handful); beyond it the position is ReasonSchemaUnsupported, so
	// nested combinators cannot make flattening quadratic in memory.
	maxMembers = 256
)

// flatView is what applies at one value position, through $ref, allOf and unions.
type flatView struct {
	members   []*rule // rules with object or array keywords that apply
	objOpen   bool    // some union branch admits any object key
	arrOpen   bool    // some union branch admits any array item
	opaque    Reason  // some applicable schema is unknown
	union     bool    // an anyOf/oneOf applies here
	admitsObj bool    // the types of the applicable schemas admit an object
	admitsArr bool
	cut       bool // some applicable schema's list was cut
}

// view flattens r (memoized; a cycle through $ref/allOf yields what was gathered so far).
func (r *rule) view() *flatView {
	if r.flat != nil {
		return r.flat
	}
	f := &flatView{admitsObj: r.types&admitsObject != 0 && !r.never, admitsArr: r.types&admitsArray != 0 && !r.never}
	r.flat = f
	if r.opaque != "" {
		f.opaque = r.opaque
		return f
	}
	f.cut = r.cut
	if r.objKeys || r.arrKeys {
		f.members = append(f.members, r)
	}
	for _, c := range r.conj {
		cv := c.view()
		f.merge(cv)
		f.admitsObj = f.admitsObj && cv.admitsObj
		f.admitsArr = f.admitsArr && cv.admitsArr
	}
	if len(r.union) > 0 {
		f.union = true
		anyObj, anyArr := false, false
		for _, b := range r.union {
			bv := b.view()
			f.merge(bv)
			anyObj = anyObj || bv.admitsObj
			anyArr = anyArr || bv.admitsArr
			if bv.opaque == "" && bv.admitsObj && !bv.enumeratesKeys() {
				f.objOpen = true
			}
			if bv.opaque == "" && bv.admitsArr && !bv.constrainsItems() {
				f.arrOpen = true
			}
		}
		f.admitsObj = f.admitsObj && anyObj
		f.admitsArr = f.admitsArr && anyArr
	}
	if len(f.members) > maxMembers {
		f.members, f.opaque = nil, ReasonSchemaUnsupported
	}
	return f
}

func (f *flatView) merge(o *flatView) {
	for _, m := range o.members {
		if !containsRule(f.members, m) {
			f.members = append(f.members, m)
		}
	}
	f.objOpen = f.objOpen || o.objOpen
	f.arrOpen = f.arrOpen || o.arrOpen
	f.union = f.union || o.union
	f.cut = f.cut || o.cut
	if f.opaque == "" {
		f.opaque = o.opaque
	}
}

func (f *flatView) enumeratesKeys() bool {
	if f.objOpen {
		return false
	}
	for _, m := range f.members {
		if m.objKeys {
			return true
		}
	}
	return false
}

func (f *flatView) constrainsItems() bool {
	if f.arrOpen {
		return false
	}
	for _, m := range f.members {
		if m.arrKeys {
			return true
		}
	}
	return false
}

func containsRule(rs []*rule, r *rule) bool {
	for _, x := range rs {
		if x == r {
			return true
		}
	}
	return false
}
