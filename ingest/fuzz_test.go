package ingest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// FuzzParse: Parse never panics, an event it accepts has Extra as one valid JSON object, and it
// survives MarshalJSON → Parse with the same uuid, kind, distinct_id, timestamp, typed
// properties and Extra (Properties comes back compacted). Seeds: testdata/fuzz/FuzzParse and
// the SDK-shaped events of testdata/sdk.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"uuid":"0190d2a4-7b1e-7c3a-9f00-0123456789ab","event":"$mcp_tool_call","distinct_id":"d","timestamp":"2026-01-01T00:00:00Z","properties":{"$mcp_tool_name":"t"}}`))
	for _, ev := range sdkEvents(f, "*.json") {
		f.Add(ev)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ev, err := ingest.Parse(data)
		// Decoded into a caller's slot, the same event (or the same error).
		slot := new(ingest.ToolCallSlot)
		inSlot, slotErr := ingest.ParseIn(data, slot)
		if (err == nil) != (slotErr == nil) || (err != nil && err.Error() != slotErr.Error()) || !reflect.DeepEqual(ev, inSlot) {
			t.Fatalf("ParseIn with a slot differs from Parse:\n%+v, %v\n%+v, %v", ev, err, inSlot, slotErr)
		}
		if err == nil && (ev.Kind == ingest.KindToolCall) == reflect.ValueOf(*slot).IsZero() {
			t.Fatalf("a %s event and its slot: zero = %v (a tool call goes into the slot, nothing else does)", ev.Kind, reflect.ValueOf(*slot).IsZero())
		}
		if err != nil {
			if ev != nil {
				t.Fatal("event returned with an error")
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted input encoding/json refuses: %q", data)
		}
		if !json.Valid(ev.Extra) || ev.Extra[0] != '{' {
			t.Fatalf("Extra is not a JSON object: %q", ev.Extra)
		}
		out, err := ev.MarshalJSON()
		if err != nil {
			t.Fatalf("MarshalJSON of a parsed event: %v", err)
		}
		again, err := ingest.Parse(out)
		if err != nil {
			t.Fatalf("re-Parse of %s (from %q): %v", out, data, err)
		}
		var compact bytes.Buffer
		if err := json.Compact(&compact, ev.Properties); err != nil {
			t.Fatal(err)
		}
		if again.UUID != ev.UUID || again.Kind != ev.Kind || again.Name != ev.Name || again.DistinctID != ev.DistinctID ||
			!again.Timestamp.Equal(ev.Timestamp) || !bytes.Equal(again.Properties, compact.Bytes()) || !bytes.Equal(again.Extra, ev.Extra) ||
			!reflect.DeepEqual(again.ToolCall, ev.ToolCall) || !reflect.DeepEqual(again.Recruitment, ev.Recruitment) {
			t.Fatalf("round trip changed the event:\n%+v\n%+v", ev, again)
		}
		if !utf8.ValidString(ev.DistinctID) {
			t.Fatalf("distinct_id is not valid UTF-8: %q", ev.DistinctID)
		}
	})
}

// FuzzIdentityHash: no panic, 64 lowercase hex characters, and for valid UTF-8 the same hash
// as a JSON.stringify emulation built on encoding/json (which differs from JavaScript only in
// escaping U+2028 and U+2029).
func FuzzIdentityHash(f *testing.F) {
	for _, s := range [][2]string{
		{"https://us.posthog.com", "user"}, {"", ""}, {"a\u2028b", "\\\"\u2029"}, {"\x00\x1f\x7f", "<>&"},
		{"\xff\xfe", "\xe2\x82"}, {"\U0001F600", "e\u0301"}, {`\u2028`, `\\u2028`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, instanceURL, distinctID string) {
		h := ingest.IdentityHash(instanceURL, distinctID)
		if len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			t.Fatalf("hash %q is not 64 lowercase hex characters", h)
		}
		if !utf8.ValidString(instanceURL) || !utf8.ValidString(distinctID) {
			return
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode([]string{instanceURL, distinctID}); err != nil {
			t.Fatal(err)
		}
		js := unescapeLineSeparators(strings.TrimSuffix(buf.String(), "\n"))
		if want := sha256Hex(js); h != want {
			t.Fatalf("IdentityHash(%q, %q) = %s, want %s (emulated JSON.stringify %q)", instanceURL, distinctID, h, want, js)
		}
	})
}

// unescapeLineSeparators turns encoding/json's \u2028 and \u2029 escapes back into the raw
// characters, as JSON.stringify leaves them, skipping escaped backslashes.
func unescapeLineSeparators(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		if rest := s[i:]; strings.HasPrefix(rest, `\u2028`) || strings.HasPrefix(rest, `\u2029`) {
			if rest[5] == '8' {
				b.WriteString("\u2028")
			} else {
				b.WriteString("\u2029")
			}
			i += 5
			continue
		}
		b.WriteString(s[i : i+2]) // any other escape, \\ included, kept whole
		i++
	}
	return b.String()
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// FuzzParseToolsList feeds a $mcp_tools_list event whose $mcp_response (the tools/list result
// as the SDK captured it) is arbitrary JSON text, and the listing it gives to the misuse
// listing state. Nothing may panic; an accepted event is a tools list whose tools are named,
// each schema absent or one valid JSON value; every tool with a schema is then judged by the
// listing state with that schema (never as unknown). Seeds: testdata/fuzz/FuzzParseToolsList
// (the SDK fixtures' results, a 2,000-key properties object).
func FuzzParseToolsList(f *testing.F) {
	f.Add([]byte(`{"tools":[{"name":"t","inputSchema":{"type":"object","properties":{"a":{"$ref":"#"}}}}]}`))
	f.Fuzz(func(t *testing.T, response []byte) {
		data := []byte(`{"uuid":"0190d2a4-7b1e-7c3a-9f00-0123456789ab","event":"$mcp_tools_list","distinct_id":"d","timestamp":"2026-01-01T00:00:00Z","properties":{"$mcp_source":"posthog_mcp_analytics","$session_id":"s","$mcp_server_name":"srv","$mcp_server_version":"1","$mcp_response":` + string(response) + `}}`)
		ev, err := ingest.Parse(data)
		if err != nil {
			return
		}
		if ev.Kind != ingest.KindToolsList || ev.ToolsList == nil {
			t.Fatalf("a $mcp_tools_list event parsed as %s", ev.Kind)
		}
		tl := ev.ToolsList
		pos := misuse.NoPosition
		page := misuse.ListingPage{Server: tl.ServerName, Version: tl.ServerVersion, Session: tl.SessionID, At: ev.Timestamp, Pos: pos,
			Cursor: tl.Cursor, HasCursor: tl.HasCursor, NextCursor: tl.NextCursor, Names: tl.ListedToolNames}
		for _, tool := range tl.Tools {
			if tool.Name == "" {
				t.Fatalf("a tool without a name: %+v", tool)
			}
			if tool.InputSchema != nil && !json.Valid(tool.InputSchema) {
				t.Fatalf("tool %q: schema %q is not JSON", tool.Name, tool.InputSchema)
			}
			page.Tools = append(page.Tools, misuse.ServedTool{Name: tool.Name, InputSchema: tool.InputSchema})
		}
		l := misuse.NewListings(misuse.ListingsConfig{})
		l.Observe(page)
		for _, tool := range page.Tools {
			if tool.InputSchema == nil {
				continue
			}
			c := misuse.CallAt{Server: tl.ServerName, Version: tl.ServerVersion, Session: tl.SessionID, At: ev.Timestamp.Add(time.Second), Pos: pos}
			v, err := l.JudgeContext(context.Background(), c, tool.Name)
			if err != nil || v.Unknown || v.Schema == nil {
				t.Fatalf("tool %q listed with a schema: %+v, %v", tool.Name, v, err)
			}
			misuse.Derive(misuse.Call{Parameters: []byte(`{"a":{"b":1}}`), Schema: v.Schema})
		}
	})
}
