package gen

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
)

// Argument generation from real tool inputSchemas, and the agent mistakes injected into them.
// Arguments are not written to the corpus (PostHog's tool-call events do not carry them); they
// exist so $mcp_ignored_keys is exactly what ignoredKeys reports for what the agent sent.

var sampleStrings = []string{
	"main", "posthog", "mcpulse", "feature/sql-editor", "SELECT count() FROM events", "production",
	"default", "my-organization", "PROJECT-123", "2026-01-01", "-7d", "api/v1", "README.md", "fix: typo",
}

// genArgs returns arguments valid for the schema: every required property and some optional ones.
func (g *generator) genArgs(schema map[string]any) map[string]any {
	obj, _ := g.genObject(schema, 0).(map[string]any)
	if obj == nil {
		obj = map[string]any{}
	}
	return obj
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if str, ok := x.(string); ok && str != "null" {
				return str
			}
		}
		return "null"
	}
	if _, ok := s["properties"]; ok {
		return "object"
	}
	if _, ok := s["items"]; ok {
		return "array"
	}
	return ""
}

func (g *generator) genValue(s map[string]any, depth int) any {
	if s == nil {
		return "value"
	}
	if c, ok := s["const"]; ok {
		return c
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		return e[g.rng.IntN(len(e))]
	}
	for _, k := range [...]string{"anyOf", "oneOf", "allOf"} {
		alts, _ := s[k].([]any)
		var options []map[string]any
		for _, a := range alts {
			if m, ok := a.(map[string]any); ok && schemaType(m) != "null" {
				options = append(options, m)
			}
		}
		if len(options) > 0 {
			return g.genValue(options[g.rng.IntN(len(options))], depth)
		}
		if len(alts) > 0 {
			return nil
		}
	}
	switch schemaType(s) {
	case "object":
		return g.genObject(s, depth+1)
	case "array":
		items, _ := s["items"].(map[string]any)
		n := 1 + g.rng.IntN(3)
		if depth > 4 {
			n = 1
		}
		arr := make([]any, n)
		for i := range arr {
			arr[i] = g.genValue(items, depth+1)
		}
		return arr
	case "string":
		return sampleStrings[g.rng.IntN(len(sampleStrings))]
	case "number", "integer":
		return float64(1 + g.rng.IntN(100))
	case "boolean":
		return g.chance(0.5)
	case "null":
		return nil
	}
	return "value"
}

func (g *generator) genObject(s map[string]any, depth int) any {
	props, _ := s["properties"].(map[string]any)
	required := map[string]bool{}
	if req, ok := s["required"].([]any); ok {
		for _, r := range req {
			if name, ok := r.(string); ok {
				required[name] = true
			}
		}
	}
	optional := 0.3
	if depth > 1 {
		optional = 0.2
	}
	if depth > 4 {
		optional = 0
	}
	obj := map[string]any{}
	for _, k := range sortedKeys(props) {
		ps, _ := props[k].(map[string]any)
		if required[k] || g.chance(optional) {
			obj[k] = g.genValue(ps, depth)
		}
	}
	if props == nil && depth < 4 { // a map-like object: a few entries
		switch ap := s["additionalProperties"].(type) {
		case map[string]any:
			for i := g.rng.IntN(3); i > 0; i-- {
				obj[fmt.Sprintf("param_%d", i)] = g.genValue(ap, depth)
			}
		case bool:
			if ap {
				obj["param_1"] = "value"
			}
		}
	}
	return obj
}

// Mistake vocabulary.
var (
	inventedKeys = []string{
		"limit", "verbose", "format", "dry_run", "page_size", "include_archived", "timeout", "reason",
		"confirm", "sort_by", "max_results", "project_id", "cursor", "with_details", "recursive",
	}
	dottedKeys = []string{"filters.date_from", "options.verbose", "query.limit"}
	itemKeys   = []string{"description", "id", "sha", "value_type", "order", "metadata", "label"}
	// unusualKeys exercise escaping downstream: reported with control characters (and U+2028)
	// masked as '?', markup and quotes as they are.
	unusualKeys = []string{
		"note\nfield", "<img src=x onerror=alert(1)>", "line\u2028break", "tab\tkey", `quote"key`,
		`back\slash`, "emoji_🚀", "nul\x00byte", "ünïcödé_key", "'; DROP TABLE tool_calls; --",
	}
)

// Shares of mistake calls (MisplacedKeyRate) with keys that need escaping, and with more
// ignored keys than the 20 an event lists.
const (
	unusualMistakeShare = 0.04
	manyMistakeShare    = 0.015
)

// injectMistakes adds agent mistakes to args, so at least one counted ignored key results.
func (g *generator) injectMistakes(schema, args map[string]any) {
	switch r := g.rng.Float64(); {
	case r < unusualMistakeShare:
		args[unusualKeys[g.rng.IntN(len(unusualKeys))]] = "x"
	case r < unusualMistakeShare+manyMistakeShare:
		for i, n := 0, 21+g.rng.IntN(8); i < n; i++ {
			args[fmt.Sprintf("extra_param_%02d", i)] = float64(i)
		}
	default:
		for n := 1 + boolInt(g.chance(0.15)); n > 0; n-- {
			switch r := g.rng.Float64(); {
			case r < 0.35:
				g.misname(schema, args)
			case r < 0.60:
				g.misplace(schema, args)
			case r < 0.75:
				g.extraItemKey(schema, args)
			default:
				g.invent(schema, args)
			}
		}
	}
	// A mistake can happen to land on a declared key; make sure one counts (bounded, in case a
	// schema accepted any top-level key).
	for i := 0; i < 64; i++ {
		if keys, _ := ignoredKeys(schema, args); len(keys) > 0 {
			return
		}
		if i < len(inventedKeys) {
			args[inventedKeys[(i*7+3)%len(inventedKeys)]] = "x"
		} else {
			args[fmt.Sprintf("unexpected_argument_%d", i)] = "x"
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// declaredProps returns the top-level properties of a schema, alternatives merged.
func declaredProps(schema map[string]any) map[string]any {
	out := map[string]any{}
	all, _ := flattenServed([]any{schema})
	for _, s := range all {
		props, _ := s["properties"].(map[string]any)
		for k, v := range props {
			out[k] = v
		}
	}
	return out
}

// variantKey returns a plausible misspelling of key: camelCase for snake_case and back, else
// a plural or an `_id` suffix.
func variantKey(key string, alt bool) string {
	if strings.Contains(key, "_") {
		parts := strings.Split(key, "_")
		for i := 1; i < len(parts); i++ {
			if parts[i] != "" {
				parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
			}
		}
		return strings.Join(parts, "")
	}
	var b strings.Builder
	changed := false
	for i, r := range key {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
			b.WriteRune(unicode.ToLower(r))
			changed = true
			continue
		}
		b.WriteRune(r)
	}
	if changed {
		return b.String()
	}
	if alt {
		return key + "_id"
	}
	return key + "s"
}

// misname renames a sent key (or adds a variant of a declared one) to a case variant.
func (g *generator) misname(schema, args map[string]any) {
	declared := declaredProps(schema)
	keys := sortedKeys(args)
	if len(keys) == 0 {
		keys = sortedKeys(declared)
	}
	if len(keys) == 0 {
		g.invent(schema, args)
		return
	}
	k := keys[g.rng.IntN(len(keys))]
	v := variantKey(k, g.chance(0.5))
	if _, ok := declared[v]; ok {
		g.invent(schema, args)
		return
	}
	val, sent := args[k]
	if !sent {
		val = g.genValue(asMap(declared[k]), 1)
	}
	args[v] = val
	if sent && g.chance(0.5) {
		delete(args, k)
	}
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// misplace moves a key to the wrong nesting level: a top-level key pushed into a nested object
// (e.g. `filters.owner`), or a nested key lifted to the top (`name` instead of `data.name`).
func (g *generator) misplace(schema, args map[string]any) {
	declared := declaredProps(schema)
	var containers []string
	for _, k := range sortedKeys(declared) {
		ps := asMap(declared[k])
		if ps != nil && schemaType(ps) == "object" && ps["properties"] != nil {
			containers = append(containers, k)
		}
	}
	if len(containers) == 0 {
		g.invent(schema, args)
		return
	}
	ck := containers[g.rng.IntN(len(containers))]
	container, ok := args[ck].(map[string]any)
	if !ok {
		container = map[string]any{}
		args[ck] = container
	}
	inner := sortedKeys(container)
	if len(inner) > 0 && g.chance(0.5) {
		k := inner[g.rng.IntN(len(inner))]
		if _, clash := declared[k]; !clash {
			args[k] = container[k]
			delete(container, k)
			return
		}
	}
	var outer []string
	for _, k := range sortedKeys(args) {
		if k != ck {
			outer = append(outer, k)
		}
	}
	if len(outer) == 0 {
		container[inventedKeys[g.rng.IntN(len(inventedKeys))]] = "x"
		return
	}
	k := outer[g.rng.IntN(len(outer))]
	container[k] = args[k]
	if g.chance(0.5) {
		delete(args, k)
	}
}

// extraItemKey adds an extra key to one object inside an array of objects.
func (g *generator) extraItemKey(schema, args map[string]any) {
	var items []map[string]any
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		if depth > 5 {
			return
		}
		switch v := v.(type) {
		case map[string]any:
			for _, k := range sortedKeys(v) {
				walk(v[k], depth+1)
			}
		case []any:
			for _, it := range v {
				if m, ok := it.(map[string]any); ok {
					items = append(items, m)
				}
				walk(it, depth+1)
			}
		}
	}
	walk(args, 0)
	if len(items) == 0 {
		// Send an array-of-objects property the call did not use, then add to it.
		declared := declaredProps(schema)
		for _, k := range sortedKeys(declared) {
			ps := asMap(declared[k])
			if _, sent := args[k]; sent || ps == nil || schemaType(ps) != "array" {
				continue
			}
			if it := asMap(ps["items"]); it != nil && schemaType(it) == "object" {
				arr, _ := g.genValue(ps, 1).([]any)
				if len(arr) > 0 {
					args[k] = arr
					walk(arr, 1)
					break
				}
			}
		}
	}
	if len(items) == 0 {
		g.invent(schema, args)
		return
	}
	item := items[g.rng.IntN(len(items))]
	item[itemKeys[g.rng.IntN(len(itemKeys))]] = "x"
}

// invent adds a key the schema never had (sometimes a dotted name sent flat).
func (g *generator) invent(_ map[string]any, args map[string]any) {
	if g.chance(0.1) {
		args[dottedKeys[g.rng.IntN(len(dottedKeys))]] = "x"
		return
	}
	args[inventedKeys[g.rng.IntN(len(inventedKeys))]] = "x"
}
