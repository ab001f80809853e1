package misuse_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// gatewayFixtures is where the gateway's recordings of @posthog/mcp live: one event per file,
// from an McpServer with zod tools and a low-level Server with hand-written JSON Schema (see
// its README.md).
const gatewayFixtures = "../ingest/gateway/testdata/sdk"

type recordedEvent struct {
	Event      string                     `json:"event"`
	Properties map[string]json.RawMessage `json:"properties"`
}

func readRecorded(t *testing.T, name string) recordedEvent {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(gatewayFixtures, name))
	if err != nil {
		t.Fatal(err)
	}
	var e recordedEvent
	if err := json.Unmarshal(data, &e); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return e
}

func (e recordedEvent) str(t *testing.T, key string) string {
	t.Helper()
	var s string
	if raw, ok := e.Properties[key]; ok {
		if err := json.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", key, err)
		}
	}
	return s
}

// TestGatewayRecordings derives and classifies every recorded tool call against the schemas
// of its server's recorded tools/list (every page of a paginated one), keyed by server name as
// the consumer's cache is. The custom dispatcher's events (PostHogMCP) carry no server name:
// its calls are judged against its listing, which carries none either.
func TestGatewayRecordings(t *testing.T) {
	schemas := map[string]map[string]*misuse.Schema{}
	for _, f := range []string{"tools_list_zod.json", "tools_list_json.json", "tools_list_dispatcher.json",
		"tools_list_http_page_1.json", "tools_list_http_page_2.json", "tools_list_http_page_3.json"} {
		e := readRecorded(t, f)
		var resp struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(e.Properties["$mcp_response"], &resp); err != nil {
			t.Fatal(err)
		}
		server := e.str(t, "$mcp_server_name")
		if schemas[server] == nil {
			schemas[server] = map[string]*misuse.Schema{}
		}
		for _, tool := range resp.Tools {
			s, err := misuse.CompileSchema(tool.InputSchema)
			if err != nil {
				t.Errorf("%s %s: %v", server, tool.Name, err)
			}
			schemas[server][tool.Name] = s
		}
	}
	keys := func(source misuse.Source, k ...string) misuse.IgnoredKeys {
		if len(k) == 0 {
			k = nil
		}
		return misuse.IgnoredKeys{Keys: k, Total: len(k), Source: source}
	}
	none := func(r misuse.Reason) misuse.IgnoredKeys {
		return misuse.IgnoredKeys{Source: misuse.SourceNotMeasurable, Reason: r}
	}
	tests := []struct {
		file  string
		keys  misuse.IgnoredKeys
		class misuse.ErrorClass
	}{
		{"tool_call_ok.json", keys(misuse.SourceSchema), ""},
		{"tool_call_misnamed_top_level.json", keys(misuse.SourceSchema, "c"), ""},
		// zod's plain objects declare no additionalProperties, yet drop other keys.
		{"tool_call_nested_zod.json", keys(misuse.SourceSchema, "customer.mail", "items.1.qty", "note"), ""},
		// patternProperties with additionalProperties false; Authorization's value is redacted
		// but the key itself is known.
		{"tool_call_nested_json.json", keys(misuse.SourceSchema, "filters.severity", "headers.Authorization", "series.1.maths", "verbose"), ""},
		// anyOf, allOf with $ref, oneOf below the root; free-form objects admit anything.
		{"tool_call_composition.json", keys(misuse.SourceSchema, "target.dashbord_id", "annotation.author", "display.size"), ""},
		{"tool_call_ref_unions.json", keys(misuse.SourceSchema, "origin.alt", "stops.1.lng", "vehicle.colour", "window.start_at"), ""},
		// Records, catchall and loose objects declare every key.
		{"tool_call_open_objects.json", keys(misuse.SourceSchema, "colour"), ""},
		// The SDK's depth cut is below an object that admits anything.
		{"tool_call_deep_arguments.json", keys(misuse.SourceSchema), ""},
		// api_key's value and subschema are both redacted: taken as the string a secret is.
		{"tool_call_redacted_arguments.json", keys(misuse.SourceSchema, "options.retry"), ""},
		{"tool_call_truncated.json", none(misuse.ReasonArgumentsTruncated), ""},
		{"tool_call_root_union.json", none(misuse.ReasonRootUnion), ""},
		{"tool_call_notice_ignored_keys.json", keys(misuse.SourceResponse, "maxWords"), ""},
		{"tool_call_response_ignored_keys.json", keys(misuse.SourceResponse, "title", "query.source.serie"), ""},
		{"tool_call_strict_refused.json", keys(misuse.SourceSchema, "notifications.sms"), misuse.ClassValidationUnknownKey},
		{"tool_call_missing_required.json", keys(misuse.SourceSchema), misuse.ClassValidationRequired},
		{"tool_call_missing_required_json.json", keys(misuse.SourceSchema), misuse.ClassValidationRequired},
		{"tool_call_wrong_type.json", keys(misuse.SourceSchema), misuse.ClassValidationType},
		{"tool_call_wrong_type_json.json", keys(misuse.SourceSchema), misuse.ClassValidationType},
		{"tool_call_unknown_tool_zod.json", none(misuse.ReasonNoSchema), misuse.ClassUnknownTool},
		{"tool_call_unknown_tool_json.json", none(misuse.ReasonNoSchema), misuse.ClassUnknownTool},
		// A page-1 tool of a paginated listing.
		{"tool_call_http_page_one.json", keys(misuse.SourceSchema), ""},
		// PostHogMCP.captureToolCall: $mcp_parameters are the arguments the tool got.
		{"tool_call_dispatcher_ok.json", keys(misuse.SourceSchema), ""},
		{"tool_call_dispatcher_misnamed.json", keys(misuse.SourceSchema, "precision"), ""},
		{"tool_call_dispatcher_wrong_type.json", keys(misuse.SourceSchema), misuse.ClassValidationType},
		{"tool_call_dispatcher_unknown_tool.json", none(misuse.ReasonNoSchema), misuse.ClassUnknownTool},
	}
	seen := map[string]bool{}
	for _, tc := range tests {
		seen[tc.file] = true
		e := readRecorded(t, tc.file)
		server, tool := e.str(t, "$mcp_server_name"), e.str(t, "$mcp_tool_name")
		got := misuse.Derive(misuse.Call{Response: e.Properties["$mcp_response"], Parameters: e.Properties["$mcp_parameters"], Schema: schemas[server][tool]})
		if !reflect.DeepEqual(got, tc.keys) {
			t.Errorf("%s (%s %s): Derive = %+v, want %+v", tc.file, server, tool, got, tc.keys)
		}
		checkValidWalk(t, schemas[server][tool], e.Properties["$mcp_parameters"])
		if c := misuse.ClassifyError(e.str(t, "$mcp_error_message")); c != tc.class {
			t.Errorf("%s: ClassifyError(%q) = %q, want %q", tc.file, e.str(t, "$mcp_error_message"), c, tc.class)
		}
	}
	for _, f := range []string{"exception_wrong_type.json", "exception_unknown_tool_json.json", "exception_dispatcher_wrong_type.json"} {
		e := readRecorded(t, f)
		var list []struct {
			Value string `json:"value"`
		}
		if err := json.Unmarshal(e.Properties["$exception_list"], &list); err != nil || len(list) == 0 {
			t.Fatalf("%s: %v", f, err)
		}
		want := map[string]misuse.ErrorClass{"exception_wrong_type.json": misuse.ClassValidationType, "exception_unknown_tool_json.json": misuse.ClassUnknownTool,
			"exception_dispatcher_wrong_type.json": misuse.ClassValidationType}[f]
		if c := misuse.ClassifyError(list[0].Value); c != want {
			t.Errorf("%s: ClassifyError(%q) = %q, want %q", f, list[0].Value, c, want)
		}
	}
	// A new recording gets an expectation here.
	files, _ := filepath.Glob(filepath.Join(gatewayFixtures, "tool_call_*.json"))
	for _, f := range files {
		if !seen[filepath.Base(f)] {
			t.Errorf("%s has no expectation in this test", filepath.Base(f))
		}
	}
}
