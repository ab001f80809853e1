package schemacheck

// Nested description coverage, the schema ratchet's definitions:
//
//	"PostHog's definition, computed on the schema as served, without injection, pooled over
//	all tools: walk each schema's `properties` map; every entry below the top level counts as
//	one nested property, described when its schema has a non-empty string `description`;
//	recurse into each entry's schema one level deeper; walk `anyOf`/`oneOf`/`allOf` branches
//	and an object-valued `items` at the same depth. The keys of a `properties` map are
//	parameter names, never keywords [...]. Boolean schemas and `$ref` entries count as
//	undescribed unless they carry a description. [...] Also report, as a separate figure, a
//	*full* coverage that additionally walks object-valued `additionalProperties`,
//	`patternProperties`, array-valued `items`/`prefixItems` and `$ref` targets (once each,
//	cycles safe)."
//
// How depth works. walk(schema, d) looks at schema's `properties` map. Each entry of that map
// is a property at depth d; entries at depth >= 1 are counted (depth 0 is the tool's own,
// top-level parameters). Each entry's schema is then walked at d+1. The branches of
// anyOf/oneOf/allOf and an object-valued `items` describe the same value as the schema that
// holds them, so they are walked at d, not d+1. The root is walked at depth 0.
//
// Worked example:
//
//	{                                           walk(root, 0)
//	  "properties": {
//	    "query": {                              depth 0: top level, not counted
//	      "type": "object",                     walk(query, 1)
//	      "properties": {
//	        "kind":  {"description": "..."},    depth 1: counted, isDescribed
//	        "series": {                         depth 1: counted, undescribed
//	          "type": "array",                  walk(series, 2)
//	          "items": {                        object items: walk(items, 2), same depth
//	            "anyOf": [                      branches: walk(branch, 2), same depth
//	              {"properties": {
//	                "event": {"type": "string"} depth 2: counted, undescribed
//	              }}
//	            ]
//	          }
//	        },
//	        "required": {"type": "boolean"}     depth 1: a parameter NAMED "required":
//	      }                                     counted like any other, undescribed
//	    }
//	  }
//	}
//
// This schema has 4 nested properties (kind, series, event, required), 1 described: 25%.
//
// The full walk adds, on top of the above: an object-valued `additionalProperties` and every
// value of a `patternProperties` map, walked at d+1 like the schema of a `properties` entry
// (they describe the values of the keys of the object at hand, but are not named parameters,
// so they are not themselves counted); every element of an array-valued `items` and of
// `prefixItems`, walked at d (like object-valued `items`); and the target of a local `$ref`,
// walked at d (the reference stands for the target), each target at most once per tool, so
// recursive schemas terminate and a definition used by ten properties is counted once.
// ("Once" is per depth class: what a walk counts depends only on whether it starts at depth 0
// or deeper, so a target reached both at depth 0, e.g. from a root anyOf branch, and below
// it is walked once for each, and the figure does not depend on the order of the keys.)

// covCounts counts nested properties and the described ones among them.
type covCounts struct {
	nested, described int
}

// maxWalkFrames bounds the recursion of one walk. Input nesting is already bounded by
// maxNesting; following $ref targets can chain further, so the walks stop here and report
// the schema as too deep instead of recursing without bound.
const maxWalkFrames = 4 * maxNesting

// covWalker computes the basic or the full coverage of one schema.
type covWalker struct {
	full     bool
	sdkCut   bool // a snapshot the SDK cut: its marker entries are left out of the counts
	refs     *refResolver
	visited  map[refVisit]bool // $ref targets already walked (full walk)
	c        covCounts
	tooDeep  bool
	frameCap int
}

// refVisit identifies one walk of a $ref target: the target, and whether it was walked at
// depth 0 (where its own properties are top-level parameters) or deeper.
type refVisit struct {
	target *jsValue
	top    bool
}

// isDescribed reports whether a property's schema has a non-empty string description. A
// boolean schema, a $ref entry without a sibling description and any non-object value are
// undescribed.
func isDescribed(v *jsValue) bool {
	d := v.get("description")
	return d != nil && d.kind == jsString && d.str != ""
}

// nestedCoverage returns the basic and the full coverage of a parsed schema, and whether a
// walk was cut short by maxWalkFrames.
//
// In a snapshot the SDK cut (sdkCut), a property whose schema the SDK replaced with a marker
// ("[Object]", "[redacted]", ...) is left out of both counts: whether it had a description is
// unknown, and what was below it is not there to count.
func nestedCoverage(root *jsValue, refs *refResolver, sdkCut bool) (basic, full covCounts, tooDeep bool) {
	b := covWalker{frameCap: maxWalkFrames, sdkCut: sdkCut}
	b.walk(root, 0, 0)
	f := covWalker{full: true, refs: refs, frameCap: maxWalkFrames, sdkCut: sdkCut}
	f.walk(root, 0, 0)
	return b.c, f.c, b.tooDeep || f.tooDeep
}

func (w *covWalker) walk(v *jsValue, depth, frames int) {
	if !v.isObject() {
		return // boolean schemas and non-schemas have no properties to walk
	}
	if frames > w.frameCap {
		w.tooDeep = true
		return
	}
	frames++
	// Look up the keywords by scanning the schema's own keys once. A properties map's keys
	// are never looked at here: they are names (see the loop over props.obj below).
	var props, items, addl, patt, ref, prefix *jsValue
	for _, m := range v.obj {
		switch m.key {
		case "properties":
			props = m.val
		case "anyOf", "oneOf", "allOf":
			if m.val.kind == jsArray {
				for _, br := range m.val.arr {
					w.walk(br, depth, frames)
				}
			}
		case "items":
			items = m.val
		case "additionalProperties":
			addl = m.val
		case "patternProperties":
			patt = m.val
		case "prefixItems":
			prefix = m.val
		case "$ref":
			ref = m.val
		}
	}
	if props.isObject() {
		for _, m := range props.obj {
			if w.sdkCut && isSDKMarker(m.val) {
				continue
			}
			if depth >= 1 {
				w.c.nested++
				if isDescribed(m.val) {
					w.c.described++
				}
			}
			w.walk(m.val, depth+1, frames)
		}
	}
	if items.isObject() {
		w.walk(items, depth, frames)
	}
	if !w.full {
		return
	}
	if items != nil && items.kind == jsArray {
		for _, el := range items.arr {
			w.walk(el, depth, frames)
		}
	}
	if prefix != nil && prefix.kind == jsArray {
		for _, el := range prefix.arr {
			w.walk(el, depth, frames)
		}
	}
	if addl.isObject() {
		w.walk(addl, depth+1, frames)
	}
	if patt.isObject() {
		for _, m := range patt.obj {
			w.walk(m.val, depth+1, frames)
		}
	}
	if ref != nil && ref.kind == jsString && w.refs != nil {
		target, _ := w.refs.resolve(ref.str)
		key := refVisit{target: target, top: depth == 0}
		if target != nil && !w.visited[key] {
			if w.visited == nil {
				w.visited = make(map[refVisit]bool)
			}
			w.visited[key] = true
			w.walk(target, depth, frames)
		}
	}
}
