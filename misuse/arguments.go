package misuse

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// MaxDepth is how deep FromArguments follows nested arguments; deeper arguments are not
// measurable (ReasonArgumentsTooDeep). The SDK cuts at depth 10 (counted from
// $mcp_parameters), so its events never get near it.
const MaxDepth = 64

// FromArguments derives the ignored keys of one call from its arguments (a JSON object, as
// $mcp_parameters.request.params.arguments holds it) and the tool's served input schema.
//
// A key is declared by a schema when its `properties` names it, a `patternProperties`
// expression matches it, or `additionalProperties` (or `unevaluatedProperties`) is true or a
// schema; through `$ref`, `allOf`, `anyOf` and `oneOf` a key is declared when any applicable
// schema declares it, so a key is reported only when no branch declares it. A schema that
// enumerates no keys at all (no `properties`, `patternProperties` or `additionalProperties`,
// e.g. {"type":"object"} or {}) admits any key, and what is below it is not examined. Unlike
// validation, an absent `additionalProperties` does not declare other keys: a tool whose
// schema lists its properties drops the others (Zod's default, pydantic's default), and those
// are exactly the keys to report. An undeclared key is reported once, by its path; what is
// below it is not examined. Array items are checked against `prefixItems`/`items` and named by
// index ("series.0.math").
//
// Not measurable (IgnoredKeys.Source is SourceNotMeasurable) when s is nil (ReasonNoSchema),
// the schema could not be compiled, its root is a union (ReasonRootUnion), the arguments carry
// the SDK's truncation markers where a key could hide (ReasonArgumentsTruncated), a redacted
// value where the schema admits an object or array (ReasonArgumentsRedacted), or reach a part
// of the schema the SDK cut (ReasonSchemaTruncated). Arguments that are absent or JSON null
// are an empty object; any other non-object is ReasonArgumentsInvalid.
func FromArguments(s *Schema, arguments []byte) IgnoredKeys {
	if r := s.unusable(); r != "" {
		return notMeasurable(r)
	}
	if len(bytes.TrimSpace(arguments)) == 0 {
		return IgnoredKeys{Source: SourceSchema}
	}
	w := getWalker(arguments, false)
	defer putWalker(w)
	return w.arguments(s)
}

// FromParameters is FromArguments on the arguments inside $mcp_parameters, the SDK's capture
// of the whole tools/call request ({"request":{"method","params":{"name","arguments"},...}}).
// A missing or null $mcp_parameters (or one without a request) is ReasonNoArguments; a request
// or params the SDK cut is ReasonArgumentsTruncated; params without arguments are an empty
// object (the agent sent none).
func FromParameters(s *Schema, parameters []byte) IgnoredKeys {
	return fromParameters(s, parameters, false)
}

// fromParameters is FromParameters; valid says parameters is valid JSON (Call.Valid).
func fromParameters(s *Schema, parameters []byte, valid bool) IgnoredKeys {
	if bytes.Contains(parameters, quotedValidated) && validatedArguments(parameters) {
		return notMeasurable(ReasonArgumentsValidated)
	}
	if r := s.unusable(); r != "" {
		return notMeasurable(r)
	}
	trimmed := bytes.TrimSpace(parameters)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return notMeasurable(ReasonNoArguments)
	}
	w := getWalker(trimmed, valid)
	defer putWalker(w)
	for _, name := range [...]string{"request", "params", "arguments"} {
		found, reason := w.member(name)
		switch {
		case reason != "":
			return notMeasurable(reason)
		case !found && name == "arguments":
			return IgnoredKeys{Source: SourceSchema} // the agent sent no arguments
		case !found && name == "request":
			return notMeasurable(ReasonNoArguments)
		case !found:
			return notMeasurable(ReasonArgumentsInvalid)
		}
	}
	return w.arguments(s)
}

// quotedValidated is MarkerArgumentsValidated as a JSON string.
var quotedValidated = []byte(`"` + MarkerArgumentsValidated + `"`)

// validatedArguments reports whether request.params.arguments of parameters is
// MarkerArgumentsValidated (the marker anywhere else, an agent's value, does not count).
func validatedArguments(parameters []byte) bool {
	w := getWalker(bytes.TrimSpace(parameters), false)
	defer putWalker(w)
	for _, name := range [...]string{"request", "params", "arguments"} {
		if found, reason := w.member(name); !found || reason != "" {
			return false
		}
	}
	v, err := w.dec.ReadValue()
	return err == nil && bytes.Equal(v, quotedValidated)
}

// unusable says why s cannot derive anything ("" when it can).
func (s *Schema) unusable() Reason {
	switch {
	case s == nil:
		return ReasonNoSchema
	case s.failed != "":
		return s.failed
	}
	root := s.root.view()
	switch {
	case root.opaque != "":
		return root.opaque
	case root.union:
		return ReasonRootUnion
	}
	return ""
}

// member moves the decoder, positioned before a JSON object, to the value of its first
// member named name.
func (w *walker) member(name string) (bool, Reason) {
	switch w.dec.PeekKind() {
	case '{':
	case '"':
		if v, err := w.dec.ReadValue(); err == nil && isCutMarkerValue(v) {
			return false, ReasonArgumentsTruncated
		}
		return false, ReasonArgumentsInvalid
	default:
		return false, ReasonArgumentsInvalid
	}
	if err := w.dec.ReadDelim(); err != nil {
		return false, ReasonArgumentsInvalid
	}
	for w.dec.PeekKind() == '"' {
		k, err := w.name()
		if err != nil {
			return false, ReasonArgumentsInvalid
		}
		if string(k) == name {
			return true, ""
		}
		if err := w.dec.SkipValue(); err != nil {
			return false, ReasonArgumentsInvalid
		}
	}
	return false, ""
}

// arguments walks the arguments value the decoder is positioned at.
func (w *walker) arguments(s *Schema) IgnoredKeys {
	switch w.dec.PeekKind() {
	case '{':
	case 'n':
		return IgnoredKeys{Source: SourceSchema}
	case '"':
		if v, err := w.dec.ReadValue(); err == nil && isCutMarkerValue(v) {
			return notMeasurable(ReasonArgumentsTruncated)
		}
		return notMeasurable(ReasonArgumentsInvalid)
	default:
		return notMeasurable(ReasonArgumentsInvalid)
	}
	w.ctx[0] = s.root
	if err := w.value('{', w.ctx[:1], 0); err != nil {
		var stop stopError
		if errors.As(err, &stop) {
			return notMeasurable(Reason(stop))
		}
		return notMeasurable(ReasonArgumentsInvalid)
	}
	var keys []string
	if len(w.keys.keys) > 0 {
		keys = append([]string(nil), w.keys.keys...)
	}
	return IgnoredKeys{Keys: keys, Total: w.keys.total, Source: SourceSchema}
}

// Quoted forms of the markers, compared with raw JSON strings (the markers need no escaping).
var (
	quotedCutMarkers = [...]string{`"` + markerObject + `"`, `"` + markerArray + `"`, `"` + markerBreadth + `"`, `"` + markerCircular + `"`}
	quotedRedacted   = `"` + markerRedacted + `"`
	quotedBreadthKey = `"` + breadthKey + `"`
)

// isCutMarkerValue reports whether a raw JSON value is one of the SDK's truncation markers.
func isCutMarkerValue(v []byte) bool {
	for _, m := range quotedCutMarkers {
		if string(v) == m {
			return true
		}
	}
	return false
}

// stopError ends a walk with a not-measurable reason.
type stopError Reason

func (e stopError) Error() string { return string(e) }

// walker walks one arguments document with a pooled decoder and scratch space.
type walker struct {
	dec     tokens // checked or &bounds
	checked checked
	bounds  boundaries
	keys    keyList
	// path is the dotted path of the current position ("" at the root); ends[i] is where the
	// path of depth i+1 ends in it.
	path []byte
	ends []int
	ctx  []*rule
	// scratch holds the rule lists of the levels being walked: 2*depth for the rules that
	// apply to the value at depth, 2*depth+1 for the children of its current member.
	scratch [][]*rule
	// unquoted holds a member name that needed unescaping.
	unquoted []byte
}

var walkers = sync.Pool{New: func() any {
	return &walker{checked: checked{jsontext.NewDecoder(bytes.NewReader(nil))}, ctx: make([]*rule, 1)}
}}

// getWalker returns a walker positioned before doc; valid says doc is valid JSON.
func getWalker(doc []byte, valid bool) *walker {
	w := walkers.Get().(*walker)
	if valid {
		w.bounds.reset(doc)
		w.dec = &w.bounds
	} else {
		// A bytes.Buffer is read in place (no copy); the document is never written to.
		w.checked.dec.Reset(bytes.NewBuffer(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
		w.dec = w.checked
	}
	w.keys = keyList{keys: w.keys.keys[:0]}
	w.path = w.path[:0]
	w.ends = w.ends[:0]
	return w
}

func putWalker(w *walker) {
	w.checked.dec.Reset(bytes.NewReader(nil)) // drop the document
	w.bounds.reset(nil)
	w.dec = nil
	walkers.Put(w)
}

// level returns the scratch slice i, emptied.
func (w *walker) level(i int) []*rule {
	for len(w.scratch) <= i {
		w.scratch = append(w.scratch, make([]*rule, 0, 4))
	}
	return w.scratch[i][:0]
}

// name reads a member name, unescaped. The bytes are valid until the next read.
func (w *walker) name() ([]byte, error) {
	raw, err := w.dec.ReadValue()
	if err != nil {
		return nil, err
	}
	if len(raw) < 2 || raw[0] != '"' {
		return nil, errors.New("not a member name")
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw[1 : len(raw)-1], nil
	}
	w.unquoted, err = jsontext.AppendUnquote(w.unquoted[:0], raw)
	return w.unquoted, err
}

// push appends a path segment; pop removes it.
func (w *walker) push(seg []byte) {
	if len(w.path) > 0 || len(w.ends) > 0 {
		w.path = append(w.path, '.')
	}
	w.path = append(w.path, seg...)
	w.ends = append(w.ends, len(w.path))
}

func (w *walker) pushIndex(i int) {
	if len(w.path) > 0 || len(w.ends) > 0 {
		w.path = append(w.path, '.')
	}
	w.path = strconv.AppendInt(w.path, int64(i), 10)
	w.ends = append(w.ends, len(w.path))
}

func (w *walker) pop() {
	w.ends = w.ends[:len(w.ends)-1]
	if len(w.ends) == 0 {
		w.path = w.path[:0]
		return
	}
	w.path = w.path[:w.ends[len(w.ends)-1]]
}

// lastSegment is the member name (or index) that led to the current value.
func (w *walker) lastSegment() []byte {
	if len(w.ends) == 0 {
		return nil
	}
	start := 0
	if len(w.ends) > 1 {
		start = w.ends[len(w.ends)-2] + 1
	}
	return w.path[start:]
}

// report records the undeclared key k below the current path.
func (w *walker) report(k []byte) {
	var b strings.Builder
	b.Grow(len(w.path) + 1 + len(k))
	b.Write(w.path)
	if len(w.ends) > 0 {
		b.WriteByte('.')
	}
	b.Write(k)
	w.keys.add(b.String())
}

// value walks the next value, of kind (the decoder's PeekKind), which the rules ctx apply to.
func (w *walker) value(kind jsontext.Kind, ctx []*rule, depth int) error {
	switch kind {
	case '{':
		if depth >= MaxDepth {
			return stopError(ReasonArgumentsTooDeep)
		}
		return w.object(ctx, depth)
	case '[':
		if depth >= MaxDepth {
			return stopError(ReasonArgumentsTooDeep)
		}
		return w.array(ctx, depth)
	case '"':
		v, err := w.dec.ReadValue()
		if err != nil {
			return err
		}
		switch {
		case isCutMarkerValue(v):
			return stopError(ReasonArgumentsTruncated)
		case string(v) == quotedRedacted && sensitiveKeyRE.Match(w.lastSegment()) && mayHoldKeys(ctx):
			return stopError(ReasonArgumentsRedacted)
		}
		return nil
	default:
		return w.dec.SkipValue()
	}
}

// gathered is what applies at one position, flattened over the rules that reach it.
type gathered struct {
	members []*rule
	opaque  Reason
	objOpen bool
	arrOpen bool
	cut     bool
}

func gather(ctx []*rule, buf []*rule) gathered {
	g := gathered{members: buf}
	for _, r := range ctx {
		v := r.view()
		if v.opaque != "" && g.opaque == "" {
			g.opaque = v.opaque
		}
		g.objOpen = g.objOpen || v.objOpen
		g.arrOpen = g.arrOpen || v.arrOpen
		g.cut = g.cut || v.cut
		for _, m := range v.members {
			if !containsRule(g.members, m) {
				g.members = append(g.members, m)
			}
		}
	}
	return g
}

func (w *walker) object(ctx []*rule, depth int) error {
	if err := w.dec.ReadDelim(); err != nil { // '{'
		return err
	}
	g := gather(ctx, w.level(2*depth))
	w.scratch[2*depth] = g.members[:0]
	enumerates := false
	for _, m := range g.members {
		if m.objKeys {
			enumerates = true
			break
		}
	}
	switch {
	case g.opaque != "":
		return stopError(g.opaque)
	case g.objOpen || !enumerates:
		// Any key is admitted here and nothing below is constrained.
		return w.skipRest('}')
	}
	for w.dec.PeekKind() == '"' {
		k, err := w.name()
		if err != nil {
			return err
		}
		children := w.level(2*depth + 1)
		declared, unknown := false, Reason("")
		for _, m := range g.members {
			if !m.objKeys {
				continue
			}
			matched := false
			if c, ok := m.props[string(k)]; ok {
				matched = true
				children = append(children, c)
			}
			for _, p := range m.patterns {
				if p.match(k) {
					matched = true
					children = append(children, p.r)
				}
			}
			if !matched && m.extra != nil {
				matched = true
				children = append(children, m.extra)
			}
			switch {
			case matched:
			case m.cut:
				unknown = ReasonSchemaTruncated
			case m.badRegex && unknown == "":
				unknown = ReasonSchemaUnsupported
			}
			declared = declared || matched
		}
		w.scratch[2*depth+1] = children[:0]
		// The SDK's "..." key (value "[MaxProperties ~]") stands for the keys it cut.
		if string(k) == breadthKey {
			if w.dec.PeekKind() == '"' {
				v, err := w.dec.ReadValue()
				if err != nil {
					return err
				}
				if isCutMarkerValue(v) {
					return stopError(ReasonArgumentsTruncated)
				}
				if !declared {
					w.report([]byte(breadthKey))
				}
				continue
			}
		}
		switch {
		case declared:
			w.push(k)
			err := w.value(w.dec.PeekKind(), children, depth+1)
			w.pop()
			if err != nil {
				return err
			}
		case unknown != "":
			return stopError(unknown)
		case g.cut:
			return stopError(ReasonSchemaTruncated)
		default:
			w.report(k)
			if err := w.dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	err := w.dec.ReadDelim() // '}'
	return err
}

func (w *walker) array(ctx []*rule, depth int) error {
	if err := w.dec.ReadDelim(); err != nil { // '['
		return err
	}
	g := gather(ctx, w.level(2*depth))
	w.scratch[2*depth] = g.members[:0]
	constrains := false
	for _, m := range g.members {
		if m.arrKeys {
			constrains = true
			break
		}
	}
	switch {
	case g.opaque != "":
		// Items of unknown schema: scalars are harmless, containers are not.
		for k := w.dec.PeekKind(); k != ']'; k = w.dec.PeekKind() {
			if k == '{' || k == '[' {
				return stopError(g.opaque)
			}
			if err := w.scalarItem(); err != nil {
				return err
			}
		}
		err := w.dec.ReadDelim()
		return err
	case g.arrOpen || !constrains:
		return w.skipRest(']')
	}
	for i := 0; ; i++ {
		next := w.dec.PeekKind()
		if next == ']' || next == 0 {
			break
		}
		children := w.level(2*depth + 1)
		for _, m := range g.members {
			if !m.arrKeys {
				continue
			}
			switch {
			case i < len(m.prefix):
				children = append(children, m.prefix[i])
			case m.items != nil:
				children = append(children, m.items)
			case m.cut:
				if next == '{' || next == '[' {
					return stopError(ReasonSchemaTruncated)
				}
			}
		}
		w.scratch[2*depth+1] = children[:0]
		if len(children) == 0 {
			if err := w.scalarItem(); err != nil {
				return err
			}
			continue
		}
		w.pushIndex(i)
		err := w.value(next, children, depth+1)
		w.pop()
		if err != nil {
			return err
		}
	}
	err := w.dec.ReadDelim() // ']'
	return err
}

// scalarItem skips an array item that no schema constrains, noticing the SDK's breadth marker.
func (w *walker) scalarItem() error {
	if w.dec.PeekKind() == '"' {
		v, err := w.dec.ReadValue()
		if err != nil {
			return err
		}
		if isCutMarkerValue(v) {
			return stopError(ReasonArgumentsTruncated)
		}
		return nil
	}
	return w.dec.SkipValue()
}

// skipRest skips the rest of an object or array whose keys and items nothing constrains. A
// cut below a position that admits anything hides nothing this walk would report.
func (w *walker) skipRest(end jsontext.Kind) error {
	for {
		switch w.dec.PeekKind() {
		case end:
			err := w.dec.ReadDelim()
			return err
		case 0:
			err := w.dec.ReadDelim()
			if err == nil {
				err = errors.New("unexpected end")
			}
			return err
		}
		if err := w.dec.SkipValue(); err != nil {
			return err
		}
	}
}

// mayHoldKeys reports whether a redacted value at a position the rules ctx apply to could
// have been an object or an array (so the redaction could hide keys). The SDK redacts the
// value of every key named like a secret, and in the served schema the subschema of every
// property so named, so for such a key the type is never known: it is taken to be a scalar
// (a secret is a string), since a wrong guess there can only miss keys, never report one.
// A schema that does say it admits an object or an array is believed.
func mayHoldKeys(ctx []*rule) bool {
	if len(ctx) == 0 {
		return true
	}
	for _, r := range ctx {
		v := r.view()
		switch {
		case r.redacted:
		case v.opaque != "" || v.admitsObj || v.admitsArr:
			return true
		}
	}
	return false
}
