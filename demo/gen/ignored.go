package gen

import (
	"sort"
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
	walkServed([]any{schema}, args, "", true, &paths) // a schema of the corpus holds no SDK marker
	return capKeys(paths)
}

// capKeys gives ignored key paths as $mcp_ignored_keys lists them: control characters masked
// as '?', sorted, at most maxIgnoredKeys; total is their number before the cap.
func capKeys(paths []string) (keys []string, total int) {
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

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
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
