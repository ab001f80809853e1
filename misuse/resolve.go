package misuse

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Drafts of JSON Schema, as the resolver tells them apart (the year for 2019-09 and 2020-12).
const (
	draft4    = 4
	draft6    = 6
	draft7    = 7
	draft2019 = 2019
	draft2020 = 2020
)

// draftOf returns the draft a $schema URL names (http or https, an empty trailing fragment
// allowed), or 0 when it names none of the five.
func draftOf(s string) int {
	u, frag, _ := strings.Cut(s, "#")
	if frag != "" {
		return 0
	}
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		u = rest
	} else {
		u = strings.TrimPrefix(u, "https://")
	}
	switch u {
	case "json-schema.org/draft-04/schema":
		return draft4
	case "json-schema.org/draft-06/schema":
		return draft6
	case "json-schema.org/draft-07/schema":
		return draft7
	case "json-schema.org/draft/2019-09/schema":
		return draft2019
	case "json-schema.org/draft/2020-12/schema":
		return draft2020
	}
	return 0
}

// Where subschemas sit, by draft: a keyword whose value is one schema, a map of schemas, or an
// array of them (`items` is one schema or an array, so it is in both lists).
var (
	singleAt = map[int][]string{
		draft4: {"not", "additionalProperties", "items", "additionalItems"},
	}
	mapAt = map[int][]string{
		draft4: {"definitions", "properties", "patternProperties", "dependencies"},
	}
	arrayAt = map[int][]string{
		draft4: {"allOf", "anyOf", "oneOf", "items"},
	}
)

func init() {
	grow := func(m map[int][]string, from, to int, add ...string) {
		m[to] = append(slices.Clone(m[from]), add...)
	}
	grow(singleAt, draft4, draft6, "propertyNames", "contains")
	grow(mapAt, draft4, draft6)
	grow(arrayAt, draft4, draft6)
	grow(singleAt, draft6, draft7, "if", "then", "else")
	grow(mapAt, draft6, draft7)
	grow(arrayAt, draft6, draft7)
	grow(singleAt, draft7, draft2019, "unevaluatedProperties", "unevaluatedItems", "contentSchema")
	grow(mapAt, draft7, draft2019, "$defs", "dependentSchemas")
	grow(arrayAt, draft7, draft2019)
	grow(singleAt, draft2019, draft2020)
	grow(mapAt, draft2019, draft2020)
	grow(arrayAt, draft2019, draft2020, "prefixItems")
}

// Anchor names the drafts' meta-schemas allow ($anchor, and $dynamicAnchor in 2020-12).
var (
	anchor2019RE = regexp.MustCompile(`^[A-Za-z][-A-Za-z0-9.:_]*$`)
	anchor2020RE = regexp.MustCompile(`^[A-Za-z_][-A-Za-z0-9._]*$`)
)

// resource is a schema resource of the document: the root, or a subschema with an id.
type resource struct {
	ptr     string // its JSON pointer in the document
	id      string // its absolute URL, without fragment
	draft   int
	anchors map[string]string // anchor name -> JSON pointer
	dynamic []string          // its $dynamicAnchor names
}

// errBudget is what a resolution past its time budget fails with (see resolver.tick).
var errBudget = errors.New("time budget spent")

// resolver turns a prepared schema document (preparer.schema's output) into rules in time
// linear in its size: resources, ids and anchors are gathered in one walk into maps, then each
// subschema the root reaches (through keywords and references alike) becomes one rule, once,
// keyed by its JSON pointer, so a reference is resolved by one map lookup and a cycle meets the
// rule already begun. It follows the JSON Schema drafts 4, 6, 7, 2019-09 and 2020-12 as
// github.com/santhosh-tekuri/jsonschema/v6 v6.0.1 reads them (the tests compare both on every
// schema of the corpus and on fuzzed ones): in drafts before 2019-09 a `$ref` hides its
// siblings; `$dynamicRef` and `$recursiveRef` resolve statically; a reference outside the
// document fails (nothing is fetched); what the drafts' meta-schemas refuse among the kept
// keywords (anchor names, fragments in `$id`, repeated dependency names, ...) fails too.
type resolver struct {
	ctx      context.Context
	deadline time.Time // zero: no budget
	steps    int
	doc      any
	prep     *preparer
	docURL   string
	byPtr    map[string]*resource
	byID     map[string]*resource
	seen     map[string]any // the subschemas whose resources and anchors were gathered, by pointer
	rules    map[string]*rule
}

func newResolver(ctx context.Context, deadline time.Time, doc any, prep *preparer, docURL string) *resolver {
	return &resolver{ctx: ctx, deadline: deadline, doc: doc, prep: prep, docURL: docURL,
		byPtr: map[string]*resource{}, byID: map[string]*resource{}, seen: map[string]any{}, rules: map[string]*rule{}}
}

// tick counts one step and, every 1,024 steps, fails when the context is done (its error) or
// the deadline passed (errBudget).
func (r *resolver) tick() error {
	r.steps++
	if r.steps&1023 != 0 {
		return nil
	}
	if err := r.ctx.Err(); err != nil {
		return err
	}
	if !r.deadline.IsZero() && time.Now().After(r.deadline) {
		return errBudget
	}
	return nil
}

// resolve gathers the document's resources and returns the root's rule.
func (r *resolver) resolve() (*rule, error) {
	if err := r.gather(r.doc, r.docURL, "", draft2020); err != nil {
		return nil, err
	}
	return r.rule("")
}

// resourceAt is the resource the subschema at ptr belongs to: the nearest one enclosing it.
func (r *resolver) resourceAt(ptr string) *resource {
	for {
		if res, ok := r.byPtr[ptr]; ok {
			return res
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return r.byPtr[""]
		}
		ptr = ptr[:i]
	}
}

// idOf is a schema object's id under draft (`id` in draft 4, `$id` after), without its
// fragment; "" when none, or when a `$ref` hides it (drafts before 2019-09).
func idOf(obj map[string]any, draft int) string {
	if draft < draft2019 {
		if _, ok := obj["$ref"]; ok {
			return ""
		}
	}
	key := "$id"
	if draft == draft4 {
		key = "id"
	}
	s, _ := obj[key].(string)
	s, _, _ = strings.Cut(s, "#")
	return s
}

// gather walks the subschema v at ptr (base: the URL its references resolve against,
// fallback: the draft of its enclosing resource), registering resources and anchors and
// checking what the meta-schemas check of the kept keywords.
func (r *resolver) gather(v any, base, ptr string, fallback int) error {
	if _, ok := r.seen[ptr]; ok {
		return nil
	}
	r.seen[ptr] = v
	if err := r.tick(); err != nil {
		return err
	}
	obj, ok := v.(map[string]any)
	if !ok {
		if _, isBool := v.(bool); isBool && ptr == "" {
			r.add(&resource{ptr: "", id: base, draft: fallback})
		}
		return nil
	}
	draft, hasSchema := fallback, false
	if s, ok := obj["$schema"].(string); ok {
		hasSchema = true
		if d := draftOf(s); d != 0 {
			draft = d
		}
	}
	id := idOf(obj, draft)
	if id == "" && ptr != "" {
		// A $schema counts only where a resource begins.
		draft, hasSchema = fallback, false
		id = idOf(obj, draft)
	}
	begins := ptr == ""
	if id != "" {
		u, _, err := joinURL(base, id)
		if err != nil {
			return fmt.Errorf("invalid id at %s: %w", pointerText(ptr), err)
		}
		base, begins = u, true
	}
	if begins {
		if old, ok := r.byID[base]; ok {
			if old.ptr != ptr {
				return fmt.Errorf("id %q at %s and %s", base, pointerText(old.ptr), pointerText(ptr))
			}
		} else {
			d := fallback
			if hasSchema {
				d = draft
			}
			r.add(&resource{ptr: ptr, id: base, draft: d})
		}
	}
	res := r.byID[base]
	if err := r.anchors(obj, ptr, res); err != nil {
		return err
	}
	if err := checkMeta(obj, ptr, res.draft); err != nil {
		return err
	}
	for _, k := range singleAt[draft] {
		if sub, ok := obj[k]; ok {
			if err := r.gather(sub, base, ptr+"/"+escapePointer(k), res.draft); err != nil {
				return err
			}
		}
	}
	for _, k := range mapAt[draft] {
		m, _ := obj[k].(map[string]any)
		for _, name := range sortedKeys(m) {
			if err := r.gather(m[name], base, ptr+"/"+escapePointer(k)+"/"+escapePointer(name), res.draft); err != nil {
				return err
			}
		}
	}
	for _, k := range arrayAt[draft] {
		arr, _ := obj[k].([]any)
		for i, sub := range arr {
			if err := r.gather(sub, base, ptr+"/"+escapePointer(k)+"/"+strconv.Itoa(i), res.draft); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *resolver) add(res *resource) {
	res.anchors = map[string]string{}
	r.byPtr[res.ptr] = res
	r.byID[res.id] = res
}

// anchors registers the anchors the schema object at ptr declares in its resource res.
func (r *resolver) anchors(obj map[string]any, ptr string, res *resource) error {
	add := func(name string) error {
		if at, ok := res.anchors[name]; ok && at != ptr {
			return fmt.Errorf("anchor %q at %s and %s", name, pointerText(at), pointerText(ptr))
		}
		res.anchors[name] = ptr
		return nil
	}
	if res.draft < draft2019 {
		if _, ok := obj["$ref"]; ok {
			return nil
		}
		key := "$id"
		if res.draft == draft4 {
			key = "id"
		}
		if id, ok := obj[key].(string); ok {
			_, frag, _ := strings.Cut(id, "#")
			f, err := url.PathUnescape(frag)
			if err != nil {
				return fmt.Errorf("invalid anchor in id at %s", pointerText(ptr))
			}
			if f != "" && !strings.HasPrefix(f, "/") {
				if err := add(f); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if s, ok := obj["$anchor"].(string); ok {
		if err := add(s); err != nil {
			return err
		}
	}
	if res.draft >= draft2020 {
		if s, ok := obj["$dynamicAnchor"].(string); ok {
			if err := add(s); err != nil {
				return err
			}
			res.dynamic = append(res.dynamic, s)
		}
	}
	return nil
}

// checkMeta refuses what the draft's meta-schema refuses among the keywords the preparer keeps
// (the others are gone, and their values were checked for shape there).
func checkMeta(obj map[string]any, ptr string, draft int) error {
	bad := func(k, why string) error {
		return fmt.Errorf("%s at %s: %s", k, pointerText(ptr), why)
	}
	// Formats: $schema is a URI, references and ids are URI references (draft 4's "uriref"
	// format for `id` is unknown, so unchecked, and its $ref has none).
	if s, ok := obj["$schema"].(string); ok {
		if u, err := parseURL(s); err != nil || !u.IsAbs() {
			return bad("$schema", "not an absolute URI")
		}
	}
	for _, k := range uriRefsAt[draft] {
		if s, ok := obj[k].(string); ok {
			if err := uriReference(s); err != nil {
				return bad(k, err.Error())
			}
		}
	}
	if draft >= draft2019 {
		if s, ok := obj["$id"].(string); ok {
			if i := strings.IndexByte(s, '#'); i >= 0 && i != len(s)-1 {
				return bad("$id", "a fragment is not allowed")
			}
		}
		re := anchor2020RE
		if draft == draft2019 {
			re = anchor2019RE
		}
		if s, ok := obj["$anchor"].(string); ok && !re.MatchString(s) {
			return bad("$anchor", "not an anchor name")
		}
		if draft == draft2020 {
			if s, ok := obj["$dynamicAnchor"].(string); ok && !re.MatchString(s) {
				return bad("$dynamicAnchor", "not an anchor name")
			}
			if _, ok := obj["items"].([]any); ok {
				return bad("items", "an array (a tuple is prefixItems)")
			}
			if _, ok := obj["$recursiveAnchor"]; ok {
				return bad("$recursiveAnchor", "an anchor name in 2020-12, not a boolean")
			}
		}
	}
	if deps, ok := obj["dependencies"].(map[string]any); ok {
		for _, names := range deps {
			arr, ok := names.([]any)
			if !ok {
				continue
			}
			if draft == draft4 && len(arr) == 0 {
				return bad("dependencies", "an empty list")
			}
			seen := map[string]bool{}
			for _, n := range arr {
				s, _ := n.(string)
				if seen[s] {
					return bad("dependencies", "a repeated name")
				}
				seen[s] = true
			}
		}
	}
	return nil
}

// uriRefsAt are the keywords whose values are URI references, by draft.
var uriRefsAt = map[int][]string{draft6: {"$id", "$ref"}, draft7: {"$id", "$ref"},
	draft2019: {"$id", "$ref", "$recursiveRef"}, draft2020: {"$id", "$ref", "$recursiveRef", "$dynamicRef"}}

// uriReference checks the "uri-reference" format as the meta-schemas assert it.
func uriReference(s string) error {
	if strings.Contains(s, `\`) {
		return errors.New(`a URI reference holds no \`)
	}
	_, err := parseURL(s)
	return err
}

// parseURL parses a URL, refusing an IPv6 host out of brackets or invalid.
func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if host := u.Hostname(); strings.Contains(host, ":") {
		if !strings.Contains(u.Host, "[") || !strings.Contains(u.Host, "]") {
			return nil, errors.New("IPv6 address not in brackets")
		}
		if !parseIPv6(host) {
			return nil, errors.New("invalid IPv6 address")
		}
	}
	return u, nil
}

// joinURL resolves ref against base (RFC 3986; an opaque base such as the document's urn keeps
// its opaque part for a relative ref) and returns the URL without fragment and the fragment,
// percent-decoded.
func joinURL(base, ref string) (string, string, error) {
	b, err := url.Parse(base)
	if err != nil {
		return "", "", err
	}
	rest, frag, _ := strings.Cut(ref, "#")
	frag, err = url.PathUnescape(frag)
	if err != nil {
		return "", "", err
	}
	ru, err := url.Parse(rest)
	if err != nil {
		return "", "", err
	}
	out := b.ResolveReference(ru)
	if !ru.IsAbs() && b.Opaque != "" {
		out.Opaque = b.Opaque
	}
	return out.String(), frag, nil
}

// target returns the JSON pointer a reference at ptr leads to, or an error when it leads
// outside the document or to an anchor or pointer that is not there.
func (r *resolver) target(ref, ptr string) (string, error) {
	u, frag, err := joinURL(r.resourceAt(ptr).id, ref)
	if err != nil {
		return "", fmt.Errorf("reference %q at %s: %w", ref, pointerText(ptr), err)
	}
	res := r.byPtr[""]
	if u != r.docURL {
		if res = r.byID[u]; res == nil {
			return "", fmt.Errorf("reference %q at %s is outside the input schema: remote references are not followed", ref, pointerText(ptr))
		}
	}
	if frag == "" || strings.HasPrefix(frag, "/") {
		return res.ptr + frag, nil
	}
	at, ok := res.anchors[frag]
	if !ok {
		return "", fmt.Errorf("reference %q at %s: no anchor %q", ref, pointerText(ptr), frag)
	}
	return at, nil
}

// lookup returns the value at JSON pointer ptr of the document.
func (r *resolver) lookup(ptr string) (any, error) {
	v := r.doc
	if ptr == "" {
		return v, nil
	}
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok, ok := unescapePointer(tok)
		if !ok {
			return nil, fmt.Errorf("invalid JSON pointer %s", pointerText(ptr))
		}
		switch val := v.(type) {
		case map[string]any:
			if next, ok := val[tok]; ok {
				v = next
				continue
			}
		case []any:
			if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(val) {
				v = val[i]
				continue
			}
		}
		return nil, fmt.Errorf("JSON pointer %s not found", pointerText(ptr))
	}
	return v, nil
}

// unescapePointer undoes escapePointer; false for a '~' not followed by 0 or 1.
func unescapePointer(tok string) (string, bool) {
	if !strings.Contains(tok, "~") {
		return tok, true
	}
	var b strings.Builder
	for i := 0; i < len(tok); i++ {
		if tok[i] != '~' {
			b.WriteByte(tok[i])
			continue
		}
		if i+1 == len(tok) {
			return "", false
		}
		switch tok[i+1] {
		case '0':
			b.WriteByte('~')
		case '1':
			b.WriteByte('/')
		default:
			return "", false
		}
		i++
	}
	return b.String(), true
}

// schemaAt returns the subschema at ptr, gathering its resources first when no walk from the
// root reached it (a reference into a place no keyword declares a schema).
func (r *resolver) schemaAt(ptr string) (any, error) {
	v, seen := r.seen[ptr]
	if !seen {
		var err error
		if v, err = r.lookup(ptr); err != nil {
			return nil, err
		}
		res := r.resourceAt(ptr)
		if err := r.gather(v, res.id, ptr, res.draft); err != nil {
			return nil, err
		}
	}
	switch v.(type) {
	case bool, map[string]any:
		return v, nil
	}
	return nil, fmt.Errorf("%s is not a schema", pointerText(ptr))
}

// rule returns the rule of the subschema at ptr, building it (and what it reaches) once.
func (r *resolver) rule(ptr string) (*rule, error) {
	if ru, ok := r.rules[ptr]; ok {
		return ru, nil
	}
	if err := r.tick(); err != nil {
		return nil, err
	}
	ru := &rule{types: admitsObject | admitsArray}
	r.rules[ptr] = ru
	v, err := r.schemaAt(ptr)
	if err != nil {
		return nil, err
	}
	res := r.resourceAt(ptr)
	// The library-based path compiled a resource's root and its dynamic anchors whatever
	// reached them; failures there fail the schema here too.
	if res.ptr != ptr {
		if _, err := r.rule(res.ptr); err != nil {
			return nil, err
		}
	} else if res.draft >= draft2020 {
		for _, a := range res.dynamic {
			if _, err := r.rule(res.anchors[a]); err != nil {
				return nil, err
			}
		}
	}
	if why, ok := r.prep.opaque[ptr]; ok {
		ru.opaque = why
		ru.redacted = r.prep.redacted[ptr]
		return ru, nil
	}
	ru.cut = r.prep.cut[ptr]
	obj, ok := v.(map[string]any)
	if !ok {
		ru.never = !v.(bool)
		return ru, nil
	}
	if len(obj) == 0 {
		return ru, nil
	}
	return ru, r.object(ru, obj, ptr, res.draft)
}

// object fills ru from the schema object obj at ptr read under draft.
func (r *resolver) object(ru *rule, obj map[string]any, ptr string, draft int) error {
	at := func(k string) string { return ptr + "/" + escapePointer(k) }
	one := func(k string) (*rule, error) {
		if _, ok := obj[k]; !ok {
			return nil, nil
		}
		return r.rule(at(k))
	}
	each := func(k string, m map[string]any) ([]*rule, error) {
		var out []*rule
		for _, name := range sortedKeys(m) {
			if _, names := m[name].([]any); names && k == "dependencies" {
				continue // a list of property names, no schema
			}
			x, err := r.rule(at(k) + "/" + escapePointer(name))
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	list := func(k string) ([]*rule, error) {
		arr, _ := obj[k].([]any)
		var out []*rule
		for i := range arr {
			x, err := r.rule(at(k) + "/" + strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			out = append(out, x)
		}
		return out, nil
	}
	ref := func(k string) (*rule, error) {
		s, ok := obj[k].(string)
		if !ok {
			return nil, nil
		}
		to, err := r.target(s, ptr)
		if err != nil {
			return nil, err
		}
		return r.rule(to)
	}
	if draft < draft2019 {
		key := "$id"
		if draft == draft4 {
			key = "id"
		}
		if s, ok := obj[key].(string); ok {
			_, frag, _ := strings.Cut(s, "#")
			if _, err := url.PathUnescape(frag); err != nil {
				return fmt.Errorf("invalid anchor in id at %s", pointerText(ptr))
			}
		}
	}

	// The conjunction: $ref, $recursiveRef, $dynamicRef, allOf, then, else, dependentSchemas,
	// dependencies.
	var refs, allOf, anyOf, oneOf, dependent, deps []*rule
	var then, els *rule
	x, err := ref("$ref")
	if err != nil {
		return err
	}
	if x != nil {
		refs = append(refs, x)
	}
	// Up to draft 7 a $ref hides the siblings draft 4 knows (those later drafts added stay).
	if hidden := draft < draft2019 && x != nil; !hidden {
		if allOf, err = list("allOf"); err != nil {
			return err
		}
		if anyOf, err = list("anyOf"); err != nil {
			return err
		}
		if oneOf, err = list("oneOf"); err != nil {
			return err
		}
		if _, err := one("not"); err != nil {
			return err
		}
		if err := r.objects(ru, obj, ptr, draft); err != nil {
			return err
		}
		if err := r.arrays(ru, obj, ptr, draft); err != nil {
			return err
		}
		m, _ := obj["dependencies"].(map[string]any)
		if deps, err = each("dependencies", m); err != nil {
			return err
		}
		if t, ok := obj["type"]; ok {
			ru.types = 0
			names, _ := t.([]any)
			if s, ok := t.(string); ok {
				names = []any{s}
			}
			for _, n := range names {
				switch n {
				case "object":
					ru.types |= admitsObject
				case "array":
					ru.types |= admitsArray
				}
			}
		}
	}
	if draft >= draft6 {
		for _, k := range []string{"contains", "propertyNames"} {
			if _, err := one(k); err != nil {
				return err
			}
		}
	}
	if iff, ok := obj["if"]; ok && draft >= draft7 {
		if _, err := r.rule(at("if")); err != nil {
			return err
		}
		b, isBool := iff.(bool)
		if !isBool || b {
			if then, err = one("then"); err != nil {
				return err
			}
		}
		if !isBool || !b {
			if els, err = one("else"); err != nil {
				return err
			}
		}
	}
	if draft >= draft2019 {
		rec, err := ref("$recursiveRef")
		if err != nil {
			return err
		}
		if rec != nil {
			refs = append(refs, rec)
		}
		m, _ := obj["dependentSchemas"].(map[string]any)
		if dependent, err = each("dependentSchemas", m); err != nil {
			return err
		}
		if _, err := one("unevaluatedItems"); err != nil {
			return err
		}
		if err := r.additional(ru, obj, ptr, "unevaluatedProperties"); err != nil {
			return err
		}
	}
	if s, ok := obj["$dynamicRef"].(string); ok && draft >= draft2020 {
		if _, _, err := joinURL(r.docURL, s); err != nil {
			return fmt.Errorf("$dynamicRef at %s: %w", pointerText(ptr), err)
		}
		dyn, err := ref("$dynamicRef")
		if err != nil {
			return err
		}
		refs = append(refs, dyn)
	}
	conj := append(refs, allOf...)
	for _, x := range []*rule{then, els} {
		if x != nil {
			conj = append(conj, x)
		}
	}
	ru.conj = append(append(conj, dependent...), deps...)
	ru.union = append(anyOf, oneOf...)
	return nil
}

// objects fills ru's object keywords but unevaluatedProperties (see additional).
func (r *resolver) objects(ru *rule, obj map[string]any, ptr string, draft int) error {
	at := func(k string) string { return ptr + "/" + escapePointer(k) }
	if props, ok := obj["properties"].(map[string]any); ok {
		ru.objKeys = true
		ru.props = make(map[string]*rule, len(props))
		for _, k := range sortedKeys(props) {
			x, err := r.rule(at("properties") + "/" + escapePointer(k))
			if err != nil {
				return err
			}
			ru.props[k] = x
		}
	}
	if pats, ok := obj["patternProperties"].(map[string]any); ok {
		ru.objKeys = true
		for _, k := range sortedKeys(pats) {
			x, err := r.rule(at("patternProperties") + "/" + escapePointer(k))
			if err != nil {
				return err
			}
			re, err := regexp.Compile(k)
			if err != nil {
				ru.badRegex = true // ECMA-262 only (lookarounds, backreferences): matches nothing
				continue
			}
			ru.patterns = append(ru.patterns, patternRule{re: re, r: x})
		}
	}
	return r.additional(ru, obj, ptr, "additionalProperties")
}

// additional reads additionalProperties or unevaluatedProperties (k) into ru: either makes the
// schema enumerate keys; the first that admits a key gives the extra rule.
func (r *resolver) additional(ru *rule, obj map[string]any, ptr, k string) error {
	v, ok := obj[k]
	if !ok {
		return nil
	}
	ru.objKeys = true
	if b, isBool := v.(bool); isBool && k == "additionalProperties" {
		if b && ru.extra == nil {
			ru.extra = &rule{types: admitsObject | admitsArray}
		}
		return nil
	}
	x, err := r.rule(ptr + "/" + escapePointer(k))
	if err != nil {
		return err
	}
	if !x.never && ru.extra == nil {
		ru.extra = x
	}
	return nil
}

// arrays fills ru's array keywords: 2020-12's prefixItems and items, earlier drafts' items (one
// schema or a tuple) with additionalItems.
func (r *resolver) arrays(ru *rule, obj map[string]any, ptr string, draft int) error {
	at := func(k string) string { return ptr + "/" + escapePointer(k) }
	tuple := func(k string) error {
		arr, _ := obj[k].([]any)
		for i := range arr {
			x, err := r.rule(at(k) + "/" + strconv.Itoa(i))
			if err != nil {
				return err
			}
			ru.prefix = append(ru.prefix, x)
		}
		return nil
	}
	if draft >= draft2020 {
		_, hasPrefix := obj["prefixItems"].([]any)
		_, hasItems := obj["items"]
		if !hasPrefix && !hasItems {
			return nil
		}
		ru.arrKeys = true
		if err := tuple("prefixItems"); err != nil {
			return err
		}
		if hasItems {
			x, err := r.rule(at("items"))
			if err != nil {
				return err
			}
			ru.items = x
		}
	} else {
		items, ok := obj["items"]
		if !ok {
			return nil
		}
		ru.arrKeys = true
		if _, isTuple := items.([]any); !isTuple {
			x, err := r.rule(at("items"))
			if err != nil {
				return err
			}
			ru.items = x
		} else {
			if err := tuple("items"); err != nil {
				return err
			}
			switch ai := obj["additionalItems"].(type) {
			case bool:
				if ai {
					ru.items = &rule{types: admitsObject | admitsArray}
				}
			case nil:
			default:
				x, err := r.rule(at("additionalItems"))
				if err != nil {
					return err
				}
				ru.items = x
			}
		}
	}
	if ru.items != nil && ru.items.never {
		ru.items = nil
	}
	return nil
}

// pointerText shows a JSON pointer in an error ("#" for the root).
func pointerText(ptr string) string { return strconv.Quote("#" + ptr) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// parseIPv6 reports whether s is an IPv6 address (as a URL host holds one, zone aside).
func parseIPv6(s string) bool {
	s, _, _ = strings.Cut(s, "%")
	a, err := netip.ParseAddr(s)
	return err == nil && a.Is6()
}
