package misuse_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// sdkSession is one testdata/sdk fixture: the events @posthog/mcp sent for one session.
type sdkSession struct {
	Flavor string `json:"flavor"`
	Calls  []struct {
		Label string `json:"label"`
		Name  string `json:"name"`
	} `json:"calls"`
	Events []struct {
		Event      string                     `json:"event"`
		Properties map[string]json.RawMessage `json:"properties"`
	} `json:"events"`
}

func loadSDKSession(t testing.TB, file string) sdkSession {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "sdk", file))
	if err != nil {
		t.Fatal(err)
	}
	var s sdkSession
	if err := json.Unmarshal(data, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// servedSchemas compiles every tool schema of the session's $mcp_tools_list event, as the
// consumer's cache would.
func servedSchemas(t testing.TB, s sdkSession) map[string]*misuse.Schema {
	t.Helper()
	out := map[string]*misuse.Schema{}
	for _, e := range s.Events {
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
			sch, err := misuse.CompileSchema(tool.InputSchema)
			if err != nil {
				t.Fatalf("%s: compile %s: %v", s.Flavor, tool.Name, err)
			}
			out[tool.Name] = sch
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s: no tools/list event", s.Flavor)
	}
	return out
}

// TestSDKFixtures derives every fixture call's ignored keys as the consumer would: the
// schemas from the session's $mcp_tools_list event, the call from its $mcp_tool_call event.
func TestSDKFixtures(t *testing.T) {
	schema := func(keys ...string) misuse.IgnoredKeys {
		if len(keys) == 0 {
			keys = nil
		}
		return misuse.IgnoredKeys{Keys: keys, Total: len(keys), Source: misuse.SourceSchema}
	}
	want := map[string]misuse.IgnoredKeys{
		"ok":               schema(),
		"wrong_type":       schema(),
		"missing_required": schema(),
		// The SDK removed the injected context argument before capturing.
		"extra_keys":       schema("c"),
		"nested_keys":      schema("title", "query.serie", "query.series.0.maht", "query.series.1.propery"),
		"unrecognized_key": schema("b"),
		"enum_and_missing": schema(),
		"unknown_tool":     {Source: misuse.SourceNotMeasurable, Reason: misuse.ReasonNoSchema},
		// password is undeclared (its value redacted by the SDK); tags.token is a redacted
		// string in a string map.
		"redacted": schema("password"),
		// l1 is undeclared; the SDK's depth cut below it hides nothing reportable.
		"deep":          schema("query.series.0.l1"),
		"report_object": {Keys: []string{"title", "query.source.serie"}, Total: 2, Source: misuse.SourceResponse},
		"report_text":   {Keys: []string{"title", "x?y"}, Total: 2, Source: misuse.SourceResponse},
	}
	for _, f := range []string{"v1z3.json", "v1z4.json", "v2.json"} {
		s := loadSDKSession(t, f)
		schemas := servedSchemas(t, s)
		labels := labelsByOrder(t, s)
		i := 0
		for _, e := range s.Events {
			if e.Event != "$mcp_tool_call" {
				continue
			}
			label := labels[i]
			i++
			var name string
			if err := json.Unmarshal(e.Properties["$mcp_tool_name"], &name); err != nil {
				t.Fatal(err)
			}
			got := misuse.Derive(misuse.Call{Response: e.Properties["$mcp_response"], Parameters: e.Properties["$mcp_parameters"], Schema: schemas[name]})
			if !reflect.DeepEqual(got, want[label]) {
				t.Errorf("%s %s: Derive = %+v, want %+v", f, label, got, want[label])
			}
			checkValidWalk(t, schemas[name], e.Properties["$mcp_parameters"])
		}
	}
}

// TestSDKFixtureSchemasTruncated: the SDK's depth cut reaches even this small server's
// listing (create-insight's series item properties), and nothing else is cut.
func TestSDKFixtureSchemasTruncated(t *testing.T) {
	for _, f := range []string{"v1z3.json", "v1z4.json", "v2.json"} {
		s := loadSDKSession(t, f)
		for name, sch := range servedSchemas(t, s) {
			if want := name == "create-insight"; sch.Truncated() != want {
				t.Errorf("%s %s: Truncated() = %v, want %v", f, name, sch.Truncated(), want)
			}
		}
	}
}
