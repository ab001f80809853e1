// Package mcptest serves the tool schemas of the corpus (testdata/mcp-tool-schemas) from a real
// MCP server built with the official Go SDK: for schemacheck's tests (over Streamable HTTP in
// the test process, over stdio from the re-executed test binary) and for the demo's
// schema-check history (demo).
//
// It reads the corpus with its own code, one layout per set, independent of
// schemacheck.LoadFromFile, so that the tests compare two separate readings.
package mcptest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool is a corpus tool as the server serves it: InputSchema is the corpus file's raw JSON.
type Tool struct {
	Name        string          `json:"name"`
	Title       string          `json:"title"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

// Sets are the corpus sets the tests serve, each with the corpus path (relative to the corpus
// root) that schemacheck.LoadFromFile reads for the same tools.
var Sets = map[string]string{
	"github":                  "github-mcp-server",
	"posthog":                 "posthog",
	"sentry":                  "sentry-mcp/toolDefinitions.json",
	"kubernetes-config":       "kubernetes-mcp-server/toolsets-config-tools.json",
	"kubernetes-core":         "kubernetes-mcp-server/toolsets-core-tools.json",
	"kubernetes-full":         "kubernetes-mcp-server/toolsets-full-tools.json",
	"kubernetes-multicluster": "kubernetes-mcp-server/toolsets-full-tools-multicluster.json",
	"kubernetes-openshift":    "kubernetes-mcp-server/toolsets-full-tools-openshift.json",
	"kubernetes-helm":         "kubernetes-mcp-server/toolsets-helm-tools.json",
	"kubernetes-kiali":        "kubernetes-mcp-server/toolsets-kiali-tools.json",
	"kubernetes-kubevirt":     "kubernetes-mcp-server/toolsets-kubevirt-tools.json",
	"kubernetes-tekton":       "kubernetes-mcp-server/toolsets-tekton-tools.json",
}

// LoadSet reads one set of the corpus at root.
func LoadSet(root, set string) ([]Tool, error) {
	rel, ok := Sets[set]
	if !ok {
		return nil, fmt.Errorf("mcptest: unknown set %q", set)
	}
	path := filepath.Join(root, rel)
	switch set {
	case "github": // one tool object per .snap file
		files, err := filepath.Glob(filepath.Join(path, "*.snap"))
		if err != nil {
			return nil, err
		}
		var tools []Tool
		for _, f := range files {
			t, err := readToolObject(f)
			if err != nil {
				return nil, err
			}
			tools = append(tools, t)
		}
		return tools, nil
	case "posthog": // <tool>.json bare input schemas, plus exec-tool.json: the exec tool object
		files, err := filepath.Glob(filepath.Join(path, "*.json"))
		if err != nil {
			return nil, err
		}
		var tools []Tool
		for _, f := range files {
			if filepath.Base(f) == "exec-tool.json" {
				t, err := readToolObject(f)
				if err != nil {
					return nil, err
				}
				tools = append(tools, t)
				continue
			}
			data, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			tools = append(tools, Tool{Name: strings.TrimSuffix(filepath.Base(f), ".json"), InputSchema: data})
		}
		return tools, nil
	default: // sentry and kubernetes: a JSON array of tool objects
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var list []Tool
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return list, nil
	}
}

func readToolObject(file string) (Tool, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return Tool{}, err
	}
	var t Tool
	if err := json.Unmarshal(data, &t); err != nil {
		return Tool{}, fmt.Errorf("%s: %w", file, err)
	}
	return t, nil
}

// Server is an SDK server serving a set of tools, counting the tools/list calls it answers.
type Server struct {
	*mcp.Server
	listCalls atomic.Int64
}

// ListCalls is the number of tools/list requests answered (one per page).
func (s *Server) ListCalls() int { return int(s.listCalls.Load()) }

// NewServer registers tools on a new SDK server that lists pageSize tools per page (0: the
// SDK's default). Each tool is registered with Server.AddTool and its raw input schema, so the
// SDK serves the schema's bytes. The SDK refuses to register a schema whose root is not
// {"type":"object"} (Sentry's whoami is served as {} by its TypeScript server); such a tool is
// registered with {"type":"object"} and its real schema swapped back into the tools/list result
// by a middleware, so the server still serves exactly the corpus.
func NewServer(tools []Tool, pageSize int) *Server {
	s := &Server{Server: mcp.NewServer(&mcp.Implementation{Name: "mcptest-corpus", Version: "1"},
		&mcp.ServerOptions{PageSize: pageSize})}
	served := map[string]json.RawMessage{}
	for _, t := range tools {
		schema := t.InputSchema
		var root struct {
			Type any `json:"type"`
		}
		if json.Unmarshal(schema, &root) != nil || root.Type != "object" {
			served[t.Name] = t.InputSchema
			schema = json.RawMessage(`{"type":"object"}`)
		}
		s.AddTool(&mcp.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "mcptest: not implemented"}}}, nil
			})
	}
	s.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if method != "tools/list" || err != nil {
				return res, err
			}
			s.listCalls.Add(1)
			list, ok := res.(*mcp.ListToolsResult)
			if !ok || len(served) == 0 {
				return res, err
			}
			out := *list
			out.Tools = make([]*mcp.Tool, len(list.Tools))
			for i, t := range list.Tools {
				if schema, ok := served[t.Name]; ok {
					c := *t
					c.InputSchema = schema
					t = &c
				}
				out.Tools[i] = t
			}
			return &out, nil
		}
	})
	return s
}

// ServeStdio serves the set over stdin/stdout until the client closes stdin.
func ServeStdio(ctx context.Context, root, set string, pageSize int) error {
	tools, err := LoadSet(root, set)
	if err != nil {
		return err
	}
	return NewServer(tools, pageSize).Run(ctx, &mcp.StdioTransport{})
}

// Compact is json.Compact as a function, for comparing schemas byte for byte.
func Compact(raw []byte) ([]byte, error) {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
