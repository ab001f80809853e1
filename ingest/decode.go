package ingest

import (
	"bytes"
	"encoding/binary"
	stdjson "encoding/json"
	"math/bits"
	"strconv"
	"sync"
	"unicode/utf8"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/segmentio/encoding/json"
)

// One pass over an event's bytes (scan.go) validates them and splits the properties object
// into keys and the positions of their values. Values are decoded from those positions when a
// kind reads them; properties are never decoded into a map and never re-encoded.

// pair is one property of the properties object: offsets, no pointers, so that appending
// pairs costs no write barriers while the garbage collector runs.
type pair struct {
	start    int // offset in the properties object of the key's opening quote
	keyEnd   int // offset just after the key's closing quote
	valStart int // the raw value is props[valStart:valEnd]
	valEnd   int
	// unquoted is the offset of the unescaped key in decodeState.keys, -1 when the key holds
	// no escape (it is then props[start+1:keyEnd-1]); unquotedEnd ends it.
	unquoted, unquotedEnd int
	arena                 int32 // offset of the value's content in decodeState.arena, -1 when not there
	flags                 uint8 // flagEscape, flagNonASCII of the value's strings
	loose                 bool  // whitespace between the key and the end of the value (outside strings)
	dropped               bool  // left out of Extra: read into a column, or repeated later
	// keyNonASCII: the key holds a byte >= 0x80.
	keyNonASCII bool
}

// key returns the pair's key, unescaped.
func (d *decodeState) key(p *pair) []byte {
	if p.unquoted >= 0 {
		return d.keys[p.unquoted:p.unquotedEnd]
	}
	return d.props[p.start+1 : p.keyEnd-1]
}

// value returns the pair's raw value, a sub-slice of the input.
func (d *decodeState) value(p *pair) []byte { return d.props[p.valStart:p.valEnd] }

// envelopeFields holds the raw values of the envelope's fields (nil when absent).
type envelopeFields struct {
	UUID       []byte
	Event      []byte
	DistinctID []byte
	Timestamp  []byte
	Properties []byte
}

// decodeState is the scratch space of one Parse, pooled.
type decodeState struct {
	top      envelopeFields
	topFlags [fieldProperties + 1]uint8 // the flags of each envelope field's value
	props    []byte                     // the properties object, when it is one
	pairs    []pair
	keys     []byte // the unescaped keys of the pairs whose keys hold an escape
	// slots holds, for each known property key, the index in pairs of its last pair plus
	// one (0 when absent).
	slots [maxPropKeys]int32
	// unknown holds the indices of the pairs whose keys are not known keys.
	unknown []int32
	stack   []byte // open containers while scanning (scanContainer)
	// arena holds the content of every plain string value a kind reads, and distinct_id's,
	// in one allocation: the event's strings are slices of it.
	arena    string
	problems ValidationError
	reader   propertyReader // handed to a kind's decode (a pointer into d costs no allocation)
}

var decodeStates = sync.Pool{New: func() any { return new(decodeState) }}

func getDecodeState() *decodeState { return decodeStates.Get().(*decodeState) }

func putDecodeState(d *decodeState) {
	d.keys = d.keys[:0]
	d.top, d.topFlags, d.props, d.pairs, d.arena = envelopeFields{}, [fieldProperties + 1]uint8{}, nil, d.pairs[:0], ""
	d.problems.Problems = d.problems.Problems[:0]
	d.reader = propertyReader{}
	decodeStates.Put(d)
}

// skipSpace returns the offset of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' { // the common case, inlined
		return i
	}
	return skipSpaces(b, i)
}

func skipSpaces(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the offset just after the well-formed JSON string starting at b[i]. Only
// '"' and '\\' matter when skipping, eight bytes at a time as scanString does: a lane is
// flagged when it holds either, and the lowest flagged lane is exact (a borrow between lanes
// only flags lanes above a flagged one).
func skipString(b []byte, i int) int {
	for i++; i+8 <= len(b); {
		x := binary.LittleEndian.Uint64(b[i:])
		q, s := x^lanes1*'"', x^lanes1*'\\' // a zero lane where the byte is '"' or '\\'
		m := (((q - lanes1) &^ q) | ((s - lanes1) &^ s)) & lanesTop
		if m == 0 {
			i += 8
			continue
		}
		if i += bits.TrailingZeros64(m) >> 3; b[i] == '"' {
			return i + 1
		}
		i += 2 // the backslash and the escaped byte; a \uXXXX escape's hex digits hold no quote
	}
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
	return len(b)
}

// skipValue returns the offset just after the well-formed JSON value starting at b[i], and
// whether it holds whitespace outside its strings.
func skipValue(b []byte, i int) (end int, loose bool) {
	switch b[i] {
	case '"':
		return skipString(b, i), false
	case '{', '[':
	default: // a number or a literal
		for i < len(b) {
			switch b[i] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return i, false
			}
			i++
		}
		return i, false
	}
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i = skipString(b, i)
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, loose
			}
		case ' ', '\t', '\n', '\r':
			loose = true
		}
		i++
	}
	return i, loose
}

// unquote returns the content of a well-formed JSON string, unescaped (sharing b when it has
// no escape).
func unquote(b []byte) []byte {
	inner := b[1 : len(b)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return inner
	}
	return json.RawValue(b).Unquote()
}

// jsonType names the JSON type of a value's first token, as encoding/json's errors do.
func jsonType(tok []byte) string {
	switch {
	case len(tok) == 0:
		return "nothing"
	case tok[0] == '[':
		return "array"
	case tok[0] == '"':
		return "string"
	case tok[0] == 'n':
		return "null"
	case tok[0] == 't' || tok[0] == 'f':
		return "bool"
	}
	return "number"
}

// last returns the last pair of the property named key (after match), or nil.
func (d *decodeState) last(key propKey) *pair {
	if i := d.slots[key]; i > 0 {
		return &d.pairs[i-1]
	}
	return nil
}

// match records the last pair of each known key in d.slots and marks every earlier copy of
// a repeated key as dropped.
func (d *decodeState) match() {
	clear(d.slots[:])
	d.unknown = d.unknown[:0]
	for i := range d.pairs {
		p := &d.pairs[i]
		key := d.key(p)
		if k, known := lookupPropKey(key); known {
			if prev := d.slots[k]; prev > 0 {
				d.pairs[prev-1].dropped = true
			}
			d.slots[k] = int32(i + 1)
			continue
		}
		for _, j := range d.unknown { // unknown keys are few: a scan beats a map
			if q := &d.pairs[j]; !q.dropped && bytes.Equal(d.key(q), key) {
				q.dropped = true
				break
			}
		}
		d.unknown = append(d.unknown, int32(i))
	}
}

// plain reports whether the pair's value is a JSON string whose content is its value (see
// plainString), from the flags the scan found.
func (d *decodeState) plain(p *pair) bool { return plainScanned(d.value(p), p.flags) }

// plainScanned is plainString of a scanned value, from its flags.
func plainScanned(raw []byte, flags uint8) bool {
	if len(raw) == 0 || raw[0] != '"' || flags&flagEscape != 0 {
		return false
	}
	return flags&flagNonASCII == 0 || utf8.Valid(raw[1:len(raw)-1])
}

// topPlain is plainString of an envelope field's value.
func (d *decodeState) topPlain(field int, raw []byte) bool {
	return plainScanned(raw, d.topFlags[field])
}

// buildArena copies the content of every plain string the kind k reads (after match), and
// of top (distinct_id's value), into d.arena, and returns top's offset there (-1 when it is not a
// plain string).
func (d *decodeState) buildArena(k *Kind, top []byte) int {
	topPlain := d.topPlain(fieldDistinctID, top)
	n := 0
	if topPlain {
		n += len(top) - 2
	}
	for reads := uint64(k.reads); reads != 0; reads &= reads - 1 {
		if i := d.slots[bits.TrailingZeros64(reads)]; i > 0 {
			if p := &d.pairs[i-1]; d.plain(p) {
				p.arena = 0 // a plain string: copied below
				n += p.valEnd - p.valStart - 2
			}
		}
	}
	if n == 0 {
		return -1
	}
	buf := make([]byte, 0, n)
	topOff := -1
	if topPlain {
		topOff = 0
		buf = append(buf, top[1:len(top)-1]...)
	}
	for reads := uint64(k.reads); reads != 0; reads &= reads - 1 {
		if i := d.slots[bits.TrailingZeros64(reads)]; i > 0 {
			if p := &d.pairs[i-1]; p.arena == 0 {
				p.arena = int32(len(buf))
				buf = append(buf, d.props[p.valStart+1:p.valEnd-1]...)
			}
		}
	}
	d.arena = unsafe.String(unsafe.SliceData(buf), len(buf)) // buf is never written again
	return topOff
}

// plainString reports whether raw is a JSON string whose content is its value: no escape,
// valid UTF-8 (control characters cannot occur in valid JSON).
func plainString(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '"' {
		return false
	}
	inner := raw[1 : len(raw)-1]
	for _, c := range inner {
		if c == '\\' {
			return false
		}
		if c >= utf8.RuneSelf {
			return bytes.IndexByte(inner, '\\') < 0 && utf8.Valid(inner)
		}
	}
	return true
}

// extra renders the pairs not dropped as one compact JSON object.
func (d *decodeState) extra() json.RawMessage {
	n := 2
	for i := range d.pairs {
		if p := &d.pairs[i]; !p.dropped {
			n += p.keyEnd - p.start + p.valEnd - p.valStart + 2
		}
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	first := true
	for i := range d.pairs {
		p := &d.pairs[i]
		if p.dropped {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		key, value := d.props[p.start:p.keyEnd], d.value(p)
		switch {
		case (p.keyNonASCII || p.flags&flagNonASCII != 0) && (!utf8.Valid(key) || !utf8.Valid(value)):
			b = appendReencoded(b, d.key(p), value)
		case p.loose:
			b = append(b, key...)
			b = append(b, ':')
			buf := bytes.NewBuffer(b)
			_ = stdjson.Compact(buf, value) // valid (checked while decoding); encoding/json keeps < > & as they are
			b = buf.Bytes()
		default:
			b = append(b, key...)
			b = append(b, ':')
			b = append(b, value...)
		}
	}
	return append(b, '}')
}

// appendReencoded appends a pair holding invalid UTF-8 decoded and encoded again by
// encoding/json, which turns each invalid byte into U+FFFD.
func appendReencoded(b, rawKey, value []byte) []byte {
	var v any
	_ = stdjson.Unmarshal(value, &v) // valid: checked by the scan
	key, _ := stdjson.Marshal(string(rawKey))
	val, err := stdjson.Marshal(v)
	if err != nil {
		val = []byte("null")
	}
	b = append(b, key...)
	b = append(b, ':')
	return append(b, val...)
}

// stringValue decodes a raw JSON string. It returns ("", true) for an absent or null value
// and ok false for any other JSON type. Invalid UTF-8 and unpaired surrogate escapes decode to
// U+FFFD, as encoding/json decodes them: jsontext.AppendUnquote decodes a string of valid
// UTF-8 and valid escapes, and json.Unmarshal, whose replacement rules differ, the rest.
func stringValue(raw []byte) (s string, ok bool) {
	if isNull(raw) {
		return "", true
	}
	if raw[0] != '"' {
		return "", false
	}
	if plainString(raw) {
		return string(raw[1 : len(raw)-1]), true
	}
	if b, err := jsontext.AppendUnquote(nil, raw); err == nil {
		return unsafe.String(unsafe.SliceData(b), len(b)), true // b is never written again
	}
	var decoded string // only this path takes an address: s itself stays off the heap
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return "", false
	}
	return decoded, true
}

// timestampText is stringValue of the envelope's timestamp. A plain string is not copied: the
// text is only parsed (time.Parse keeps nothing of it) and quoted into errors (a copy).
func (d *decodeState) timestampText() (string, bool) {
	if raw := d.top.Timestamp; d.topPlain(fieldTimestamp, raw) {
		return unsafe.String(unsafe.SliceData(raw[1:]), len(raw)-2), true
	}
	return stringValue(d.top.Timestamp)
}

// numberValue decodes a raw finite JSON number; ok false for another JSON type.
func numberValue(raw []byte) (float64, bool) {
	if len(raw) == 0 || (raw[0] != '-' && (raw[0] < '0' || raw[0] > '9')) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil // a number beyond float64 is an error (ErrRange)
}

// isNull reports whether a raw value is absent or JSON null.
func isNull(raw []byte) bool { return len(raw) == 0 || (len(raw) == 4 && string(raw) == "null") }

// arrayItems returns the raw items of a raw, well-formed JSON array; ok is false when raw is
// not an array.
func arrayItems(raw []byte) (items [][]byte, ok bool) {
	if len(raw) == 0 || raw[0] != '[' {
		return nil, false
	}
	for i := skipSpace(raw, 1); i < len(raw) && raw[i] != ']'; {
		end, _ := skipValue(raw, i)
		items = append(items, raw[i:end])
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return items, true
}

// stringContent returns the bytes between the quotes of a raw JSON string (nil otherwise).
func stringContent(raw []byte) []byte {
	if len(raw) < 2 || raw[0] != '"' {
		return nil
	}
	return raw[1 : len(raw)-1]
}
