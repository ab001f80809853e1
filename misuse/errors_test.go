package misuse_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpulse/mcpulse/misuse"
)

// TestClassifyErrorTypeScriptSDKs classifies the error messages and exceptions @posthog/mcp
// sent for the fixture sessions (TypeScript SDK 1.x with Zod 3 and 4, and 2.x).
func TestClassifyErrorTypeScriptSDKs(t *testing.T) {
	want := map[string]misuse.ErrorClass{
		"wrong_type":       misuse.ClassValidationType,
		"missing_required": misuse.ClassValidationRequired,
		"unrecognized_key": misuse.ClassValidationUnknownKey,
		"enum_and_missing": misuse.ClassValidationRequired, // required wins over the enum issue
		"unknown_tool":     misuse.ClassUnknownTool,
	}
	for _, f := range []string{"v1z3.json", "v1z4.json", "v2.json"} {
		s := loadSDKSession(t, f)
		label := labelsByOrder(t, s)
		seen := map[string]bool{}
		i := 0
		for _, e := range s.Events {
			switch e.Event {
			case "$mcp_tool_call":
				l := label[i]
				i++
				var msg string
				_ = json.Unmarshal(e.Properties["$mcp_error_message"], &msg)
				w, isErr := want[l]
				if !isErr {
					w = misuse.ClassNone
				}
				if got := misuse.ClassifyError(msg); got != w {
					t.Errorf("%s %s: ClassifyError(%q) = %q, want %q", f, l, msg, got, w)
				}
				seen[l] = true
			case "$exception":
				var list []struct {
					Value string `json:"value"`
				}
				if err := json.Unmarshal(e.Properties["$exception_list"], &list); err != nil || len(list) == 0 {
					t.Fatalf("%s: $exception_list: %v", f, err)
				}
				l := label[i-1] // the exception follows its tool call
				if got := misuse.ClassifyError(list[0].Value); got != want[l] {
					t.Errorf("%s %s exception: ClassifyError(%q) = %q, want %q", f, l, list[0].Value, got, want[l])
				}
			}
		}
		for l := range want {
			if !seen[l] {
				t.Errorf("%s: no tool call labelled %s", f, l)
			}
		}
	}
}

// labelsByOrder lists the fixture's call labels in the order of its $mcp_tool_call events.
func labelsByOrder(t *testing.T, s sdkSession) []string {
	t.Helper()
	var out []string
	for _, c := range s.Calls {
		out = append(out, c.Label)
	}
	n := 0
	for _, e := range s.Events {
		if e.Event == "$mcp_tool_call" {
			n++
		}
	}
	if n != len(out) {
		t.Fatalf("%s: %d tool call events for %d calls", s.Flavor, n, len(out))
	}
	return out
}

// TestClassifyErrorGoSDK runs a real server of the official Go SDK and classifies what it
// answers to the same mistakes.
func TestClassifyErrorGoSDK(t *testing.T) {
	type in struct {
		A int `json:"a"`
		B int `json:"b"`
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "go-fixture", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "get_sum"}, func(ctx context.Context, req *mcp.CallToolRequest, args in) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	})
	ct, st := mcp.NewInMemoryTransports()
	ctx := context.Background()
	ss, err := server.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	message := func(name string, args map[string]any) string {
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			var rpcErr *jsonrpc.Error
			if errors.As(err, &rpcErr) {
				return rpcErr.Message
			}
			return err.Error()
		}
		if !res.IsError || len(res.Content) == 0 {
			t.Fatalf("%s %v: not an error: %+v", name, args, res)
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	for _, tc := range []struct {
		name string
		args map[string]any
		want misuse.ErrorClass
	}{
		{"get_sum", map[string]any{"a": "x", "b": 1}, misuse.ClassValidationType},
		{"get_sum", map[string]any{"a": 1}, misuse.ClassValidationRequired},
		{"get_sum", map[string]any{"a": 1, "b": 2, "c": 3}, misuse.ClassValidationUnknownKey},
		{"no_such_tool", map[string]any{}, misuse.ClassUnknownTool},
	} {
		msg := message(tc.name, tc.args)
		t.Logf("%s %v: %q", tc.name, tc.args, msg)
		if got := misuse.ClassifyError(msg); got != tc.want {
			t.Errorf("%s %v: ClassifyError(%q) = %q, want %q", tc.name, tc.args, msg, got, tc.want)
		}
	}
}

func TestClassifyErrorMessages(t *testing.T) {
	tests := []struct {
		msg  string
		want misuse.ErrorClass
	}{
		{"", misuse.ClassNone},
		{"   ", misuse.ClassNone},
		// The example (TypeScript SDK 1.x, Zod 4 wording without the path suffix).
		{"MCP error -32602: Input validation error: Invalid arguments for tool get-sum: expected number, received string", misuse.ClassValidationType},
		// Older TypeScript SDK 1.x: Zod's JSON issue list after the colon.
		{"MCP error -32602: Invalid arguments for tool get-sum: [\n  {\n    \"code\": \"invalid_type\",\n    \"expected\": \"number\",\n    \"received\": \"string\",\n    \"path\": [\"a\"],\n    \"message\": \"Expected number, received string\"\n  }\n]", misuse.ClassValidationType},
		{"MCP error -32602: Invalid arguments for tool get-sum: [\n  {\n    \"code\": \"invalid_type\",\n    \"expected\": \"number\",\n    \"received\": \"undefined\",\n    \"path\": [\"b\"],\n    \"message\": \"Required\"\n  }\n]", misuse.ClassValidationRequired},
		{"MCP error -32602: Invalid arguments for tool x: [{\"code\": \"unrecognized_keys\", \"keys\": [\"b\"], \"path\": [], \"message\": \"Unrecognized key(s) in object: 'b'\"}]", misuse.ClassValidationUnknownKey},
		{"MCP error -32602: Invalid arguments for tool get-sum: arguments contain more than the maximum of 1000 elements", misuse.ClassValidationOther},
		{"Input validation error: Invalid arguments for tool x: query.kind: Invalid option: expected one of \"a\"|\"b\"", misuse.ClassValidationOther},
		{"Input validation error: Invalid arguments for tool x: Invalid enum value. Expected 'a' | 'b', received 'c' at kind", misuse.ClassValidationOther},
		{"MCP error -32602: Tool get-summ disabled", misuse.ClassUnknownTool},
		{"Unknown tool: get-summ", misuse.ClassUnknownTool},
		{`unknown tool "get-summ"`, misuse.ClassUnknownTool},
		// Ajv 8.20.0 (Ajv2020, errorsText) refusing a key under `unevaluatedProperties: false`,
		// at the root and nested, behind the TypeScript SDK's prefix; and the same refusal
		// under `additionalProperties: false`.
		{"MCP error -32602: Input validation error: Invalid arguments for tool radar: data must NOT have unevaluated properties", misuse.ClassValidationUnknownKey},
		{"Input validation error: data/filter must NOT have unevaluated properties", misuse.ClassValidationUnknownKey},
		{"Input validation error: data must NOT have additional properties", misuse.ClassValidationUnknownKey},
		// Python SDK.
		{"Input validation error: 'b' is a required property", misuse.ClassValidationRequired},
		{"Input validation error: 'x' is not of type 'number'", misuse.ClassValidationType},
		{"Input validation error: Additional properties are not allowed ('c' was unexpected)", misuse.ClassValidationUnknownKey},
		{"Error executing tool get_sum: 1 validation error for get_sumArguments\nb\n  Field required [type=missing, input_value={'a': 1}, input_type=dict]", misuse.ClassValidationRequired},
		{"Error executing tool get_sum: 1 validation error for get_sumArguments\na\n  Input should be a valid integer, unable to parse string as an integer [type=int_parsing, input_value='x', input_type=str]", misuse.ClassValidationType},
		// A tool's own errors are not validation errors, whatever they say.
		{"expected number, received string", misuse.ClassOther},
		{"Tool execution failed: resource not found", misuse.ClassOther},
		{"Insight 42 not found", misuse.ClassOther},
		{"Required", misuse.ClassOther},
		{"MCP error -32603: Internal error", misuse.ClassOther},
	}
	for _, tc := range tests {
		if got := misuse.ClassifyError(tc.msg); got != tc.want {
			t.Errorf("ClassifyError(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
	if !misuse.ClassValidationType.IsValidation() || misuse.ClassUnknownTool.IsValidation() || misuse.ClassOther.IsValidation() {
		t.Error("IsValidation")
	}
}
