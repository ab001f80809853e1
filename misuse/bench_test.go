package misuse_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// benchCall is an SDK-shaped tool call: about 1 KB of $mcp_parameters (nested objects, an
// array of objects, a string map, two misnamed keys) and about 1 KB of $mcp_response (a text
// result without a notice, so derivation goes all the way to the schema), with the served
// schema of the fixture server's create-insight tool plus a $ref'd series item.
func benchCall(b *testing.B) misuse.Call {
	b.Helper()
	schema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","$defs":{"Series":{"type":"object",` +
		`"properties":{"event":{"type":"string"},"math":{"type":"string","enum":["total","dau"]},"properties":{"type":"array","items":` +
		`{"type":"object","properties":{"key":{"type":"string"},"value":{},"operator":{"type":"string"}}}}}}},` +
		`"properties":{"name":{"type":"string"},"description":{"type":"string"},"query":{"type":"object","properties":{"kind":` +
		`{"type":"string","enum":["TrendsQuery","FunnelsQuery"]},"series":{"type":"array","items":{"$ref":"#/$defs/Series"}},` +
		`"dateRange":{"type":"object","properties":{"date_from":{"type":"string"},"date_to":{"type":"string"}}},"interval":{"type":"string"}}},` +
		`"tags":{"type":"object","additionalProperties":{"type":"string"}},"context":{"type":"string","description":"Explain why"}},` +
		`"required":["name","query","context"]}`
	s, err := misuse.CompileSchema([]byte(schema))
	if err != nil {
		b.Fatal(err)
	}
	var series []string
	for i := range 4 {
		series = append(series, fmt.Sprintf(`{"event":"event_%d","math":"total","properties":[{"key":"$browser","value":"Chrome","operator":"exact"},`+
			`{"key":"$os","value":["Mac OS X","Windows"],"operator":"exact","typo":1}]}`, i))
	}
	args := `{"name":"Weekly signups by browser","description":"Signups per week, split by browser, for the growth review",` +
		`"query":{"kind":"TrendsQuery","series":[` + strings.Join(series, ",") + `],"dateRange":{"date_from":"-30d","date_to":null},` +
		`"interval":"week","breakdown":"$browser"},"tags":{"team":"growth","owner":"data"}}`
	params := `{"request":{"id":7,"jsonrpc":"2.0","method":"tools/call","params":{"name":"create-insight","arguments":` + args + `}}}`
	text, _ := json.Marshal(strings.Repeat(`{"id":42,"name":"Weekly signups by browser","url":"https://example.com/insights/42"}`, 11))
	response := `{"content":[{"type":"text","text":` + string(text) + `}]}`
	c := misuse.Call{Parameters: []byte(params), Response: []byte(response), Schema: s}
	got := misuse.Derive(c)
	if got.Source != misuse.SourceSchema || got.Total != 5 {
		b.Fatalf("benchmark call derives %+v, want 5 keys from the schema", got)
	}
	b.SetBytes(int64(len(params) + len(response)))
	b.ReportMetric(float64(len(params)), "param-bytes")
	return c
}

// BenchmarkDerive is the cost per tool call event of ignored-key derivation (ns/op; divide
// by 1000 for µs per event).
func BenchmarkDerive(b *testing.B) {
	c := benchCall(b)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		misuse.Derive(c)
	}
}

// BenchmarkDeriveValid is BenchmarkDerive on parameters known to be valid JSON (Call.Valid),
// as the consumer derives.
func BenchmarkDeriveValid(b *testing.B) {
	c := benchCall(b)
	c.Valid = true
	if got, want := misuse.Derive(c), misuse.FromParameters(c.Schema, c.Parameters); !reflect.DeepEqual(got, want) {
		b.Fatalf("trusting the parameters derives %+v, checking them %+v", got, want)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		misuse.Derive(c)
	}
}

// BenchmarkCompileSchema is the cost of compiling one served schema (once per tool per
// server version in the consumer's cache).
func BenchmarkCompileSchema(b *testing.B) {
	schema := loadSDKSession(b, "v1z3.json")
	var raw json.RawMessage
	for _, e := range schema.Events {
		if e.Event == "$mcp_tools_list" {
			var resp struct {
				Tools []struct {
					InputSchema json.RawMessage `json:"inputSchema"`
				} `json:"tools"`
			}
			if err := json.Unmarshal(e.Properties["$mcp_response"], &resp); err != nil {
				b.Fatal(err)
			}
			raw = resp.Tools[1].InputSchema
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := misuse.CompileSchema(raw); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClassifyError(b *testing.B) {
	msg := "MCP error -32602: Input validation error: Invalid arguments for tool create-insight: Required at name\nInvalid enum value. Expected 'TrendsQuery' | 'FunnelsQuery', received 'Bad' at query.kind"
	b.ReportAllocs()
	for b.Loop() {
		misuse.ClassifyError(msg)
	}
}
