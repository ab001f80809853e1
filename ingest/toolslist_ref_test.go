package ingest

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// decodeToolsList reads each tool's members, and the result's, in one pass over each object.
// It is checked against the reference below: one objectValue (a whole scan of the object) per
// member read, as it was written first.

// objectValueRef is objectValue as one scan per key.
func objectValueRef(raw []byte, key string) []byte {
	if len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var found []byte
	for i := skipSpace(raw, 1); i < len(raw) && raw[i] == '"'; {
		keyEnd := skipString(raw, i)
		j := skipSpace(raw, skipSpace(raw, keyEnd)+1)
		end, _ := skipValue(raw, j)
		if string(unquote(raw[i:keyEnd])) == key {
			found = raw[j:end]
		}
		if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return found
}

// decodeToolsListRef is the reference decode of a $mcp_tools_list event.
func decodeToolsListRef(p *propertyReader, ev *Event) {
	t := &ToolsList{}
	p.session(&t.Session)
	listed := keyListedToolNames
	if raw := p.raw(listed); !isNull(raw) {
		items, ok := arrayItems(raw)
		if !ok {
			p.v.add(path(listed), "must be an array of strings")
		}
		for i, item := range items {
			s, ok := stringValue(item)
			if !ok || isNull(item) {
				p.v.add(path(listed)+"["+itoa(i)+"]", "must be a string")
				continue
			}
			t.ListedToolNames = append(t.ListedToolNames, safetext.Bound(s, safetext.MaxName))
		}
	}
	tools, _ := arrayItems(objectValueRef(p.raw(keyResponse), "tools"))
	for _, item := range tools {
		name, ok := stringValue(objectValueRef(item, "name"))
		if !ok || name == "" {
			continue
		}
		desc, _ := stringValue(objectValueRef(item, "description"))
		t.Tools = append(t.Tools, ServedTool{Name: safetext.Bound(name, safetext.MaxName), Description: desc, InputSchema: objectValueRef(item, "inputSchema")})
	}
	t.NextCursor, _ = stringValue(objectValueRef(p.raw(keyResponse), "nextCursor"))
	params := p.peek(keyParameters)
	for _, at := range [][]byte{objectValueRef(objectValueRef(params, "request"), "params"), objectValueRef(params, "params"), params} {
		if c := objectValueRef(at, "cursor"); c != nil && !isNull(c) {
			t.Cursor, _ = stringValue(c)
			t.HasCursor = true
			break
		}
	}
	ev.ToolsList = t
}

// checkToolsListDecode parses data with decodeToolsList and with the reference, and compares
// the events (or errors), and objectValue with objectValueRef on the result's members. It
// swaps KindToolsList.decode while it parses: no test of the package may run in parallel with
// it.
func checkToolsListDecode(t *testing.T, data []byte) {
	t.Helper()
	ev, err := Parse(data)
	KindToolsList.decode = decodeToolsListRef
	want, wantErr := Parse(data)
	KindToolsList.decode = decodeToolsList
	if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != wantErr.Error()) || !reflect.DeepEqual(ev, want) {
		t.Fatalf("decodeToolsList differs from the reference on %q:\n%+v, %v\n%+v, %v", data, ev, err, want, wantErr)
	}
	if ev == nil || ev.ToolsList == nil {
		return
	}
	d := getDecodeState()
	defer putDecodeState(d)
	if d.scan(data) != nil {
		return
	}
	d.match()
	if i := d.slots[keyResponse]; i > 0 {
		result := d.value(&d.pairs[i-1])
		for _, key := range []string{"tools", "nextCursor", "name", "x", ""} {
			if got, want := objectValue(result, key), objectValueRef(result, key); !reflect.DeepEqual(got, want) {
				t.Fatalf("objectValue(%q, %q) = %q, want %q", result, key, got, want)
			}
		}
	}
}

// toolsListEvent is a $mcp_tools_list event with the given result and request.
func toolsListEvent(response, parameters string) []byte {
	return []byte(`{"uuid":"0190d2a4-7b1e-7c3a-9f00-0123456789ab","event":"$mcp_tools_list","distinct_id":"d","timestamp":"2026-01-01T00:00:00Z","properties":{"$mcp_source":"posthog_mcp_analytics","$session_id":"s","$mcp_server_name":"srv","$mcp_server_version":"1","$mcp_listed_tool_names":["a","b"],"$mcp_parameters":` + parameters + `,"$mcp_response":` + response + `}}`)
}

// toolsListResults are results to check decodeToolsList on: the seeds of FuzzParseToolsList
// and tricky ones.
func toolsListResults(tb testing.TB) []string {
	tb.Helper()
	out := []string{
		`{"tools":[{"name":"t","inputSchema":{"type":"object"}}]}`,
		`{"tools":[{"name":"a","name":"b","description":"d1","description":7,"inputSchema":1,"inputSchema":{"a":"\"}"}}],"nextCursor":"c","tools":[]}`,
		`{"tools":[1,"x",null,[],{},{"name":""},{"name":null},{"name":3},{"n\u0061me":"esc","descr\u0069ption":"caf\u00e9 \"q\""}],"nextCursor":null}`,
		` { "tools" : [ { "name" : "sp" , "inputSchema" : { "a" : [ 1 , 2 ] } } , { "name":"sp2" } ] , "nextCursor" : "n" } `,
		`{"tools":{"name":"not an array"},"nextCursor":5}`,
		`{"tools":[{"name":"\\\\","description":"\\\"","inputSchema":{"\\\"":"\\\\"}}]}`,
		`[]`, `null`, `"s"`, `{}`, `{"tools":[]}`,
	}
	files, _ := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParseToolsList", "*"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		lines := strings.SplitN(string(data), "\n", 2)
		if len(lines) < 2 {
			continue
		}
		lit := strings.TrimSuffix(strings.TrimPrefix(strings.TrimSpace(lines[1]), "[]byte("), ")")
		s, err := strconv.Unquote(lit)
		if err != nil {
			tb.Fatalf("%s: %v", f, err)
		}
		out = append(out, s)
	}
	return out
}

func TestToolsListDecodeMatchesReference(t *testing.T) {
	params := []string{`{"request":{"params":{"cursor":"c1"}}}`, `{"params":{"cursor":null},"cursor":""}`, `null`, `[]`, `{"request":{"params":{}}}`}
	for _, r := range toolsListResults(t) {
		for _, p := range params {
			checkToolsListDecode(t, toolsListEvent(r, p))
		}
	}
	data, err := os.ReadFile(filepath.Join("testdata", "sdk", "tools_list.json"))
	if err != nil {
		t.Fatal(err)
	}
	checkToolsListDecode(t, data)
}

// FuzzToolsListDecode: decodeToolsList agrees with the reference on any result and request.
func FuzzToolsListDecode(f *testing.F) {
	for _, r := range toolsListResults(f) {
		f.Add(r, `{"request":{"params":{"cursor":"c1"}}}`)
	}
	f.Fuzz(func(t *testing.T, response, parameters string) {
		checkToolsListDecode(t, toolsListEvent(response, parameters))
	})
}
