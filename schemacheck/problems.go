package schemacheck

// Structural problems, the schema ratchet's definitions: "Structural problems per tool (reported, never a
// crash): a non-schema value inside a `properties` map, a `required` entry naming no declared
// property, an unresolvable or cyclic `$ref`, a root that is not an object schema."
//
// The walk is keyword-aware: it descends only into the values JSON Schema defines as
// subschemas (properties, patternProperties, $defs, definitions, dependentSchemas,
// additionalProperties, items, prefixItems, additionalItems, contains, not, if/then/else,
// allOf/anyOf/oneOf, propertyNames, unevaluatedProperties, unevaluatedItems, contentSchema),
// so a "$ref" or "required" key inside a `default`, `const`, `enum` or `examples` value is
// data, and the keys of a `properties` map are parameter names, never keywords.

import (
	"fmt"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// maxProblemsPerTool caps the problems listed for one tool; the rest are summarized.
const maxProblemsPerTool = 50

// --- $ref resolution ---

// refResolver resolves local references ("#", "#/json/pointer", "#anchor") within one schema.
type refResolver struct {
	root    *jsValue
	anchors map[string]*jsValue // built on first anchor lookup
}

// resolve returns the target of ref, or nil and the reason it cannot be resolved. A pointer
// is percent-decoded (it is a URI fragment), then split on "/" with "~1" -> "/" and
// "~0" -> "~" unescaped per RFC 6901; it may step through objects (by key) and arrays (by
// canonical decimal index). "#name" finds a `$anchor` (2019-09+) or an `$id` of "#name"
// (draft-06/07). References to other documents are not resolved: that would take I/O, and
// a client that does not fetch them cannot resolve them either.
func (r *refResolver) resolve(ref string) (*jsValue, string) {
	if !strings.HasPrefix(ref, "#") {
		return nil, "is not a local reference (one starting with #); mcpulse does not fetch other documents, and clients that do not either cannot use it"
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil, "has an invalid percent-encoding"
	}
	if frag == "" {
		return r.root, ""
	}
	if frag[0] != '/' {
		if t := r.anchor(frag); t != nil {
			return t, ""
		}
		return nil, "names an anchor that no $anchor or $id in the schema declares"
	}
	cur := r.root
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch {
		case cur.kind == jsObject:
			cur = cur.get(tok)
		case cur.kind == jsArray:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(cur.arr) || strconv.Itoa(i) != tok {
				cur = nil
			} else {
				cur = cur.arr[i]
			}
		default:
			cur = nil
		}
		if cur == nil {
			return nil, "points to nothing in the schema"
		}
	}
	return cur, ""
}

func (r *refResolver) anchor(name string) *jsValue {
	if r.anchors == nil {
		r.anchors = make(map[string]*jsValue)
		var scan func(v *jsValue)
		scan = func(v *jsValue) {
			switch v.kind {
			case jsObject:
				if a := v.get("$anchor"); a != nil && a.kind == jsString {
					if _, dup := r.anchors[a.str]; !dup {
						r.anchors[a.str] = v
					}
				}
				if id := v.get("$id"); id != nil && id.kind == jsString && strings.HasPrefix(id.str, "#") && len(id.str) > 1 {
					if _, dup := r.anchors[id.str[1:]]; !dup {
						r.anchors[id.str[1:]] = v
					}
				}
				for _, m := range v.obj {
					scan(m.val)
				}
			case jsArray:
				for _, el := range v.arr {
					scan(el)
				}
			}
		}
		scan(r.root) // depth bounded by maxNesting
	}
	return r.anchors[name]
}

// --- JSON pointers for messages ---

// pathSeg is one step of the location of a schema in the document; paths are kept as a
// linked list so that the walk allocates nothing until a problem is reported.
type pathSeg struct {
	parent *pathSeg
	tok    string
}

func (p *pathSeg) child(tok string) *pathSeg { return &pathSeg{parent: p, tok: tok} }

// String renders the path as a URI-fragment JSON pointer: "#" for the root, "#/properties/a".
func (p *pathSeg) String() string {
	var toks []string
	for s := p; s != nil; s = s.parent {
		toks = append(toks, s.tok)
	}
	var b strings.Builder
	b.WriteByte('#')
	for i := len(toks) - 1; i >= 0; i-- {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(toks[i], "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// --- the walk ---

type problemWalker struct {
	refs     *refResolver
	problems []string
	dropped  int
	tooDeep  bool
	refNodes []refNode                 // schemas holding a $ref, for the cycle check
	refPaths map[*jsValue]*pathSeg     // their locations
	patterns map[string]*regexp.Regexp // compiled patternProperties keys (nil: not RE2)
	sdkCut   bool                      // the schema is a snapshot the SDK cut (see structuralProblems)
}

type refNode struct {
	v    *jsValue
	path *pathSeg
}

func (w *problemWalker) addf(format string, args ...any) {
	if len(w.problems) >= maxProblemsPerTool {
		w.dropped++
		return
	}
	w.problems = append(w.problems, fmt.Sprintf(format, args...))
}

// structuralProblems returns the structural problems of a parsed input schema, in document
// order, each a sentence that says where and what to do.
//
// sdkCut says the schema is a snapshot the analytics SDK cut or redacted (Tool.Truncated): its
// markers ("[Object]", "[redacted]", ...) stand where subschemas were, a cut declaration list
// can leave `required` names and $refs dangling, and none of that is the server's fault, so
// those are not reported.
func structuralProblems(root *jsValue, refs *refResolver, sdkCut bool) []string {
	w := problemWalker{refs: refs, sdkCut: sdkCut}
	if !root.isObject() {
		w.addf("the input schema is %s, not a JSON object: MCP tools take their arguments as an object, so declare {\"type\":\"object\",\"properties\":{...}}", root.kindName())
		return w.problems
	}
	if t := root.get("type"); t != nil && (t.kind != jsString || t.str != "object") {
		w.addf("the input schema's root type is %s, not \"object\": MCP tools take their arguments as an object, so make the root {\"type\":\"object\"} and move the value into a property", shortJSON(t))
	}
	w.schema(root, nil, nil, 0)
	w.cycles()
	if w.tooDeep {
		w.addf("the schema nests more than %d levels deep (counting $ref steps), so part of it was not checked: flatten it", maxWalkFrames)
	}
	if w.dropped > 0 {
		w.problems = append(w.problems, fmt.Sprintf("%d more problems not listed: fix the ones above first", w.dropped))
	}
	return w.problems
}

// shortJSON renders a value for a message, truncated.
func shortJSON(v *jsValue) string {
	b := appendJS(nil, v)
	if len(b) > 60 {
		return string(b[:57]) + "..."
	}
	return string(b)
}

// isSchemaValue reports whether v can be a JSON Schema: an object or a boolean.
func isSchemaValue(v *jsValue) bool {
	return v != nil && (v.kind == jsObject || v.kind == jsTrue || v.kind == jsFalse)
}

// isSchema is isSchemaValue, also accepting the SDK's markers in a cut snapshot.
func (w *problemWalker) isSchema(v *jsValue) bool {
	return isSchemaValue(v) || w.sdkCut && isSDKMarker(v)
}

// isSDKMarker reports whether v is one of the strings the PostHog MCP analytics SDK writes
// where it cut or redacted a value (@posthog/mcp 0.16.3, src/extensions/truncation.ts and
// mcp-payloads.ts): "[Object]", "[Array]", "[MaxProperties ~]", "[Circular ~]", "[redacted]".
func isSDKMarker(v *jsValue) bool {
	if v == nil || v.kind != jsString {
		return false
	}
	switch v.str {
	case "[Object]", "[Array]", "[MaxProperties ~]", "[Circular ~]", "[redacted]":
		return true
	}
	return false
}

// declScope links a schema to the schema it applies in place of (for anyOf/oneOf/allOf,
// not, if/then/else branches), so that a branch's `required` may name the parent's
// properties, a common way to say "a or b is required".
type declScope struct {
	v      *jsValue
	parent *declScope
}

// schema checks one object schema at path and descends into its subschemas.
func (w *problemWalker) schema(v *jsValue, path *pathSeg, scope *declScope, frames int) {
	if !v.isObject() {
		return
	}
	if frames > maxWalkFrames {
		w.tooDeep = true
		return
	}
	frames++
	here := &declScope{v: v, parent: scope}
	for _, m := range v.obj {
		switch m.key {
		case "properties", "patternProperties":
			if m.val.kind != jsObject {
				if !(w.sdkCut && isSDKMarker(m.val)) {
					w.addf("%s at %s is %s, not an object mapping names to schemas: make it an object", m.key, path.child(m.key), m.val.kindName())
				}
				continue
			}
			mp := path.child(m.key)
			for _, e := range m.val.obj {
				if !w.isSchema(e.val) {
					what := "property"
					if m.key == "patternProperties" {
						what = "pattern"
					}
					w.addf("non-schema value in a %s map: %s %q at %s is %s (%s), not a schema: give it a schema object such as {\"type\":\"string\",\"description\":\"...\"}", m.key, what, e.key, mp.child(e.key), e.val.kindName(), shortJSON(e.val))
					continue
				}
				w.schema(e.val, mp.child(e.key), nil, frames)
			}
		case "$defs", "definitions", "dependentSchemas":
			if m.val.kind != jsObject {
				if !(w.sdkCut && isSDKMarker(m.val)) {
					w.addf("%s at %s is %s, not an object mapping names to schemas: make it an object", m.key, path.child(m.key), m.val.kindName())
				}
				continue
			}
			mp := path.child(m.key)
			for _, e := range m.val.obj {
				if !w.isSchema(e.val) {
					w.addf("%s entry %q at %s is %s, not a schema: give it a schema object", m.key, e.key, mp.child(e.key), e.val.kindName())
					continue
				}
				w.schema(e.val, mp.child(e.key), nil, frames)
			}
		case "additionalProperties", "additionalItems", "contains", "propertyNames",
			"unevaluatedProperties", "unevaluatedItems", "contentSchema":
			w.single(m.key, m.val, path, nil, frames)
		case "not", "if", "then", "else":
			w.single(m.key, m.val, path, here, frames)
		case "items":
			if m.val.kind == jsArray { // draft 4-2019-09 tuple form
				w.list(m.key, m.val, path, nil, frames)
			} else {
				w.single(m.key, m.val, path, nil, frames)
			}
		case "prefixItems":
			w.list(m.key, m.val, path, nil, frames)
		case "allOf", "anyOf", "oneOf":
			w.list(m.key, m.val, path, here, frames)
		case "$ref":
			if m.val.kind != jsString {
				w.addf("$ref at %s is %s, not a string: make it a reference such as \"#/$defs/Name\"", path.child("$ref"), m.val.kindName())
				continue
			}
			if _, why := w.refs.resolve(m.val.str); why != "" {
				if w.sdkCut {
					continue // its target may be what the SDK cut
				}
				w.addf("unresolvable $ref %q at %s: it %s; point it at a definition in the same schema (e.g. \"#/$defs/Name\") or inline the schema", m.val.str, path.child("$ref"), why)
				continue
			}
			w.refNodes = append(w.refNodes, refNode{v: v, path: path})
		case "required":
			if !w.sdkCut { // a cut snapshot may have lost the declarations
				w.required(m.val, path.child("required"), here)
			}
		}
	}
}

// single checks a keyword whose value must be one schema.
func (w *problemWalker) single(key string, val *jsValue, path *pathSeg, scope *declScope, frames int) {
	if !w.isSchema(val) {
		w.addf("%s at %s is %s, not a schema: make it a schema object (or true/false)", key, path.child(key), val.kindName())
		return
	}
	w.schema(val, path.child(key), scope, frames)
}

// list checks a keyword whose value must be an array of schemas.
func (w *problemWalker) list(key string, val *jsValue, path *pathSeg, scope *declScope, frames int) {
	if val.kind != jsArray {
		if !(w.sdkCut && isSDKMarker(val)) {
			w.addf("%s at %s is %s, not an array of schemas: make it an array", key, path.child(key), val.kindName())
		}
		return
	}
	kp := path.child(key)
	for i, el := range val.arr {
		ip := kp.child(strconv.Itoa(i))
		if !w.isSchema(el) {
			w.addf("%s entry at %s is %s, not a schema: make it a schema object", key, ip, el.kindName())
			continue
		}
		w.schema(el, ip, scope, frames)
	}
}

// required checks that `required` is an array of strings, each naming a declared property.
// A name is declared when the schema's own `properties` has it, when a `patternProperties`
// pattern matches it, when a schema the object applies in place (an allOf/anyOf/oneOf branch
// or a $ref target, followed a few levels) declares it, or, for a schema that is itself such
// a branch, when the enclosing schema declares it.
func (w *problemWalker) required(req *jsValue, at *pathSeg, scope *declScope) {
	if req.kind != jsArray {
		w.addf("required at %s is %s, not an array of property names: make it an array such as [\"query\"]", at, req.kindName())
		return
	}
	for i, el := range req.arr {
		if el.kind != jsString {
			w.addf("required at %s has %s at index %d, not a property name: list names as strings", at, el.kindName(), i)
			continue
		}
		found := false
		for s := scope; s != nil && !found; s = s.parent {
			found = w.declares(s.v, el.str, 0, nil)
		}
		if !found {
			w.addf("required at %s names %q, which is not a declared property: declare it under properties or remove it from required", at, el.str)
		}
	}
}

// maxDeclHops bounds how far declares follows in-place subschemas and $ref targets.
const maxDeclHops = 8

func (w *problemWalker) declares(v *jsValue, name string, hops int, seen map[*jsValue]bool) bool {
	if !v.isObject() || hops > maxDeclHops || seen[v] {
		return false
	}
	if props := v.get("properties"); props.isObject() && props.get(name) != nil {
		return true
	}
	if pp := v.get("patternProperties"); pp.isObject() {
		for _, m := range pp.obj {
			if w.patternMatches(m.key, name) {
				return true
			}
		}
	}
	if seen == nil {
		seen = make(map[*jsValue]bool)
	}
	seen[v] = true
	for _, k := range [...]string{"allOf", "anyOf", "oneOf"} {
		if br := v.get(k); br != nil && br.kind == jsArray {
			for _, b := range br.arr {
				if w.declares(b, name, hops+1, seen) {
					return true
				}
			}
		}
	}
	if ref := v.get("$ref"); ref != nil && ref.kind == jsString {
		if t, _ := w.refs.resolve(ref.str); t != nil && w.declares(t, name, hops+1, seen) {
			return true
		}
	}
	return false
}

// patternMatches tests a patternProperties key against a name. Patterns are ECMAScript
// regular expressions; one that Go's RE2 cannot compile (lookarounds, backreferences) is
// assumed to match, so that no problem is reported on a guess.
func (w *problemWalker) patternMatches(pattern, name string) bool {
	re, ok := w.patterns[pattern]
	if !ok {
		re, _ = regexp.Compile(pattern)
		if w.patterns == nil {
			w.patterns = make(map[string]*regexp.Regexp)
		}
		w.patterns[pattern] = re
	}
	return re == nil || re.MatchString(name)
}

// cycles reports each cyclic $ref: a reference that, followed through $ref targets and
// in-place applicators (allOf/anyOf/oneOf, not, if/then/else) only, leads back to the schema
// it started from. Such a schema applies itself to the same value forever and can never be
// expanded. A recursive schema that descends first (a tree whose `children` items refer
// back to the node) is not cyclic in this sense and is not reported.
func (w *problemWalker) cycles() {
	if len(w.refNodes) == 0 {
		return
	}
	w.refPaths = make(map[*jsValue]*pathSeg, len(w.refNodes))
	for _, rn := range w.refNodes {
		w.refPaths[rn.v] = rn.path
	}
	const (
		white = 0
		gray  = 1
		black = 2
	)
	color := make(map[*jsValue]uint8)
	var stack []*jsValue
	var visit func(v *jsValue, frames int)
	visit = func(v *jsValue, frames int) {
		if frames > maxWalkFrames {
			w.tooDeep = true
			return
		}
		color[v] = gray
		stack = append(stack, v)
		for _, next := range inPlaceEdges(v, w.refs) {
			switch color[next] {
			case white:
				visit(next, frames+1)
			case gray:
				w.reportCycle(stack, next)
			}
		}
		stack = stack[:len(stack)-1]
		color[v] = black
	}
	for _, rn := range w.refNodes {
		if color[rn.v] == white {
			visit(rn.v, 0)
		}
	}
}

// inPlaceEdges lists the schemas that apply to the same value as v.
func inPlaceEdges(v *jsValue, refs *refResolver) []*jsValue {
	var out []*jsValue
	for _, m := range v.obj {
		switch m.key {
		case "$ref":
			if m.val.kind == jsString {
				if t, _ := refs.resolve(m.val.str); t.isObject() {
					out = append(out, t)
				}
			}
		case "allOf", "anyOf", "oneOf":
			if m.val.kind == jsArray {
				for _, el := range m.val.arr {
					if el.isObject() {
						out = append(out, el)
					}
				}
			}
		case "not", "if", "then", "else":
			if m.val.isObject() {
				out = append(out, m.val)
			}
		}
	}
	return out
}

// reportCycle names the first $ref on the cycle stack[i:] where stack[i] == back.
func (w *problemWalker) reportCycle(stack []*jsValue, back *jsValue) {
	start := 0
	for i := len(stack) - 1; i >= 0; i-- {
		if stack[i] == back {
			start = i
			break
		}
	}
	for _, v := range stack[start:] {
		if p, ok := w.refPaths[v]; ok {
			ref := v.get("$ref")
			w.addf("cyclic $ref %q at %s: following it (through $ref and allOf/anyOf/oneOf only) leads back to the same schema without descending into a property or item, so it can never be expanded; break the cycle", ref.str, p.child("$ref"))
			return
		}
	}
	w.addf("cyclic $ref: following the references (through $ref and allOf/anyOf/oneOf only) leads back to the same schema without descending into a property or item, so it can never be expanded; break the cycle")
}
