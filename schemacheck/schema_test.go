package schemacheck

import (
	"encoding/base64"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// jsVectorCase is one entry of testdata/jsvectors.json "cases" (see make-vectors.js).
type jsVectorCase struct {
	Name     string  `json:"name"`
	Input    *string `json:"input"`
	InputB64 *string `json:"input_b64"`
	Output   string  `json:"output"`
	Length   int     `json:"length"`
	Error    bool    `json:"error"`
}

// jsVectorCorpus is one entry of "corpus": figures JavaScript computed for a corpus tool.
type jsVectorCorpus struct {
	File           string `json:"file"`
	Index          int    `json:"index"`
	Name           string `json:"name"`
	RawLength      int    `json:"raw_length"`
	Injected       bool   `json:"injected"`
	InjectedLength int    `json:"injected_length"`
	Nested         int    `json:"nested"`
	Described      int    `json:"described"`
	FullNested     int    `json:"full_nested"`
	FullDescribed  int    `json:"full_described"`
}

type jsVectorsFile struct {
	Node   string           `json:"node"`
	Cases  []jsVectorCase   `json:"cases"`
	Corpus []jsVectorCorpus `json:"corpus"`
}

var (
	jsVectorsOnce sync.Once
	jsVectorsData jsVectorsFile
	jsVectorsErr  error
)

func jsVectors(t testing.TB) jsVectorsFile {
	t.Helper()
	jsVectorsOnce.Do(func() {
		b, err := os.ReadFile(filepath.Join("testdata", "jsvectors.json"))
		if err != nil {
			jsVectorsErr = err
			return
		}
		jsVectorsErr = json.Unmarshal(b, &jsVectorsData)
	})
	if jsVectorsErr != nil {
		t.Fatalf("testdata/jsvectors.json (regenerate with node schemacheck/testdata/make-vectors.js): %v", jsVectorsErr)
	}
	return jsVectorsData
}

func (c jsVectorCase) bytes(t *testing.T) []byte {
	if c.InputB64 != nil {
		b, err := base64.StdEncoding.DecodeString(*c.InputB64)
		if err != nil {
			t.Fatalf("%s: bad base64: %v", c.Name, err)
		}
		return b
	}
	return []byte(*c.Input)
}

// TestStringifyMatchesNode holds Stringify and SerializedSize to what Node computed for
// JSON.stringify(JSON.parse(text)) and its .length: key order with numeric keys, duplicate
// keys, number formatting, string escapes, lone surrogates, invalid UTF-8, errors.
func TestStringifyMatchesNode(t *testing.T) {
	v := jsVectors(t)
	if len(v.Cases) < 300 {
		t.Fatalf("only %d vector cases", len(v.Cases))
	}
	for _, c := range v.Cases {
		in := c.bytes(t)
		out, err := Stringify(in)
		size, serr := SerializedSize(in)
		if c.Error {
			if err == nil || serr == nil {
				t.Errorf("%s: JSON.parse rejects %q but Stringify gave %q", c.Name, in, out)
			}
			continue
		}
		if err != nil || serr != nil {
			t.Errorf("%s: JSON.parse accepts %q but got %v / %v", c.Name, in, err, serr)
			continue
		}
		if string(out) != c.Output {
			t.Errorf("%s:\n input %q\n got   %q\n node  %q", c.Name, in, out, c.Output)
		}
		if size != c.Length {
			t.Errorf("%s: SerializedSize = %d, node length %d", c.Name, size, c.Length)
		}
	}
}

// TestStringifyAgreesWithEncodingJSON: the parser accepts exactly what encoding/json accepts
// (FuzzCheck checks the same on arbitrary bytes).
func TestStringifyAgreesWithEncodingJSON(t *testing.T) {
	for _, c := range jsVectors(t).Cases {
		in := c.bytes(t)
		_, err := parseJS(in)
		if (err == nil) != json.Valid(in) {
			t.Errorf("%s: parseJS err=%v but json.Valid=%v for %q", c.Name, err, json.Valid(in), in)
		}
	}
}

func TestNumberFormatting(t *testing.T) {
	for _, tc := range []struct {
		f    float64
		want string
	}{
		{1, "1"}, {-0.0, "0"}, {math.Copysign(0, -1), "0"}, {1e21, "1e+21"}, {1e20, "100000000000000000000"},
		{0.000001, "0.000001"}, {1e-7, "1e-7"}, {123.456, "123.456"}, {-1.5e-9, "-1.5e-9"},
		{math.Inf(1), "null"}, {math.NaN(), "null"}, {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
		{float64(1 << 53), "9007199254740992"}, {addAtRunTime(0.1, 0.2), "0.30000000000000004"}, {1.5e300, "1.5e+300"},
	} {
		if got := string(appendJSNumber(nil, tc.f)); got != tc.want {
			t.Errorf("appendJSNumber(%v) = %s, want %s", tc.f, got, tc.want)
		}
	}
}

// addAtRunTime adds at run time (a constant expression 0.1 + 0.2 is exact in Go).
func addAtRunTime(a, b float64) float64 { return a + b }

// TestLengthCountsUTF16 pins the unit: UTF-16 code units, not bytes, not runes.
func TestLengthCountsUTF16(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{`"a"`, 3},
		{`"é"`, 3},            // 2 bytes, 1 rune, 1 unit
		{`"😀"`, 4},            // 4 bytes, 1 rune, 2 units
		{`"\ud83d\ude00"`, 4}, // an escaped pair is one astral character
		{`"\ud83d"`, 8},       // a lone surrogate is written as the escape \ud83d
		{`"\u0001"`, 8},
		{`"\u00e9"`, 3},
		{`"\/"`, 3},
		{"\"\u2028\"", 3},
	} {
		got, err := SerializedSize(json.RawMessage(tc.in))
		if err != nil || got != tc.want {
			t.Errorf("SerializedSize(%s) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
}

// TestDuplicateKeysAndOrder spells out the JSON.parse rules the vectors also cover.
func TestDuplicateKeysAndOrder(t *testing.T) {
	got, err := Stringify(json.RawMessage(`{"b":1,"a":2,"b":{"x":3},"2":0,"10":1,"1":2,"01":3,"4294967295":4,"4294967294":5}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"1":2,"2":0,"10":1,"4294967294":5,"b":{"x":3},"a":2,"01":3,"4294967295":4}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

// TestDeepNestingIsAnError: nesting is bounded, so no walk can overflow the stack.
func TestDeepNestingIsAnError(t *testing.T) {
	ok := strings.Repeat("[", maxNesting) + strings.Repeat("]", maxNesting)
	if _, err := SerializedSize(json.RawMessage(ok)); err != nil {
		t.Fatalf("%d levels: %v", maxNesting, err)
	}
	for _, n := range []int{maxNesting + 1, 100000} {
		deep := strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)
		if _, err := SerializedSize(json.RawMessage(deep)); err == nil {
			t.Fatalf("%d levels: no error", n)
		}
	}
}
