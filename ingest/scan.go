package ingest

import (
	"encoding/binary"
	"fmt"
	"math/bits"

	"github.com/segmentio/encoding/json"
)

// The envelope scanner: one pass over an event's bytes that validates them as JSON (RFC 8259's
// grammar: no nesting limit, and bytes that are not UTF-8 are accepted in strings, as
// encoding/json and segmentio/encoding accept them), records the raw values of the envelope's
// fields and splits the properties object into its pairs. It is mcpulse's own scanner because
// it is on the path of every event: a general decoder validated the bytes, then a second scan
// split the properties, and the two cost most of Parse.

// String flags found while scanning a value.
const (
	flagEscape   = 1 << iota // a string holds a backslash escape
	flagNonASCII             // a string holds a byte >= 0x80
	flagLoose                // whitespace outside strings, inside a container value
)

// scan decodes the envelope's fields and splits the properties object into pairs. It fails,
// with Parse's "bad JSON" error, when data is not exactly one JSON object.
func (d *decodeState) scan(data []byte) error {
	start := skipSpace(data, 0)
	if start == len(data) || data[start] != '{' {
		if !json.Valid(data) {
			return badJSON(data)
		}
		return fmt.Errorf("%w: an event must be a JSON object, got %s", ErrBadJSON, jsonType(data[start:]))
	}
	end, ok := d.scanEnvelope(data, start)
	if !ok || skipSpace(data, end) != len(data) {
		return badJSON(data)
	}
	return nil
}

// The envelope's fields, as scanEnvelope numbers them.
const (
	fieldOther = iota
	fieldUUID
	fieldEvent
	fieldDistinctID
	fieldTimestamp
	fieldProperties
)

// envelopeField numbers a member name of the envelope (raw, quotes included); names match
// exactly, after unescaping.
func envelopeField(raw []byte, flags uint8) int {
	name := raw[1 : len(raw)-1]
	if flags&flagEscape != 0 {
		name = unquote(raw)
	}
	switch string(name) {
	case "uuid":
		return fieldUUID
	case "event":
		return fieldEvent
	case "distinct_id":
		return fieldDistinctID
	case "timestamp":
		return fieldTimestamp
	case "properties":
		return fieldProperties
	}
	return fieldOther
}

// scanEnvelope scans the object at b[i] (a '{'), keeping the last value of each envelope
// field, and returns the offset just after it.
func (d *decodeState) scanEnvelope(b []byte, i int) (int, bool) {
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		keyEnd, flags, ok := scanString(b, i)
		if !ok {
			return i, false
		}
		field := envelopeField(b[i:keyEnd], flags)
		if i = skipSpace(b, keyEnd); i >= len(b) || b[i] != ':' {
			return i, false
		}
		if i = skipSpace(b, i+1); i >= len(b) {
			return i, false
		}
		var end int
		var vflags uint8
		if field == fieldProperties && b[i] == '{' {
			end, ok = d.scanProperties(b, i)
		} else {
			end, vflags, ok = d.scanValue(b, i)
		}
		if !ok {
			return end, false
		}
		d.topFlags[field] = vflags
		switch v := b[i:end]; field {
		case fieldUUID:
			d.top.UUID = v
		case fieldEvent:
			d.top.Event = v
		case fieldDistinctID:
			d.top.DistinctID = v
		case fieldTimestamp:
			d.top.Timestamp = v
		case fieldProperties:
			d.top.Properties = v
			if v[0] == '{' {
				d.props = v
			} else { // an earlier properties object is replaced
				d.props, d.pairs = nil, d.pairs[:0]
			}
		}
		switch i = skipSpace(b, end); {
		case i >= len(b):
			return i, false
		case b[i] == ',':
			i = skipSpace(b, i+1)
		case b[i] == '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanProperties scans the properties object at b[i], recording its pairs (replacing those of
// an earlier properties object), and returns the offset just after it.
func (d *decodeState) scanProperties(b []byte, i int) (int, bool) {
	base := i
	d.pairs, d.keys = d.pairs[:0], d.keys[:0]
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return i, false
		}
		keyEnd, keyFlags, ok := scanString(b, i)
		if !ok {
			return i, false
		}
		colon := skipSpace(b, keyEnd)
		if colon >= len(b) || b[colon] != ':' {
			return colon, false
		}
		j := skipSpace(b, colon+1)
		if j >= len(b) {
			return j, false
		}
		end, flags, ok := d.scanValue(b, j)
		if !ok {
			return end, false
		}
		p := pair{start: i - base, keyEnd: keyEnd - base, valStart: j - base, valEnd: end - base, unquoted: -1, arena: -1}
		if keyFlags&flagEscape != 0 {
			p.unquoted = len(d.keys)
			d.keys = append(d.keys, unquote(b[i:keyEnd])...)
			p.unquotedEnd = len(d.keys)
		}
		p.loose = flags&flagLoose != 0 || colon != keyEnd || j != colon+1
		p.flags = flags &^ flagLoose
		p.keyNonASCII = keyFlags&flagNonASCII != 0
		d.pairs = append(d.pairs, p)
		switch i = skipSpace(b, end); {
		case i >= len(b):
			return i, false
		case b[i] == ',':
			i = skipSpace(b, i+1)
		case b[i] == '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// scanValue validates the JSON value at b[i] (i < len(b)) and returns the offset just after
// it, with the flags of what it holds.
func (d *decodeState) scanValue(b []byte, i int) (end int, flags uint8, ok bool) {
	switch c := b[i]; c {
	case '"':
		return scanString(b, i)
	case '{', '[':
		return d.scanContainer(b, i)
	case 't':
		return scanLiteral(b, i, "true")
	case 'f':
		return scanLiteral(b, i, "false")
	case 'n':
		return scanLiteral(b, i, "null")
	default:
		end, ok = scanNumber(b, i)
		return end, 0, ok
	}
}

func scanLiteral(b []byte, i int, lit string) (int, uint8, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, 0, false
	}
	return i + len(lit), 0, true
}

// scanNumber validates the JSON number at b[i]: an optional '-', an integer part without
// leading zeros, an optional fraction and an optional exponent, each with at least one digit.
func scanNumber(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		if i++; i >= len(b) {
			return i, false
		}
	}
	switch c := b[i]; {
	case c == '0':
		i++
	case c >= '1' && c <= '9':
		for i++; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		start := i + 1
		for i = start; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
		if i == start {
			return i, false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		if i++; i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		}
		if i == start {
			return i, false
		}
	}
	return i, true
}

// SWAR constants: a byte repeated in every lane of a uint64.
const (
	lanes1   = 0x0101010101010101
	lanesTop = 0x8080808080808080
)

// scanString validates the JSON string at b[i] (a '"') and returns the offset just after its
// closing quote, with flagEscape and flagNonASCII as found. Eight bytes at a time: a lane is
// flagged when it holds '"', '\\', a control character or (until the first one is seen) a byte
// >= 0x80. A borrow between lanes can flag a lane above a flagged one, never below: the lowest
// flagged lane is exact, and it is the one handled.
func scanString(b []byte, i int) (end int, flags uint8, ok bool) {
	i++
	for {
		var c byte
		if i+8 <= len(b) {
			x := binary.LittleEndian.Uint64(b[i:])
			var m uint64
			if flags&flagNonASCII == 0 {
				// x^'"' - 1 and x^'\\' - 1 set a lane's top bit for the byte itself or a byte
				// >= 0x80, x - 0x20 for a control character or a byte >= 0xa0, x for >= 0x80.
				m = ((x ^ lanes1*'"') - lanes1) | ((x ^ lanes1*'\\') - lanes1) | (x - lanes1*0x20) | x
			} else {
				// Bytes >= 0x80 are no longer flagged (&^ clears their lanes).
				q, s := x^lanes1*'"', x^lanes1*'\\'
				m = ((q - lanes1) &^ q) | ((s - lanes1) &^ s) | ((x - lanes1*0x20) &^ x)
			}
			if m &= lanesTop; m == 0 {
				i += 8
				continue
			}
			i += bits.TrailingZeros64(m) >> 3
			c = b[i]
		} else {
			for ; i < len(b); i++ {
				if c = b[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 && flags&flagNonASCII == 0 {
					break
				}
			}
			if i >= len(b) {
				return i, flags, false
			}
		}
		switch {
		case c == '"':
			return i + 1, flags, true
		case c == '\\':
			flags |= flagEscape
			if i+1 >= len(b) {
				return i, flags, false
			}
			switch e := b[i+1]; {
			case simpleEscape[e]:
				i += 2
			case e == 'u' && len(b)-i >= 6 && isHex(b[i+2]) && isHex(b[i+3]) && isHex(b[i+4]) && isHex(b[i+5]):
				i += 6
			default:
				return i, flags, false
			}
		case c < 0x20:
			return i, flags, false
		default: // the first byte >= 0x80: not checked (invalid UTF-8 is accepted), only noted
			flags |= flagNonASCII
			i++
		}
	}
}

// simpleEscape holds the characters that may follow a backslash besides 'u'.
var simpleEscape = [256]bool{'"': true, '\\': true, '/': true, 'b': true, 'f': true, 'n': true, 'r': true, 't': true}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// scanContainer validates the object or array at b[i] and returns the offset just after it,
// with the flags of its strings and flagLoose when whitespace separates its tokens. It keeps
// its own stack of open containers (no recursion, no nesting limit).
func (d *decodeState) scanContainer(b []byte, i int) (end int, flags uint8, ok bool) {
	d.stack = d.stack[:0]
	n := len(b)
	// value: b[i] starts a value (i < n).
value:
	switch b[i] {
	case '{':
		d.stack = append(d.stack, '}')
		i++
		if j := skipSpace(b, i); j != i {
			flags, i = flags|flagLoose, j
		}
		if i < n && b[i] == '}' {
			d.stack = d.stack[:len(d.stack)-1]
			i++
			goto next
		}
		goto key
	case '[':
		d.stack = append(d.stack, ']')
		i++
		if j := skipSpace(b, i); j != i {
			flags, i = flags|flagLoose, j
		}
		if i >= n {
			return i, flags, false
		}
		if b[i] == ']' {
			d.stack = d.stack[:len(d.stack)-1]
			i++
			goto next
		}
		goto value
	case '"':
		var f uint8
		if i, f, ok = scanString(b, i); !ok {
			return i, flags, false
		}
		flags |= f
	case 't':
		if i, _, ok = scanLiteral(b, i, "true"); !ok {
			return i, flags, false
		}
	case 'f':
		if i, _, ok = scanLiteral(b, i, "false"); !ok {
			return i, flags, false
		}
	case 'n':
		if i, _, ok = scanLiteral(b, i, "null"); !ok {
			return i, flags, false
		}
	default:
		if i, ok = scanNumber(b, i); !ok {
			return i, flags, false
		}
	}
	// next: a value ended at i; a ',' or the closing bracket of the innermost container follows.
next:
	if len(d.stack) == 0 {
		return i, flags, true
	}
	if j := skipSpace(b, i); j != i {
		flags, i = flags|flagLoose, j
	}
	if i >= n {
		return i, flags, false
	}
	switch c := b[i]; {
	case c == d.stack[len(d.stack)-1]:
		d.stack = d.stack[:len(d.stack)-1]
		i++
		goto next
	case c == ',':
		i++
		if j := skipSpace(b, i); j != i {
			flags, i = flags|flagLoose, j
		}
		if i >= n {
			return i, flags, false
		}
		if d.stack[len(d.stack)-1] == '}' {
			goto key
		}
		goto value
	}
	return i, flags, false
	// key: b[i] should start a member name, then ':' and a value.
key:
	if i >= n || b[i] != '"' {
		return i, flags, false
	}
	{
		var f uint8
		if i, f, ok = scanString(b, i); !ok {
			return i, flags, false
		}
		flags |= f
	}
	if j := skipSpace(b, i); j != i {
		flags, i = flags|flagLoose, j
	}
	if i >= n || b[i] != ':' {
		return i, flags, false
	}
	i++
	if j := skipSpace(b, i); j != i {
		flags, i = flags|flagLoose, j
	}
	if i >= n {
		return i, flags, false
	}
	goto value
}
