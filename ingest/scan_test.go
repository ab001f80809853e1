package ingest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/segmentio/encoding/json"
)

// The envelope scanner is checked against a reference built on segmentio/encoding's
// validating decoder (what Parse used before it had a scanner of its own): the same verdict on
// every input, the same envelope fields, the same pairs.

// refEnvelope receives the envelope's fields as raw values.
type refEnvelope struct {
	UUID       json.RawMessage `json:"uuid"`
	Event      json.RawMessage `json:"event"`
	DistinctID json.RawMessage `json:"distinct_id"`
	Timestamp  json.RawMessage `json:"timestamp"`
	Properties json.RawMessage `json:"properties"`
}

// refPair is one property as the reference splits it.
type refPair struct {
	key, value    []byte
	start, keyEnd int
	loose         bool
}

// refScan is the reference: segmentio's Parse validates the input and decodes the fields, a
// second scan splits the properties object.
func refScan(data []byte) (top refEnvelope, pairs []refPair, err error) {
	start := skipSpace(data, 0)
	if start == len(data) || data[start] != '{' {
		if !json.Valid(data) {
			return top, nil, badJSON(data)
		}
		return top, nil, fmt.Errorf("%w: an event must be a JSON object, got %s", ErrBadJSON, jsonType(data[start:]))
	}
	rest, err := json.Parse(data, &top, json.ZeroCopy|json.DontMatchCaseInsensitiveStructFields)
	if err != nil || skipSpace(rest, 0) != len(rest) {
		return top, nil, badJSON(data)
	}
	b := []byte(top.Properties)
	if len(b) == 0 || b[0] != '{' {
		return top, nil, nil
	}
	i := skipSpace(b, 1)
	for i < len(b) && b[i] != '}' {
		p := refPair{start: i}
		p.keyEnd = skipString(b, i)
		p.key = unquote(b[i:p.keyEnd])
		colon := skipSpace(b, p.keyEnd)
		j := skipSpace(b, colon+1)
		end, loose := skipValue(b, j)
		p.value = b[j:end]
		p.loose = loose || colon != p.keyEnd || j != colon+1
		pairs = append(pairs, p)
		i = skipSpace(b, end)
		if i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return top, pairs, nil
}

// checkScan compares the scanner with the reference on data.
func checkScan(t *testing.T, data []byte) {
	t.Helper()
	wantTop, wantPairs, wantErr := refScan(data)
	d := getDecodeState()
	defer putDecodeState(d)
	err := d.scan(data)
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) {
		t.Fatalf("scan(%q): error %v, reference %v", data, err, wantErr)
	}
	if err != nil {
		return
	}
	for _, f := range []struct {
		name      string
		got, want []byte
	}{
		{"uuid", d.top.UUID, wantTop.UUID}, {"event", d.top.Event, wantTop.Event}, {"distinct_id", d.top.DistinctID, wantTop.DistinctID},
		{"timestamp", d.top.Timestamp, wantTop.Timestamp}, {"properties", d.top.Properties, wantTop.Properties},
	} {
		if !bytes.Equal(f.got, f.want) || (f.got == nil) != (f.want == nil) {
			t.Fatalf("scan(%q): %s %q, reference %q", data, f.name, f.got, f.want)
		}
	}
	if len(wantTop.Properties) > 0 && wantTop.Properties[0] == '{' {
		if !bytes.Equal(d.props, wantTop.Properties) {
			t.Fatalf("scan(%q): properties object %q", data, d.props)
		}
	} else if d.props != nil {
		t.Fatalf("scan(%q): properties object %q for a properties value that is not one", data, d.props)
	}
	if len(d.pairs) != len(wantPairs) {
		t.Fatalf("scan(%q): %d pairs, reference %d", data, len(d.pairs), len(wantPairs))
	}
	for i := range d.pairs {
		p, w := &d.pairs[i], wantPairs[i]
		key, value := d.key(p), d.value(p)
		if !bytes.Equal(key, w.key) || p.start != w.start || p.keyEnd != w.keyEnd || !bytes.Equal(value, w.value) || p.loose != w.loose {
			t.Fatalf("scan(%q): pair %d is %q@%d-%d=%q loose %v, reference %q@%d-%d=%q loose %v",
				data, i, key, p.start, p.keyEnd, value, p.loose, w.key, w.start, w.keyEnd, w.value, w.loose)
		}
		if got, want := p.flags&flagNonASCII != 0, hasHighByte(value); got != want {
			t.Fatalf("scan(%q): pair %d non-ASCII flag %v", data, i, got)
		}
		if got, want := p.keyNonASCII, hasHighByte(d.props[p.start:p.keyEnd]); got != want {
			t.Fatalf("scan(%q): pair %d key non-ASCII flag %v", data, i, got)
		}
		if value[0] == '"' {
			if got, want := p.flags&flagEscape != 0, bytes.IndexByte(value, '\\') >= 0; got != want {
				t.Fatalf("scan(%q): pair %d escape flag %v", data, i, got)
			}
		}
	}
}

func hasHighByte(b []byte) bool {
	for _, c := range b {
		if c >= 0x80 {
			return true
		}
	}
	return false
}

// scanSeeds are Parse's fuzz seeds, the SDK-shaped events and a few edge cases of the grammar.
func scanSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParse", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(string(data), "\n")[1:] {
			if s, ok := strings.CutPrefix(line, "[]byte("); ok {
				v, err := strconv.Unquote(strings.TrimSuffix(s, ")"))
				if err != nil {
					tb.Fatalf("%s: %v", f, err)
				}
				out = append(out, []byte(v))
			}
		}
	}
	for _, glob := range []string{filepath.Join("testdata", "sdk", "*.json"), filepath.Join("gateway", "testdata", "sdk", "*.json")} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				tb.Fatal(err)
			}
			out = append(out, data)
		}
	}
	for _, s := range []string{
		``, ` `, `{`, `}`, `{}`, ` {} `, `{}x`, `{},`, `[]`, `"x"`, `1`, `null`,
		`{"a":1,}`, `{,"a":1}`, `{"a" 1}`, `{"a":}`, `{"a":1 "b":2}`, `{"properties":{"a":[1,2,]}}`,
		`{"properties":{"a":01}}`, `{"properties":{"a":-}}`, `{"properties":{"a":1.}}`, `{"properties":{"a":1e}}`,
		`{"properties":{"a":1e+}}`, `{"properties":{"a":-0.5E-7}}`, `{"properties":{"a":tru}}`, `{"properties":{"a":nul}}`,
		`{"properties":{"a":"\x"}}`, `{"properties":{"a":"\u12G4"}}`, `{"properties":{"a":"\u123"}}`, "{\"properties\":{\"a\":\"\x01\"}}",
		"{\"properties\":{\"a\":\"\x7f\xff\xc3\xa9\"}}", `{"properties":{"a" : [ 1 , {"b" : "c"} ] , "b":{}}}`,
		`{"properties":{"a":1},"properties":2}`, `{"properties":3,"properties":{"b":[]}}`, `{"\u0070roperties":{"x":1}}`,
		`{"uuid":"a","uuid":"b","event":"e","Event":"f"}`, `{"properties":{"\u00e9\"":1,"a\\b":"\\"}}`,
		`{"properties":{"a":[[[[[[[[[[]]]]]]]]]]}}`, `{"properties":{"a":[[[[[[[[[[]]]]]]]]]}}`, `{"properties":{"a":{"b":{"c":}}}}`,
		`{"properties":{"a":"0123456789abcdef\"0123456789"}}`, `{"properties":{"a":"01234567\\"}}`, `{"properties":{"a":"01234567\`,
		"{\"properties\":{\"a\":\"\xe2\x80\xa8 0123456789 \\u2028 \x1f\"}}", `{"properties":{"a":"` + strings.Repeat("é", 40) + `"}}`,
		`{"properties":{}}`, `{"properties":{ }}`, `{"properties":{"a":[ ]}}`, `{"properties":{"a":[]  }  }`,
	} {
		out = append(out, []byte(s))
	}
	return out
}

// deepSeed nests arrays deeper than encoding/json's limit (10,000), which segmentio/encoding
// does not have.
func deepSeed() []byte {
	return []byte(`{"properties":{"deep":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}}`)
}

// mutateJSON returns a copy of b with a few random edits that tend to stay near valid JSON.
func mutateJSON(r *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	const interesting = "\"\\{}[],: \n\t0-e.uE+19tfn\x00\x1f\x7f\xff\xc3\xa9"
	for n := 1 + r.IntN(3); n > 0 && len(b) > 0; n-- {
		i := r.IntN(len(b))
		switch c := interesting[r.IntN(len(interesting))]; r.IntN(5) {
		case 0:
			b[i] = c
		case 1:
			b = append(b[:i], b[i+1:]...)
		case 2:
			b = append(b[:i], append([]byte{c}, b[i:]...)...)
		case 3:
			b = b[:i]
		case 4:
			if j := bytes.IndexAny(b[i:], ",:{["); j >= 0 {
				k := i + j + 1
				b = append(b[:k], append([]byte(" \n"), b[k:]...)...)
			}
		}
	}
	return b
}

func TestScanMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, seed := range append(scanSeeds(t), deepSeed()) {
		checkScan(t, seed)
		for range 200 {
			checkScan(t, mutateJSON(r, seed))
		}
	}
}

// FuzzScan: the scanner agrees with the reference on any input.
func FuzzScan(f *testing.F) {
	for _, seed := range scanSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkScan(t, data) })
}

// skipStringBytes is skipString one byte at a time, the reference of TestSkipString.
func skipStringBytes(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
	return len(b)
}

// TestSkipString: skipString ends each well-formed string where the byte loop and scanString
// end it, escapes next to quotes and backslashes included, at every alignment of the string
// against the eight-byte words and with more JSON or nothing after it.
func TestSkipString(t *testing.T) {
	for _, s := range []string{
		`""`, `"a"`, `"\""`, `"\\"`, `"\\\""`, `"\\\\"`, `"\\\\\""`, `"\"\""`, `"a\\"`, `"\\a"`,
		`"abcdefg\""`, `"abcdefgh\\"`, `"abcdefghijklmno\\\\"`, `"abcdefg\\\"hijklmnop"`,
		`"\u0022\u005c"`, `"\u005C\u0022abcdefghij"`, `"\/\b\f\n\r\t"`, `"é\"ü\\ñ"`, "\"\xff\xfe\\\"\x80\"",
		`"` + strings.Repeat(`\\`, 9) + `"`, `"` + strings.Repeat(`\"`, 9) + `"`, `"` + strings.Repeat("x", 40) + `"`,
		`"` + strings.Repeat(`a\\`, 7) + `\"` + `"`,
	} {
		for pad := range 9 {
			for _, tail := range []string{"", `,"k":"v\\"}`, `"`, `\"`, strings.Repeat(`"`, 9)} {
				b := []byte(strings.Repeat(" ", pad) + s + tail)
				want := pad + len(s)
				if end, _, ok := scanString(b, pad); !ok || end != want {
					t.Fatalf("test case %q is not one well-formed string: scanString %d, %v", s, end, ok)
				}
				if got := skipString(b, pad); got != want {
					t.Errorf("skipString(%q, %d) = %d, want %d", b, pad, got, want)
				}
				if got := skipStringBytes(b, pad); got != want {
					t.Errorf("byte loop (%q, %d) = %d, want %d", b, pad, got, want)
				}
			}
		}
	}
	// Unterminated (not well-formed): both run to the end.
	for _, s := range []string{`"`, `"abc`, `"abcdefghijkl\"`, `"abcdefghijkl\`, `"\\\"abcdefgh`} {
		if got, want := skipString([]byte(s), 0), skipStringBytes([]byte(s), 0); got != want || got != len(s) {
			t.Errorf("skipString(%q) = %d, byte loop %d, want %d", s, got, want, len(s))
		}
	}
}

// checkStringValue compares stringValue with json.Unmarshal (what it used for every string
// holding an escape or a byte >= 0x80) on a well-formed JSON string.
func checkStringValue(t *testing.T, raw []byte) {
	t.Helper()
	if len(raw) == 0 || raw[0] != '"' {
		return
	}
	if end, _, ok := scanString(raw, 0); !ok || end != len(raw) {
		return
	}
	var want string
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatalf("json.Unmarshal(%q): %v", raw, err)
	}
	if got, ok := stringValue(raw); !ok || got != want {
		t.Fatalf("stringValue(%q) = %q, %v; want %q", raw, got, ok, want)
	}
}

// stringValueSeeds are JSON strings with every kind of escape, surrogates paired and not, and
// invalid UTF-8.
var stringValueSeeds = []string{
	`""`, `"a"`, `"\"\\\/\b\f\n\r\t"`, `"line\nnext \"quoted\" \\ end"`, `"\u0000\u001f\u007f\u0080\u00e9\u20ac\uffff\uFFFD"`,
	`"\u003cb\u003e \u0026"`, `"\ud83d\ude00"`, `"\ud83d"`, `"\ude00x"`, `"\ud83dx\ude00"`, `"\uD83D\uDE00\uD800\uDBFF\uDC00\uDFFF"`,
	"\"caf\u00e9 \\n \u20ac\"", "\"\xff\\n\"", "\"\xe2\x82\\t\"", "\"\xed\xa0\x80\\\\\"", `"\\u0041"`, `"\u0041\u0062\u0043"`,
}

func TestStringValueMatchesUnmarshal(t *testing.T) {
	for _, s := range stringValueSeeds {
		checkStringValue(t, []byte(s))
	}
}

// FuzzStringValue: stringValue decodes any well-formed JSON string as json.Unmarshal does.
func FuzzStringValue(f *testing.F) {
	for _, s := range stringValueSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) { checkStringValue(t, raw) })
}
