package misuse

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// tokenTrace reads a whole document token by token (skipping the value after every skip-th
// name), recording each kind and value read.
func tokenTrace(t tokens, skip int) string {
	var b strings.Builder
	names := 0
	for n := 0; n < 100000; n++ {
		k := t.PeekKind()
		fmt.Fprintf(&b, "%c", max(k, '.'))
		switch k {
		case 0:
			return b.String()
		case '{', '}', '[', ']':
			if err := t.ReadDelim(); err != nil {
				return b.String() + " error"
			}
		default:
			v, err := t.ReadValue()
			if err != nil {
				return b.String() + " error"
			}
			b.WriteString(strconv.Quote(string(v)))
			// A member name is followed by its value: skip some.
			if k == '"' && skip > 0 {
				if names++; names%skip == 0 && t.PeekKind() != '}' && t.PeekKind() != ']' && t.PeekKind() != '"' {
					if err := t.SkipValue(); err != nil {
						return b.String() + " skip error"
					}
					b.WriteString("<skipped>")
				}
			}
		}
	}
	return b.String()
}

// The boundaries reader reads the same tokens as jsontext's decoder from any valid document.
func TestBoundariesMatchJSONText(t *testing.T) {
	docs := []string{
		`{}`, `[]`, ` { "a" : [ 1 , -2.5e-3 , true , false , null , "x" ] , "b" : { } } `,
		`{"a\"b":"c\\","d":"\"","e":"\\\"}","f":["]","[","{","}"],"g":{"h":"\u0022"}}`,
		`[[[[1]],[[2,3]]],{"a":[{"b":[]}]}]`, `{"a":0,"b":-0,"c":1E+2,"d":12.5}`,
		"{\"a\":\"\xff\xfe\",\"\xc3\xa9\":\"\\ud800\"}", "[\n\t1\r\n,2 ]", `"x"`, `123`, `null`,
	}
	for _, glob := range []string{"testdata/fuzz/FuzzFromArguments/*", "testdata/fuzz/FuzzFromResponse/*"} {
		files, _ := filepath.Glob(glob)
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, line := range strings.Split(string(data), "\n")[1:] {
				if s, ok := strings.CutPrefix(line, "[]byte("); ok {
					if v, err := strconv.Unquote(strings.TrimSuffix(s, ")")); err == nil {
						docs = append(docs, v)
					}
				}
			}
		}
	}
	files, _ := filepath.Glob("testdata/sdk/*.json")
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, string(data))
	}
	r := rand.New(rand.NewPCG(3, 4))
	spaced := func(d string) string { // whitespace after some structural bytes, outside strings
		var b strings.Builder
		inString, escaped := false, false
		for i := 0; i < len(d); i++ {
			c := d[i]
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case inString && c == '\\':
				escaped = true
			case c == '"':
				inString = !inString
			case !inString && strings.IndexByte("{[,:]}", c) >= 0 && r.IntN(2) == 0:
				b.WriteString(" \n\t"[:1+r.IntN(3)])
			}
		}
		return b.String()
	}
	checkedTokens := checked{jsontext.NewDecoder(bytes.NewReader(nil))}
	n := 0
	for _, d := range docs {
		for _, doc := range []string{d, spaced(d)} {
			if !json.Valid([]byte(doc)) {
				continue
			}
			n++
			for skip := range 4 {
				checkedTokens.dec.Reset(bytes.NewBufferString(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
				want := tokenTrace(checkedTokens, skip)
				var b boundaries
				b.reset([]byte(doc))
				if got := tokenTrace(&b, skip); got != want {
					t.Fatalf("%q (skip %d):\n got %s\nwant %s", doc, skip, got, want)
				}
			}
		}
	}
	if n < 40 {
		t.Fatalf("only %d valid documents", n)
	}
}
