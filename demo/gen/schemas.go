package gen

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"path"
	"sort"
	"strings"
)

// toolSchemaFiles holds real MCP tool schemas copied from public MCP servers (GitHub's
// github-mcp-server, PostHog's MCP server and its standalone predecessor, getsentry/sentry-mcp,
// containers/kubernetes-mcp-server); testdata/toolschemas/MANIFEST.tsv says where each file
// came from (repository, path, commit, SHA-256). The files are byte-for-byte copies, so their
// formats differ: see loadTools.
//
//go:embed testdata/toolschemas
var toolSchemaFiles embed.FS

const toolSchemaDir = "testdata/toolschemas"

// ToolSchemaFiles returns the embedded tool schema files as they were copied (see
// toolSchemaFiles and loadTools for their formats), rooted at their directory: the demo serves
// them as MCP servers to leave schema-check history.
func ToolSchemaFiles() fs.FS {
	sub, err := fs.Sub(toolSchemaFiles, toolSchemaDir)
	if err != nil {
		panic("BUG: " + err.Error())
	}
	return sub
}

// tool is one MCP tool the generator calls: its name, the server it belongs to (the `source`
// property) and its decoded JSON Schema inputSchema.
type tool struct {
	Name   string
	Server string
	Schema map[string]any
	// Exec is true for PostHog's tools, which agents also reach through the `exec` tool.
	Exec bool
	// Weight is the tool's relative popularity among direct calls.
	Weight float64
	// Description is the tool's description when its schema file has one.
	Description string
}

// Multi-tool files: which of their tools the generator uses (the files hold many more).
var (
	sentryTools = []string{
		"search_events", "get_issue_details", "update_issue", "find_projects", "find_organizations",
		"create_uptime_monitor", "execute_sentry_tool", "analyze_issue_with_seer", "whoami",
	}
	kubernetesTools = []string{
		"pods_list", "pods_log", "resources_get", "resources_list", "pods_exec", "events_list",
		"namespaces_list", "resources_create_or_update", "tekton_pipeline_start", "tekton_taskrun_logs",
	}
	// standaloneTools maps PostHog's standalone MCP server (PostHog/mcp) tool names, as listed in
	// its schema/tool-definitions.json, to the zod schema names its schema/tool-inputs.json
	// holds them under (the repository's typescript/src/tools/index.ts wires them; the names
	// follow its schema constants).
	standaloneTools = map[string]string{
		"create-feature-flag":      "FeatureFlagCreateSchema",
		"update-feature-flag":      "FeatureFlagUpdateSchema",
		"experiment-create":        "ExperimentCreateSchema",
		"query-run":                "QueryRunInputSchema",
		"add-insight-to-dashboard": "DashboardAddInsightSchema",
		"list-errors":              "ErrorTrackingListSchema",
		"switch-project":           "ProjectSetActiveSchema",
	}
	// popularity lists tools roughly from most to least called; tools not listed come after,
	// in name order. Weights follow a Zipf-like curve over this order.
	popularity = []string{
		"execute-sql", "search_code", "get_file_contents", "list_issues", "pods_list", "search_events",
		"get_issue_details", "insight-get", "pull_request_read", "query-run", "list_commits",
		"resources_get", "issue_write", "docs-search", "pods_log", "create_pull_request_review",
		"feature-flag-get-all", "dashboard-create", "find_projects", "resources_list", "get_me",
		"create_or_update_file", "push_files", "update_issue", "create-feature-flag", "survey-create",
	}
)

// execToolName is the name of PostHog's CLI-style tool that wraps every other PostHog tool.
const execToolName = "exec"

// catalog is the set of tools the generator draws from.
type catalog struct {
	tools  []*tool          // direct-call candidates (every tool, exec included), by weight order
	byName map[string]*tool // every tool
	exec   *tool            // PostHog's exec tool
	execOK []*tool          // tools reachable through exec (PostHog's)
	cum    []float64        // cumulative weights over tools
}

// loadTools reads the embedded schema files. Formats:
//   - github-mcp-server__*.snap: one tool object {name, description, inputSchema, annotations};
//   - posthog__*.json: PostHog's tool-schema snapshots, the inputSchema alone (the tool name is
//     the file name), except exec-tool.json, a whole tool object;
//   - sentry-mcp__toolDefinitions.json, kubernetes-mcp-server__toolsets-*.json: arrays of tool
//     objects (only the tools named in sentryTools / kubernetesTools are used);
//   - posthog-mcp-standalone__tool-inputs.json: {"definitions": {SchemaName: inputSchema}} with
//     tool-definitions.json listing the tool names (see standaloneTools).
func loadTools() (*catalog, error) {
	entries, err := toolSchemaFiles.ReadDir(toolSchemaDir)
	if err != nil {
		return nil, err
	}
	c := &catalog{byName: map[string]*tool{}}
	add := func(name, server, description string, schema map[string]any) error {
		if schema == nil {
			return fmt.Errorf("tool %s (%s): no inputSchema", name, server)
		}
		if _, dup := c.byName[name]; dup {
			return fmt.Errorf("tool %s defined twice", name)
		}
		t := &tool{Name: name, Server: server, Schema: schema, Exec: server == "posthog", Description: description}
		c.byName[name] = t
		return nil
	}
	wanted := func(list []string) map[string]bool {
		m := map[string]bool{}
		for _, n := range list {
			m[n] = true
		}
		return m
	}
	sentry, kube := wanted(sentryTools), wanted(kubernetesTools)
	var standaloneNames map[string]json.RawMessage
	var standaloneDefs map[string]map[string]any

	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || name == "MANIFEST.tsv" {
			continue
		}
		server, file, ok := strings.Cut(name, "__")
		if !ok {
			return nil, fmt.Errorf("%s: file name lacks the source prefix", name)
		}
		data, err := toolSchemaFiles.ReadFile(path.Join(toolSchemaDir, name))
		if err != nil {
			return nil, err
		}
		switch {
		case server == "github-mcp-server" || (server == "posthog" && file == "exec-tool.json"):
			var obj struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				InputSchema map[string]any `json:"inputSchema"`
			}
			if err := json.Unmarshal(data, &obj); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if err := add(obj.Name, server, obj.Description, obj.InputSchema); err != nil {
				return nil, err
			}
		case server == "posthog":
			var schema map[string]any
			if err := json.Unmarshal(data, &schema); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			if err := add(strings.TrimSuffix(file, ".json"), server, "", schema); err != nil {
				return nil, err
			}
		case server == "sentry-mcp" || server == "kubernetes-mcp-server":
			var list []struct {
				Name        string         `json:"name"`
				Description string         `json:"description"`
				InputSchema map[string]any `json:"inputSchema"`
			}
			if err := json.Unmarshal(data, &list); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			for _, t := range list {
				if (server == "sentry-mcp" && sentry[t.Name]) || (server == "kubernetes-mcp-server" && kube[t.Name]) {
					if err := add(t.Name, server, t.Description, t.InputSchema); err != nil {
						return nil, err
					}
				}
			}
		case server == "posthog-mcp-standalone" && file == "tool-definitions.json":
			if err := json.Unmarshal(data, &standaloneNames); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		case server == "posthog-mcp-standalone" && file == "tool-inputs.json":
			var doc struct {
				Definitions map[string]map[string]any `json:"definitions"`
			}
			if err := json.Unmarshal(data, &doc); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			standaloneDefs = doc.Definitions
		default:
			return nil, fmt.Errorf("%s: unknown schema file format", name)
		}
	}
	for _, toolName := range sortedMapKeys(standaloneTools) {
		if _, ok := standaloneNames[toolName]; !ok {
			return nil, fmt.Errorf("standalone tool %s is not in tool-definitions.json", toolName)
		}
		var def struct {
			Description string `json:"description"`
		}
		_ = json.Unmarshal(standaloneNames[toolName], &def) // a definition without one gets a made-up description
		if err := add(toolName, "posthog-mcp-standalone", def.Description, standaloneDefs[standaloneTools[toolName]]); err != nil {
			return nil, err
		}
	}
	for _, list := range [][]string{sentryTools, kubernetesTools} {
		for _, n := range list {
			if c.byName[n] == nil {
				return nil, fmt.Errorf("tool %s not found in the embedded schemas", n)
			}
		}
	}
	c.exec = c.byName[execToolName]
	if c.exec == nil {
		return nil, fmt.Errorf("exec tool schema missing")
	}
	c.exec.Exec = false

	// Order: the popularity list, then the rest by name; Zipf-like weights.
	rank := map[string]int{}
	for i, n := range popularity {
		rank[n] = i
	}
	for _, n := range sortedMapKeys(c.byName) {
		c.tools = append(c.tools, c.byName[n])
	}
	sort.SliceStable(c.tools, func(i, j int) bool {
		ri, iok := rank[c.tools[i].Name]
		rj, jok := rank[c.tools[j].Name]
		switch {
		case iok && jok:
			return ri < rj
		case iok != jok:
			return iok
		}
		return false
	})
	total := 0.0
	for i, t := range c.tools {
		t.Weight = 1 / math.Pow(float64(i+2), 0.9)
		total += t.Weight
		c.cum = append(c.cum, total)
		if t.Exec {
			c.execOK = append(c.execOK, t)
		}
	}
	return c, nil
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
