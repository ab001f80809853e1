// Package schemacheck checks the tool schemas an MCP server serves against the schema
// ratchets: serialized size against the client limit, nested description
// coverage, tool-name rules and structural problems. The check itself (Check, in schema.go,
// inject.go, coverage.go, names.go, problems.go and check.go) is pure: it takes tools already
// fetched and does no I/O; fetching tools from a server or files is the loader's job.
//
// The figures follow the schema ratchet's definitions, which are the contract:
//
//   - Serialized size: the length in UTF-16 code units (JavaScript's String.length) of
//     JSON.stringify(inputSchema), compact, `$schema` kept, measured after the analytics
//     context injection. See SerializedSize and InjectContext.
//   - Oversized: serialized size >= char_limit (default 16,384).
//   - Nested description coverage: PostHog's definition, on the schema as served (no
//     injection), pooled over all tools. See coverage.go.
//   - Tool names: see names.go.
//   - Structural problems: see problems.go.
//   - Ratchets: see Check.
//
// This file holds the JSON model: a parser that keeps what JSON.parse keeps (object key
// order, the last value of a repeated key at the position of its first occurrence, lone
// UTF-16 surrogates from \u escapes, float64 numbers) and a writer that produces exactly
// the text JSON.stringify produces for the parsed value, so that sizes are JS-exact.
package schemacheck

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxNesting bounds how deeply arrays and objects may nest in one input schema. Deeper
// input is rejected with an error (reported as a structural problem by Check), so no walk
// in this package can recurse without bound. Real schemas nest a few dozen levels.
const maxNesting = 1000

// jsKind is the type of a parsed JSON value.
type jsKind uint8

const (
	jsNull jsKind = iota
	jsFalse
	jsTrue
	jsNumber
	jsString
	jsArray
	jsObject
)

// jsValue is one parsed JSON value, shaped like the value JSON.parse returns.
//
// Strings (str, and member keys) are stored as WTF-8: valid UTF-8, except that a lone
// UTF-16 surrogate that came from a \uD800-\uDFFF escape with no partner is stored as its
// 3-byte generalized UTF-8 form (0xED 0xA0-0xBF 0x80-0xBF). Invalid UTF-8 in the input has
// already been replaced by U+FFFD (WHATWG decoding, which is what a JavaScript client that
// decodes the bytes as UTF-8 sees), so the 3-byte surrogate form is never ambiguous.
type jsValue struct {
	kind jsKind
	num  float64
	str  string
	arr  []*jsValue
	obj  []jsMember // insertion order of first occurrence; keys unique
}

type jsMember struct {
	key string
	val *jsValue
}

// get returns the value of key in an object, or nil.
func (v *jsValue) get(key string) *jsValue {
	if v == nil || v.kind != jsObject {
		return nil
	}
	for i := range v.obj {
		if v.obj[i].key == key {
			return v.obj[i].val
		}
	}
	return nil
}

// isObject reports whether v is a JSON object.
func (v *jsValue) isObject() bool { return v != nil && v.kind == jsObject }

// kindName names a value's JSON type for messages.
func (v *jsValue) kindName() string {
	if v == nil {
		return "nothing"
	}
	switch v.kind {
	case jsNull:
		return "null"
	case jsFalse, jsTrue:
		return "a boolean"
	case jsNumber:
		return "a number"
	case jsString:
		return "a string"
	case jsArray:
		return "an array"
	default:
		return "an object"
	}
}

// errTooDeep is returned for input nested deeper than maxNesting.
var errTooDeep = fmt.Errorf("JSON nests deeper than %d levels", maxNesting)

// parseJS parses one JSON text the way JSON.parse does. It accepts exactly the JSON grammar
// (RFC 8259 / ECMA-404: whitespace is space, tab, LF and CR; no BOM, no trailing commas,
// no comments) and rejects trailing non-whitespace.
func parseJS(text []byte) (*jsValue, error) {
	p := jsParser{s: string(text)}
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.i != len(p.s) {
		return nil, p.errorf("unexpected %s after the top-level value", p.what())
	}
	return v, nil
}

type jsParser struct {
	s string
	i int
}

func (p *jsParser) errorf(format string, args ...any) error {
	return fmt.Errorf("invalid JSON at offset %d: %s", p.i, fmt.Sprintf(format, args...))
}

// what describes the byte at the cursor for error messages.
func (p *jsParser) what() string {
	if p.i >= len(p.s) {
		return "end of input"
	}
	c := p.s[p.i]
	if c >= 0x20 && c < 0x7f {
		return strconv.QuoteRune(rune(c))
	}
	return fmt.Sprintf("byte 0x%02x", c)
}

func (p *jsParser) skipWS() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsParser) value(depth int) (*jsValue, error) {
	if p.i >= len(p.s) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return &jsValue{kind: jsString, str: s}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", jsTrue)
	case c == 'f':
		return p.literal("false", jsFalse)
	case c == 'n':
		return p.literal("null", jsNull)
	default:
		return nil, p.errorf("unexpected %s", p.what())
	}
}

func (p *jsParser) literal(word string, k jsKind) (*jsValue, error) {
	if len(p.s)-p.i < len(word) || p.s[p.i:p.i+len(word)] != word {
		return nil, p.errorf("unexpected %s", p.what())
	}
	p.i += len(word)
	return &jsValue{kind: k}, nil
}

func (p *jsParser) object(depth int) (*jsValue, error) {
	if depth > maxNesting {
		return nil, errTooDeep
	}
	p.i++ // '{'
	v := &jsValue{kind: jsObject}
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	var index map[string]int // built once an object has many keys
	for {
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return nil, p.errorf("expected a string key, found %s", p.what())
		}
		key, err := p.str()
		if err != nil {
			return nil, err
		}
		p.skipWS()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return nil, p.errorf("expected ':', found %s", p.what())
		}
		p.i++
		p.skipWS()
		val, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		// JSON.parse defines properties in order with CreateDataProperty: a repeated key
		// overwrites the value but keeps the position of its first definition.
		pos := -1
		if index != nil {
			if j, ok := index[key]; ok {
				pos = j
			}
		} else {
			for j := range v.obj {
				if v.obj[j].key == key {
					pos = j
					break
				}
			}
		}
		if pos >= 0 {
			v.obj[pos].val = val
		} else {
			v.obj = append(v.obj, jsMember{key: key, val: val})
			if index != nil {
				index[key] = len(v.obj) - 1
			} else if len(v.obj) > 16 {
				index = make(map[string]int, 2*len(v.obj))
				for j := range v.obj {
					index[v.obj[j].key] = j
				}
			}
		}
		p.skipWS()
		if p.i >= len(p.s) {
			return nil, p.errorf("unexpected end of input in an object")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return v, nil
		default:
			return nil, p.errorf("expected ',' or '}', found %s", p.what())
		}
	}
}

func (p *jsParser) array(depth int) (*jsValue, error) {
	if depth > maxNesting {
		return nil, errTooDeep
	}
	p.i++ // '['
	v := &jsValue{kind: jsArray}
	p.skipWS()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	for {
		p.skipWS()
		el, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		v.arr = append(v.arr, el)
		p.skipWS()
		if p.i >= len(p.s) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		switch p.s[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return v, nil
		default:
			return nil, p.errorf("expected ',' or ']', found %s", p.what())
		}
	}
}

func isASCIIDigit(c byte) bool { return c >= '0' && c <= '9' }

// number parses a JSON number into a float64 as JSON.parse does (round to nearest; values
// beyond the float64 range become ±Infinity, which JSON.stringify writes as null).
func (p *jsParser) number() (*jsValue, error) {
	start := p.i
	if p.s[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.s) && p.s[p.i] == '0':
		p.i++
	case p.i < len(p.s) && p.s[p.i] >= '1' && p.s[p.i] <= '9':
		for p.i < len(p.s) && isASCIIDigit(p.s[p.i]) {
			p.i++
		}
	default:
		return nil, p.errorf("invalid number: expected a digit, found %s", p.what())
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		p.i++
		if p.i >= len(p.s) || !isASCIIDigit(p.s[p.i]) {
			return nil, p.errorf("invalid number: expected a digit after '.', found %s", p.what())
		}
		for p.i < len(p.s) && isASCIIDigit(p.s[p.i]) {
			p.i++
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if p.i >= len(p.s) || !isASCIIDigit(p.s[p.i]) {
			return nil, p.errorf("invalid number: expected an exponent digit, found %s", p.what())
		}
		for p.i < len(p.s) && isASCIIDigit(p.s[p.i]) {
			p.i++
		}
	}
	f, err := strconv.ParseFloat(p.s[start:p.i], 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, p.errorf("invalid number %q", p.s[start:p.i])
	}
	// ErrRange: f is ±Inf (overflow); underflow yields ±0 without an error.
	return &jsValue{kind: jsNumber, num: f}, nil
}

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// hex4 reads 4 hex digits at s[i:]; -1 when they are not there.
func hex4(s string, i int) int {
	if len(s)-i < 4 {
		return -1
	}
	n := 0
	for j := i; j < i+4; j++ {
		h := hexVal(s[j])
		if h < 0 {
			return -1
		}
		n = n<<4 | h
	}
	return n
}

// str parses a string literal at the cursor and returns its WTF-8 value (see jsValue).
func (p *jsParser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: printable ASCII up to the closing quote needs no copy.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			return s, nil
		}
		if c == '\\' || c < 0x20 || c >= 0x80 {
			break
		}
		p.i++
	}
	buf := make([]byte, 0, p.i-start+16)
	buf = append(buf, p.s[start:p.i]...)
	for {
		if p.i >= len(p.s) {
			return "", p.errorf("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return string(buf), nil
		case c < 0x20:
			return "", p.errorf("control character 0x%02x in a string", c)
		case c == '\\':
			if p.i+1 >= len(p.s) {
				return "", p.errorf("unterminated escape")
			}
			e := p.s[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				cu := hex4(p.s, p.i)
				if cu < 0 {
					return "", p.errorf("invalid \\u escape")
				}
				p.i += 4
				if cu >= 0xD800 && cu <= 0xDBFF && len(p.s)-p.i >= 6 && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					if lo := hex4(p.s, p.i+2); lo >= 0xDC00 && lo <= 0xDFFF {
						p.i += 6
						buf = utf8.AppendRune(buf, rune(0x10000+((cu-0xD800)<<10)+(lo-0xDC00)))
						continue
					}
				}
				if cu >= 0xD800 && cu <= 0xDFFF {
					// A lone surrogate: keep it, in its generalized UTF-8 form.
					buf = append(buf, byte(0xE0|cu>>12), byte(0x80|(cu>>6)&0x3F), byte(0x80|cu&0x3F))
				} else {
					buf = utf8.AppendRune(buf, rune(cu))
				}
			default:
				p.i--
				return "", p.errorf("invalid escape \\%c", e)
			}
		case c < 0x80:
			buf = append(buf, c)
			p.i++
		default:
			r, n := decodeWHATWG(p.s, p.i)
			if r == utf8.RuneError {
				buf = append(buf, "\uFFFD"...)
			} else {
				buf = append(buf, p.s[p.i:p.i+n]...)
			}
			p.i += n
		}
	}
}

// decodeWHATWG decodes one UTF-8 sequence at s[i] (s[i] >= 0x80) as the WHATWG Encoding
// Standard's UTF-8 decoder does (TextDecoder, Node's Buffer#toString): an invalid sequence
// yields one U+FFFD for its maximal valid prefix ("maximal subpart"), and the byte that
// broke it is decoded afresh. utf8.DecodeRuneInString instead yields one U+FFFD per byte,
// which would count differently for a truncated sequence. Returns (RuneError, n) for an
// invalid prefix of n bytes.
func decodeWHATWG(s string, i int) (rune, int) {
	c := s[i]
	var need int
	lo, hi := byte(0x80), byte(0xBF) // allowed range for the next continuation byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c == 0xF4:
		need, hi = 3, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	default:
		return utf8.RuneError, 1
	}
	n := 1
	for ; n <= need; n++ {
		if i+n >= len(s) || s[i+n] < lo || s[i+n] > hi {
			return utf8.RuneError, n
		}
		lo, hi = 0x80, 0xBF
	}
	r, size := utf8.DecodeRuneInString(s[i : i+n])
	if size != n { // cannot happen for the ranges above; be safe
		return utf8.RuneError, 1
	}
	return r, n
}

// --- writer ---

// appendJS appends JSON.stringify(v) to b.
func appendJS(b []byte, v *jsValue) []byte {
	switch v.kind {
	case jsNull:
		return append(b, "null"...)
	case jsFalse:
		return append(b, "false"...)
	case jsTrue:
		return append(b, "true"...)
	case jsNumber:
		return appendJSNumber(b, v.num)
	case jsString:
		return appendJSString(b, v.str)
	case jsArray:
		b = append(b, '[')
		for i, el := range v.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJS(b, el)
		}
		return append(b, ']')
	default:
		b = append(b, '{')
		for i, m := range ownKeyOrder(v.obj) {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSString(b, m.key)
			b = append(b, ':')
			b = appendJS(b, m.val)
		}
		return append(b, '}')
	}
}

// isArrayIndex reports whether key is an ECMAScript array index: the canonical decimal
// form of an integer in [0, 2^32-2] ("0", "7", "4294967294"; not "01", "-1", "1.0",
// "4294967295").
func isArrayIndex(key string) bool {
	if len(key) == 0 || len(key) > 10 {
		return false
	}
	if key[0] == '0' {
		return len(key) == 1
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		if !isASCIIDigit(key[i]) {
			return false
		}
		n = n*10 + uint64(key[i]-'0')
	}
	return n <= math.MaxUint32-1
}

// ownKeyOrder returns the members in the order of ECMAScript OrdinaryOwnPropertyKeys,
// which JSON.stringify follows: array-index keys first in ascending numeric order, then
// the other keys in insertion order. Most schemas have no index keys and are returned
// unchanged.
func ownKeyOrder(obj []jsMember) []jsMember {
	nIndex := 0
	for i := range obj {
		if isArrayIndex(obj[i].key) {
			nIndex++
		}
	}
	if nIndex == 0 {
		return obj
	}
	out := make([]jsMember, 0, len(obj))
	for i := range obj {
		if isArrayIndex(obj[i].key) {
			out = append(out, obj[i])
		}
	}
	slices.SortFunc(out, func(a, b jsMember) int { return indexCompare(a.key, b.key) })
	for i := range obj {
		if !isArrayIndex(obj[i].key) {
			out = append(out, obj[i])
		}
	}
	return out
}

// indexCompare compares two canonical decimal strings numerically (keys are unique).
func indexCompare(a, b string) int {
	if len(a) != len(b) {
		return len(a) - len(b)
	}
	return strings.Compare(a, b)
}

// appendJSNumber appends f as ECMAScript Number::toString writes it (ECMA-262
// Number::toString with radix 10), which JSON.stringify uses for finite numbers;
// NaN and ±Infinity are written as null, and -0 as 0.
//
// Let the shortest round-trip decimal digits of |f| be d1..dk and n the position of the
// decimal point (|f| = 0.d1..dk × 10^n). Then:
//
//	k <= n <= 21  : digits followed by n-k zeros        (1e20 -> 100000000000000000000)
//	0 < n <= 21   : d1..dn "." dn+1..dk                  (1234.5)
//	-6 < n <= 0   : "0." -n zeros then the digits         (0.000001)
//	otherwise     : d1 ["." d2..dk] "e" sign (n-1)       (1e+21, 1e-7, 1.5e+300)
func appendJSNumber(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, "null"...)
	}
	if f == 0 {
		return append(b, '0')
	}
	if f < 0 {
		b = append(b, '-')
		f = -f
	}
	// Go's shortest formatting picks the same digits as ECMAScript: the fewest digits that
	// round-trip, and among those the closest to the exact value.
	var tmp [32]byte
	e := strconv.AppendFloat(tmp[:0], f, 'e', -1, 64) // "d.ddde±XX" or "de±XX"
	var digits [24]byte
	k := 0
	j := 0
	for ; j < len(e) && e[j] != 'e'; j++ {
		if e[j] != '.' {
			digits[k] = e[j]
			k++
		}
	}
	exp, _ := strconv.Atoi(string(e[j+1:]))
	n := exp + 1
	d := digits[:k]
	switch {
	case k <= n && n <= 21:
		b = append(b, d...)
		for i := 0; i < n-k; i++ {
			b = append(b, '0')
		}
	case 0 < n && n <= 21:
		b = append(b, d[:n]...)
		b = append(b, '.')
		b = append(b, d[n:]...)
	case -6 < n && n <= 0:
		b = append(b, '0', '.')
		for i := 0; i < -n; i++ {
			b = append(b, '0')
		}
		b = append(b, d...)
	default:
		b = append(b, d[0])
		if k > 1 {
			b = append(b, '.')
			b = append(b, d[1:]...)
		}
		b = append(b, 'e')
		if n-1 >= 0 {
			b = append(b, '+')
		}
		b = strconv.AppendInt(b, int64(n-1), 10)
	}
	return b
}

// appendJSString appends s (WTF-8, see jsValue) quoted as JSON.stringify quotes strings
// (ECMA-262 QuoteJSONString, the well-formed JSON.stringify of ES2019):
//
//	"  -> \"     \ -> \\     U+0008 -> \b   U+0009 -> \t   U+000A -> \n   U+000C -> \f
//	U+000D -> \r     other code units below U+0020 -> \u00xx (lowercase hex)
//	a lone surrogate U+D800..U+DFFF -> \udxxx (lowercase hex)
//	everything else, including "/", U+007F, U+2028 and U+2029, as is.
//
// The rules match ingest.AppendJSString, plus the lone surrogates that Go
// strings elsewhere cannot carry.
func appendJSString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c != 0xED {
			i++
			continue
		}
		if c == 0xED {
			if i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF {
				b = append(b, s[start:i]...)
				cu := 0xD000 | int(s[i+1]&0x3F)<<6 | int(s[i+2]&0x3F)
				b = append(b, '\\', 'u', 'd', hexDigits[cu>>8&0xF], hexDigits[cu>>4&0xF], hexDigits[cu&0xF])
				i += 3
				start = i
				continue
			}
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// utf16Len returns the number of UTF-16 code units of valid UTF-8 text (what
// String.prototype.length counts): one per code point, two for code points above U+FFFF.
// The writer's output is valid UTF-8 (lone surrogates are escaped).
func utf16Len(b []byte) int {
	n := 0
	for _, c := range b {
		if c&0xC0 != 0x80 {
			n++
			if c >= 0xF0 {
				n++
			}
		}
	}
	return n
}

// Stringify returns JSON.stringify(JSON.parse(text)) as UTF-8 bytes: compact JSON with the
// key order, duplicate-key handling, number formatting and string escaping of JavaScript.
func Stringify(text json.RawMessage) (json.RawMessage, error) {
	v, err := parseJS(text)
	if err != nil {
		return nil, err
	}
	return appendJS(nil, v), nil
}

// SerializedSize returns the length in UTF-16 code units (JavaScript's String.length) of
// JSON.stringify(JSON.parse(text)): the "serialized size" of the ratchet's definitions, before
// any context injection (Check measures after injection; see InjectContext). Invalid JSON
// is an error.
func SerializedSize(schema json.RawMessage) (int, error) {
	v, err := parseJS(schema)
	if err != nil {
		return 0, err
	}
	return utf16Len(appendJS(nil, v)), nil
}
