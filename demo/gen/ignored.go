package gen

import (
	"sort"
	"strconv"
	"strings"
)

// maxIgnoredKeys is how many $mcp_ignored_keys an event lists at most (DESIGN.md §2); the
// total before the cap goes in $mcp_ignored_keys_total.
const maxIgnoredKeys = 20

// ignoredKeys diffs the keys of a tool call's arguments against the tool's JSON Schema
// inputSchema, the way an MCP server that strips unknown keys reports them in
// $mcp_ignored_keys. It returns the ignored key paths, control characters masked as '?',
// sorted, at most 20, and the total number of ignored keys before the cap.
//
// Rules, applied at every object level:
//   - A key is declared when the schema's `properties` at that level has it. Parameters named
//     `required`, `properties`, `type` and so on are ordinary keys of `properties`.
//   - An undeclared key is ignored unless `additionalProperties` is true or a schema (then it is
//     accepted, and its value is checked against that schema).
//   - Below the top level, a value whose schema says nothing about keys (neither `properties`
//     nor `additionalProperties`, e.g. `{}` "any value" or a bare `{"type":"object"}`) is taken
//     whole: none of its keys is ignored. The top level is always the tool's parameter list:
//     an inputSchema of `{}` means "no parameters", so every key sent is ignored.
//   - anyOf / oneOf / allOf alternatives are merged: a key is declared when any alternative
//     declares it.
//   - The diff recurses into declared object properties and into arrays (items by index), so
//     paths look like `filters.groups.0.rollout`; an ignored key's own value is not inspected.
func ignoredKeys(schema, args map[string]any) (paths []string, total int) {
	diffObject([]map[string]any{schema}, args, "", true, &paths)
	total = len(paths)
	for i, p := range paths {
		paths[i] = maskControl(p)
	}
	sort.Strings(paths)
	if len(paths) > maxIgnoredKeys {
		paths = paths[:maxIgnoredKeys:maxIgnoredKeys]
	}
	return paths, total
}

// flatten returns the schemas with their anyOf/oneOf/allOf alternatives expanded (recursively).
func flatten(schemas []map[string]any) []map[string]any {
	var out []map[string]any
	var walk func(s map[string]any, depth int)
	walk = func(s map[string]any, depth int) {
		if s == nil || depth > 8 {
			return
		}
		out = append(out, s)
		for _, k := range [...]string{"anyOf", "oneOf", "allOf"} {
			alts, _ := s[k].([]any)
			for _, a := range alts {
				m, _ := a.(map[string]any)
				walk(m, depth+1)
			}
		}
	}
	for _, s := range schemas {
		walk(s, 0)
	}
	return out
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func diffValue(schemas []map[string]any, v any, path string, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		diffObject(schemas, v, path, false, out)
	case []any:
		var items []map[string]any
		for _, s := range flatten(schemas) {
			if it, ok := s["items"].(map[string]any); ok {
				items = append(items, it)
			}
		}
		if len(items) == 0 {
			return
		}
		for i, item := range v {
			diffValue(items, item, joinPath(path, strconv.Itoa(i)), out)
		}
	}
}

// diffObject appends obj's ignored key paths. top marks the arguments object itself, whose
// keys are the tool's parameters even when the schema lists none (`{}`: no parameters).
func diffObject(schemas []map[string]any, obj map[string]any, path string, top bool, out *[]string) {
	all := flatten(schemas)
	strict, allowed := top, false
	var additional []map[string]any
	for _, s := range all {
		if _, ok := s["properties"].(map[string]any); ok {
			strict = true
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if ap {
				allowed = true
			} else {
				strict = true
			}
		case map[string]any:
			allowed = true
			additional = append(additional, ap)
		}
	}
	if !strict && !allowed {
		return // free-form object
	}
	for key, val := range obj {
		var sub []map[string]any
		for _, s := range all {
			props, _ := s["properties"].(map[string]any)
			if ps, ok := props[key].(map[string]any); ok {
				sub = append(sub, ps)
			}
		}
		switch {
		case len(sub) > 0:
			diffValue(sub, val, joinPath(path, key), out)
		case allowed:
			if len(additional) > 0 {
				diffValue(additional, val, joinPath(path, key), out)
			}
		default:
			*out = append(*out, joinPath(path, key))
		}
	}
}

// maskControl replaces C0 and C1 control characters, DEL and the line separators U+2028 and
// U+2029 with '?', as MCP servers do before they report ignored keys (DESIGN.md §2). Written
// here rather than borrowed from ingest so the generator's expectations stay independent.
func maskControl(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) || r == 0x2028 || r == 0x2029 {
			return '?'
		}
		return r
	}, s)
}
