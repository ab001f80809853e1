package misuse

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// hashedSchema compiles text as Listings does, with its text's hash (DeriveCache's key).
func hashedSchema(t testing.TB, text []byte) *Schema {
	t.Helper()
	s, _ := CompileSchema(text)
	if s == nil {
		t.Fatalf("no schema for %q", text)
	}
	s.sum, s.hashed = sha256.Sum256(text), true
	return s
}

// revalued returns doc (valid JSON) with every value that appendShape writes as 's' or 'n'
// replaced by another of its kind: a document of the same shape, other values.
func revalued(doc []byte, variant int) []byte {
	out := make([]byte, 0, len(doc))
	for i := 0; i < len(doc); {
		switch b := doc[i]; {
		case b == '"':
			end := quotedEnd(doc, i)
			s := doc[i:end]
			j := end
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t' || doc[j] == '\n' || doc[j] == '\r') {
				j++
			}
			name := j < len(doc) && doc[j] == ':'
			if name || (len(s) > 1 && s[1] == '[' && len(s) <= maxMarkerBytes) || string(s) == toolsCallMethod {
				out = append(out, s...)
			} else {
				out = fmt.Appendf(out, `"other value %d"`, variant)
			}
			i = end
		case b == '-' || b >= '0' && b <= '9':
			out = fmt.Appendf(out, "%d", -7*variant)
			for i++; i < len(doc); i++ {
				if c := doc[i]; !(c >= '0' && c <= '9' || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-') {
					break
				}
			}
		default:
			out = append(out, b)
			i++
		}
	}
	return out
}

// checkCached derives params against s with the cache and without it, and fails on any
// difference; then the same for a revalued copy (the same shape: a cache hit once params was
// looked up).
func checkCached(t *testing.T, c *DeriveCache, s *Schema, params []byte) {
	t.Helper()
	for i, p := range [][]byte{params, params, revalued(params, 1), revalued(params, 2)} {
		call := Call{Parameters: p, Schema: s, Valid: true}
		want := Derive(call)
		if got := c.Derive(call); !reflect.DeepEqual(got, want) {
			t.Fatalf("parameters %q (variant %d): cached %+v, derived %+v", p, i, got, want)
		}
	}
}

// The cached outcome equals Derive's for the recorded SDK sessions' calls against their
// served schemas, for the same arguments with other values (hits), and in a captured request.
func TestDeriveCacheEqualsDerive(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "sdk", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no SDK fixtures: %v", err)
	}
	c := NewDeriveCache(0)
	calls := 0
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var session struct {
			Events []struct {
				Event      string                     `json:"event"`
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"events"`
		}
		if err := json.Unmarshal(data, &session); err != nil {
			t.Fatal(err)
		}
		schemas := map[string]*Schema{}
		for _, e := range session.Events {
			if e.Event != "$mcp_tools_list" {
				continue
			}
			var resp struct {
				Tools []struct {
					Name        string          `json:"name"`
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(e.Properties["$mcp_response"], &resp); err != nil {
				t.Fatal(err)
			}
			for _, tool := range resp.Tools {
				schemas[tool.Name] = hashedSchema(t, tool.InputSchema)
			}
		}
		for _, e := range session.Events {
			if e.Event != "$mcp_tool_call" {
				continue
			}
			var name string
			_ = json.Unmarshal(e.Properties["$mcp_tool_name"], &name)
			s := schemas[name]
			if s == nil {
				continue
			}
			calls++
			checkCached(t, c, s, e.Properties["$mcp_parameters"])
			// With its result: a response that reports keys wins, as in Derive.
			call := Call{Parameters: e.Properties["$mcp_parameters"], Response: e.Properties["$mcp_response"], Schema: s, Valid: true}
			if got, want := c.Derive(call), Derive(call); !reflect.DeepEqual(got, want) {
				t.Fatalf("%s %s with its response: cached %+v, derived %+v", file, name, got, want)
			}
		}
	}
	st := c.Stats()
	if calls == 0 || st.Hits == 0 || st.Misses == 0 || st.Entries == 0 || st.Entries > int(st.Misses) {
		t.Fatalf("%d calls, stats %+v: want hits and misses, at most an entry per miss", calls, st)
	}
}

// Each value the walk looks at is part of the shape, so documents that differ in one derive
// apart; the values it does not look at are not, so those share an entry.
func TestShapeKeepsWhatTheWalkReads(t *testing.T) {
	s := hashedSchema(t, []byte(`{"type":"object","properties":{"q":{"type":"string"},"api_key":{"type":"object","properties":{"a":{}}},"n":{"type":"array","items":{"type":"object","properties":{"x":{}}}}}}`))
	c := NewDeriveCache(0)
	for _, params := range []string{
		`{"q":"a","extra":1}`,
		`{"q":"[Object]","extra":1}`,
		`{"q":"a","api_key":"[redacted]"}`,
		`{"q":"a","api_key":"not redacted"}`,
		`{"request":{"method":"tools/call","params":{"arguments":{"q":"a","b":2}}}}`,
		`{"request":{"method":"tools/list","params":{"arguments":{"q":"a","b":2}}}}`,
		`{"request":{"method":"tools/call"}}`,
		`{"request":{"method":"other"}}`,
		`{"request":{"params":{"arguments":"` + MarkerArgumentsValidated + `"}}}`,
		`{"request":{"params":{"arguments":"not the marker"}}}`,
		`{"n":[{"x":1},{"y":1}]}`,
		`{"n":[{"x":1},{"x":1,"y":1}]}`,
		`{"n":[{"x":1},"[MaxProperties ~]"]}`,
		`{"q":"a","...":"[MaxProperties ~]"}`,
		`{"q\u0041":"a"}`, `{"qA":"a"}`,
		`null`, ``, `[]`, `"[Object]"`, `true`, `1`,
	} {
		checkCached(t, c, s, []byte(params))
	}
	shape := func(doc string) string {
		b, ok := appendShape(nil, []byte(doc), MaxShapeBytes)
		if !ok {
			t.Fatalf("%q: shape over the limit", doc)
		}
		return string(b)
	}
	if a, b := shape(`{"q": "one", "n": [1, 2.5e3, true, null]}`), shape(`{"q":"two","n":[-3,4,true,null]}`); a != b {
		t.Errorf("values the walk skips changed the shape: %q, %q", a, b)
	}
	for _, pair := range [][2]string{
		{`{"q":"a"}`, `{"r":"a"}`}, {`{"q":"a"}`, `{"q":"[Object]"}`}, {`{"q":"a"}`, `{"q":"tools/call"}`},
		{`{"q":1}`, `{"q":"1"}`}, {`{"q":true}`, `{"q":false}`}, {`{"q":null}`, `{"q":{}}`}, {`[1]`, `[1,1]`},
		{`{"a":{"b":1}}`, `{"a":{},"b":1}`},
	} {
		if shape(pair[0]) == shape(pair[1]) {
			t.Errorf("%s and %s share the shape %q", pair[0], pair[1], shape(pair[0]))
		}
	}
}

// The cache holds at most its entries, and arguments of a shape over MaxShapeBytes are
// derived without it.
func TestDeriveCacheIsBounded(t *testing.T) {
	s := hashedSchema(t, []byte(`{"properties":{"a":{}}}`))
	c := NewDeriveCache(8)
	for i := range 100 {
		checkCached(t, c, s, fmt.Appendf(nil, `{"a":1,"k%d":2}`, i))
	}
	if st := c.Stats(); st.Entries != 8 || st.Misses != 100 {
		t.Errorf("stats %+v: want 8 entries held of 100 shapes", st)
	}
	long := []byte(`{"a":1,"` + string(make([]byte, 0)) + fmt.Sprintf("%0*d", MaxShapeBytes, 0) + `":1}`)
	before := c.Stats()
	checkCached(t, c, s, long)
	if st := c.Stats(); st.Uncached != before.Uncached+4 || st.Entries != 8 {
		t.Errorf("stats %+v after a shape over %d bytes (before %+v): want it uncached", st, MaxShapeBytes, before)
	}
	// A schema compiled without its hash (not through Listings), or none: derived each time.
	plain, _ := CompileSchema([]byte(`{"properties":{"a":{}}}`))
	checkCached(t, c, plain, []byte(`{"a":1,"b":2}`))
	checkCached(t, c, nil, []byte(`{"a":1,"b":2}`))
	if st := c.Stats(); st.Uncached != before.Uncached+12 {
		t.Errorf("stats %+v: want the unhashed and absent schemas' calls uncached", st)
	}
}

// FuzzDeriveCache feeds arbitrary schemas and arguments (seeds: testdata/fuzz/FuzzDeriveCache,
// the FromArguments seeds): for valid JSON the cached outcome equals Derive's, for the
// arguments, the same shape with other values, and the arguments in a captured request.
func FuzzDeriveCache(f *testing.F) {
	f.Add([]byte(`{"properties":{"a":{}}}`), []byte(`{"a":1,"b":{"c":"[Object]"}}`))
	f.Fuzz(func(t *testing.T, schema, args []byte) {
		if !json.Valid(args) {
			return
		}
		s, _ := CompileSchema(schema)
		if s == nil {
			return
		}
		s.sum, s.hashed = sha256.Sum256(schema), true
		c := NewDeriveCache(4)
		checkCached(t, c, s, args)
		checkCached(t, c, s, append(append([]byte(`{"request":{"method":"tools/call","params":{"arguments":`), args...), "}}}"...))
	})
}
