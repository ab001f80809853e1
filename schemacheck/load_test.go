package schemacheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpulse/mcpulse/demo/mcptest"
)

// corpusRoot is testdata/mcp-tool-schemas at the repository root.
var corpusRoot = filepath.Join("..", "testdata", "mcp-tool-schemas")

// stdioServerEnv switches the re-executed test binary into an MCP server over stdio:
// "corpus" serves the set named by its arguments, "hang" reads stdin and never answers.
const stdioServerEnv = "MCPULSE_SCHEMACHECK_TEST_STDIO_SERVER"

// TestMain lets LoadFromServer's stdio tests start this very test binary as their server.
func TestMain(m *testing.M) {
	switch os.Getenv(stdioServerEnv) {
	case "":
		os.Exit(m.Run())
	case "corpus": // args: corpus root, set, page size
		pageSize, _ := strconv.Atoi(os.Args[3])
		if err := mcptest.ServeStdio(context.Background(), os.Args[1], os.Args[2], pageSize); err != nil {
			fmt.Fprintln(os.Stderr, "mcptest stdio server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	case "hang":
		_, _ = io.Copy(io.Discard, os.Stdin)
		time.Sleep(time.Hour) // even once stdin is closed: only a kill ends it
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "unknown", stdioServerEnv)
		os.Exit(2)
	}
}

const testPageSize = 7

// corpusTools reads the set with LoadFromFile, checking it warns only about files that are
// not tools.
func corpusTools(t *testing.T, set string) []Tool {
	t.Helper()
	tools, warnings, err := LoadFromFile(filepath.Join(corpusRoot, mcptest.Sets[set]))
	if err != nil {
		t.Fatalf("LoadFromFile(%s): %v", set, err)
	}
	for _, w := range warnings {
		if !strings.Contains(w, "INDEX.txt: skipped: not a .json or .snap file") {
			t.Errorf("LoadFromFile(%s): unexpected warning %s", set, w)
		}
	}
	return tools
}

// sameTools asserts got (from a server) holds exactly want's tools (from the files): the same
// names and, after JSON compaction, the same schema bytes.
func sameTools(t *testing.T, got, want []Tool) {
	t.Helper()
	byName := func(ts []Tool) map[string]json.RawMessage {
		m := map[string]json.RawMessage{}
		for _, tool := range ts {
			if _, dup := m[tool.Name]; dup {
				t.Errorf("tool %q listed twice", tool.Name)
			}
			m[tool.Name] = tool.InputSchema
		}
		return m
	}
	g, w := byName(got), byName(want)
	if len(got) != len(want) {
		t.Errorf("got %d tools, want %d", len(got), len(want))
	}
	for name, ws := range w {
		gs, ok := g[name]
		if !ok {
			t.Errorf("tool %q missing", name)
			continue
		}
		gc, err1 := mcptest.Compact(gs)
		wc, err2 := mcptest.Compact(ws)
		if err1 != nil || err2 != nil {
			t.Errorf("tool %q: compact: %v %v", name, err1, err2)
			continue
		}
		if !bytes.Equal(gc, wc) {
			t.Errorf("tool %q: schema differs\n got: %.300s\nwant: %.300s", name, gc, wc)
		}
	}
	for name := range g {
		if _, ok := w[name]; !ok {
			t.Errorf("unexpected tool %q", name)
		}
	}
}

func pages(n int) int { return max(1, (n+testPageSize-1)/testPageSize) }

func TestLoadFromFileCorpus(t *testing.T) {
	// The counts are those of the corpus itself, read independently by mcptest.LoadSet.
	for set := range mcptest.Sets {
		t.Run(set, func(t *testing.T) {
			want, err := mcptest.LoadSet(corpusRoot, set)
			if err != nil {
				t.Fatal(err)
			}
			got := corpusTools(t, set)
			if len(got) != len(want) {
				t.Fatalf("%d tools, want %d", len(got), len(want))
			}
			for i := range want { // same order: file name order, then order in the file
				if got[i].Name != want[i].Name || !bytes.Equal(got[i].InputSchema, bytes.TrimSpace(want[i].InputSchema)) {
					t.Errorf("tool #%d: got %q (%d bytes), want %q (%d bytes)", i, got[i].Name, len(got[i].InputSchema),
						want[i].Name, len(want[i].InputSchema))
				}
			}
		})
	}
	// Spot checks against the files themselves.
	if n := len(corpusTools(t, "github")); n != 117 {
		t.Errorf("github: %d tools, want the 117 .snap files", n)
	}
	posthog := corpusTools(t, "posthog")
	if len(posthog) != 40 { // 39 bare schemas and exec-tool.json's tool "exec"
		t.Errorf("posthog: %d tools, want 40", len(posthog))
	}
	raw, _ := os.ReadFile(filepath.Join(corpusRoot, "posthog", "action-create.json"))
	for _, tool := range posthog {
		if tool.Name == "action-create" && !bytes.Equal(tool.InputSchema, bytes.TrimSpace(raw)) {
			t.Error("posthog action-create: the schema is not the file's bytes")
		}
	}
	if !slices.ContainsFunc(posthog, func(tool Tool) bool { return tool.Name == "exec" }) {
		t.Error(`posthog: exec-tool.json's tool "exec" missing`)
	}
}

func TestLoadFromFilePostHogStandalone(t *testing.T) {
	dir := filepath.Join(corpusRoot, "posthog-mcp-standalone")
	_, warnings, err := LoadFromFile(dir)
	if err == nil || !strings.Contains(err.Error(), "no tool in the directory") {
		t.Fatalf("err = %v, want no tool in the directory", err)
	}
	if len(warnings) != 2 ||
		!strings.Contains(warnings[0], "tool-definitions.json: skipped: maps 44 tool names to tool metadata") ||
		!strings.Contains(warnings[1], "tool-inputs.json: skipped: a schema bundle (45 definitions") {
		t.Errorf("warnings = %q", warnings)
	}
	for _, f := range []string{"tool-definitions.json", "tool-inputs.json"} {
		if _, _, err := LoadFromFile(filepath.Join(dir, f)); err == nil || !strings.Contains(err.Error(), "PostHog's standalone MCP") {
			t.Errorf("%s: err = %v, want the reason", f, err)
		}
	}
	// A directory of tool lists is no layout: each list is loaded by itself.
	_, warnings, err = LoadFromFile(filepath.Join(corpusRoot, "kubernetes-mcp-server"))
	if err == nil || len(warnings) != 9 || !strings.Contains(warnings[0], "holds a JSON array of 1 tools, a layout of its own") {
		t.Errorf("kubernetes directory: err = %v, warnings = %q", err, warnings)
	}
}

func TestLoadFromFileLayouts(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// Key order, spacing, escapes and number spellings survive: the bytes are the file's.
	schema := `{"type": "object", "properties": {"z": {"type":"number","default":1.0}, "a": {"description":"a\u003cb"}}}`
	tests := []struct {
		name, file, content string
		want                []string // tool names
		err                 string
	}{
		{"tools/list result", "list.json", `{"tools":[{"name":"a","inputSchema":` + schema + `},{"name":"b","inputSchema":{}}],"nextCursor":""}`, []string{"a", "b"}, ""},
		{"array", "array.json", "\n[{\"name\":\"a\",\"inputSchema\":" + schema + "}]\n", []string{"a"}, ""},
		{"tool object", "one.snap", `{"name":"a","description":"d","inputSchema":` + schema + `}`, []string{"a"}, ""},
		{"bare schema", "my-tool.json", "\xef\xbb\xbf" + schema, []string{"my-tool"}, ""},
		{"empty schema", "anything.json", `{}`, []string{"anything"}, ""},
		{"tool without schema", "noschema.json", `[{"name":"a"}]`, []string{"a"}, ""},
		{"duplicate names", "dup.json", `[{"name":"a","inputSchema":{}},{"name":"a","inputSchema":{"type":"object"}}]`, []string{"a"}, ""},
		{"tool without name", "noname.json", `[{"inputSchema":{}}]`, nil, `tool #1: no "name"`},
		{"numeric name", "numname.json", `{"tools":[{"name":7,"inputSchema":{}}]}`, nil, `"name" is not a non-empty string: 7`},
		{"tools not a list", "badlist.json", `{"tools":{}}`, nil, `"tools" is not an array`},
		{"invalid JSON", "bad.json", `{"name":`, nil, "not JSON"},
		{"not a schema", "other.json", `{"hello":"world"}`, nil, "neither a tools/list result"},
		{"scalar", "scalar.json", `42`, nil, "neither a JSON object nor an array"},
		{"missing", "", "", nil, "no such file"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, "missing.json")
			if tc.file != "" {
				path = write(tc.file, tc.content)
			}
			tools, warnings, err := LoadFromFile(path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tool := range tools {
				names = append(names, tool.Name)
				if tool.Name == "a" && strings.Contains(tc.content, schema) && string(tool.InputSchema) != schema {
					t.Errorf("schema = %s, want the file's bytes %s", tool.InputSchema, schema)
				}
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("tools = %q, want %q", names, tc.want)
			}
			if tc.name == "tool without schema" && tools[0].InputSchema != nil {
				t.Errorf("schema = %s, want none", tools[0].InputSchema)
			}
			if (tc.name == "duplicate names") != (len(warnings) == 1) {
				t.Errorf("warnings = %q", warnings)
			}
		})
	}

	// A directory: one tool per file, everything else skipped with a reason.
	d := filepath.Join(dir, "tools")
	write("tools/b-tool.json", schema)
	write("tools/a.snap", `{"name":"a","inputSchema":{"type":"object"}}`)
	write("tools/c.json", `{"name":"c","inputSchema":{"type":"object"}}`)
	write("tools/dup.json", `{"name":"c","inputSchema":{}}`)
	write("tools/list.json", `{"tools":[]}`)
	write("tools/array.json", `[]`)
	write("tools/README.md", `# hi`)
	write("tools/broken.json", `{`)
	write("tools/bare.snap", `{"type":"object"}`)
	write("tools/sub/x.json", `{}`)
	tools, warnings, err := LoadFromFile(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if want := []string{"a", "b-tool", "c"}; !slices.Equal(names, want) {
		t.Errorf("tools = %q, want %q", names, want)
	}
	wantWarnings := []string{
		"README.md: skipped: not a .json or .snap file",
		"array.json: skipped: holds a JSON array of 0 tools",
		"bare.snap: skipped: a .snap file that holds no tool object",
		"broken.json: skipped: not JSON",
		`dup.json: tool "c" skipped: a tool of that name was already loaded from ` + filepath.Join(d, "c.json"),
		"list.json: skipped: holds a tools/list result of 0 tools",
		"sub: skipped: a directory",
	}
	if len(warnings) != len(wantWarnings) {
		t.Fatalf("warnings = %q", warnings)
	}
	for i, w := range wantWarnings {
		if !strings.HasPrefix(warnings[i], d+string(filepath.Separator)) || !strings.Contains(warnings[i], w) {
			t.Errorf("warning %d = %q, want %q", i, warnings[i], w)
		}
	}
}

// corpusHTTPServer serves set over Streamable HTTP, requiring "Authorization: Bearer
// test-token", and records every request's MCP headers.
type corpusHTTPServer struct {
	*httptest.Server
	mcp     *mcptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newCorpusHTTPServer(t *testing.T, tools []mcptest.Tool) *corpusHTTPServer {
	t.Helper()
	s := &corpusHTTPServer{mcp: mcptest.NewServer(tools, testPageSize)}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s.mcp.Server }, nil)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.headers = append(s.headers, r.Header.Clone())
		s.mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer test-token" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="mcptest"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		handler.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// LoadListing also says how the server names itself: its initialize result's serverInfo (the
// official Go SDK server's Implementation), and keeps each tool's description as served.
func TestLoadListingServerInfo(t *testing.T) {
	served, err := mcptest.LoadSet(corpusRoot, "sentry")
	if err != nil {
		t.Fatal(err)
	}
	srv := newCorpusHTTPServer(t, served)
	l, err := LoadListing(context.Background(), Source{URL: srv.URL + "/mcp",
		Headers: map[string]string{"Authorization": "Bearer test-token"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if l.Server != (ServerInfo{Name: "mcptest-corpus", Version: "1"}) {
		t.Errorf("server info %+v, want mcptest-corpus 1", l.Server)
	}
	sameTools(t, l.Tools, corpusTools(t, "sentry"))
	for i, tool := range served {
		if l.Tools[i].Name != tool.Name || l.Tools[i].Description != tool.Description || tool.Description == "" {
			t.Errorf("tool %d: %s described %q, want %s's %q", i, l.Tools[i].Name, l.Tools[i].Description, tool.Name, tool.Description)
		}
	}
}

func TestLoadFromServerHTTP(t *testing.T) {
	for set := range mcptest.Sets {
		t.Run(set, func(t *testing.T) {
			t.Parallel()
			served, err := mcptest.LoadSet(corpusRoot, set)
			if err != nil {
				t.Fatal(err)
			}
			srv := newCorpusHTTPServer(t, served)
			start := time.Now()
			got, err := LoadFromServer(context.Background(), Source{
				URL:     srv.URL + "/mcp",
				Headers: map[string]string{"Authorization": "Bearer test-token", "X-Team": "1"},
				Timeout: 10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d tools in %d pages over HTTP in %v", len(got), srv.mcp.ListCalls(), time.Since(start))
			sameTools(t, got, corpusTools(t, set))
			if calls := srv.mcp.ListCalls(); calls != pages(len(served)) {
				t.Errorf("%d tools/list calls, want %d pages of %d", calls, pages(len(served)), testPageSize)
			}
			srv.mu.Lock()
			defer srv.mu.Unlock()
			for i, h := range srv.headers {
				if h.Get("X-Team") != "1" || h.Get("Authorization") != "Bearer test-token" {
					t.Errorf("request %d lacks the source's headers: %v", i, h)
				}
				// After initialize, every request names the negotiated protocol version.
				if h.Get("Mcp-Session-Id") != "" && h.Get("Mcp-Protocol-Version") == "" {
					t.Errorf("request %d has no Mcp-Protocol-Version header", i)
				}
			}
		})
	}
}

func TestLoadFromServerStdio(t *testing.T) {
	t.Setenv(stdioServerEnv, "corpus")
	for set := range mcptest.Sets {
		t.Run(set, func(t *testing.T) {
			start := time.Now()
			got, err := LoadFromServer(context.Background(), Source{
				Command: []string{os.Args[0], corpusRoot, set, strconv.Itoa(testPageSize)},
				Timeout: 10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d tools over stdio in %v", len(got), time.Since(start))
			sameTools(t, got, corpusTools(t, set))
		})
	}
}

// rawServer is a hand-written Streamable HTTP MCP server answering tools/list pages with
// exactly the given bytes: the test of what the SDK client would otherwise rewrite.
func rawServer(t *testing.T, page func(cursor string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			http.Error(w, "no", http.StatusMethodNotAllowed)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			result = page(req.Params.Cursor)
		default:
			if len(req.ID) == 0 { // a notification
				w.WriteHeader(http.StatusAccepted)
				return
			}
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, req.ID, result)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestLoadFromServerKeepsRawSchemas(t *testing.T) {
	// Unsorted keys, whitespace, <, >, &, U+2028, escapes, number spellings and an
	// x-mcp-header annotation the SDK client would reject (and drop the tool for): the
	// schemas must come back exactly as served.
	schemas := []string{
		`{"type":"object","properties":{"zeta":{"type":"number","default":1.0,"maximum":1e3},"alpha":{"description":"a < b && c > d \u00e9 ` + "\u2028" + `"}},"required":["zeta"]}`,
		"{ \"type\" : \"object\" ,\n  \"properties\": {\"h\": {\"type\": \"object\", \"x-mcp-header\": \"X-H\"}} }",
		`{}`,
	}
	url := rawServer(t, func(cursor string) string {
		i := 0
		if cursor != "" {
			i, _ = strconv.Atoi(cursor)
		}
		next := ""
		if i+1 < len(schemas) {
			next = strconv.Itoa(i + 1)
		}
		return fmt.Sprintf(`{"tools":[{"name":"t%d","inputSchema":%s}],"nextCursor":%q}`, i, schemas[i], next)
	})
	tools, err := LoadFromServer(context.Background(), Source{URL: url, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != len(schemas) {
		t.Fatalf("%d tools, want %d", len(tools), len(schemas))
	}
	for i, tool := range tools {
		if tool.Name != fmt.Sprintf("t%d", i) || string(tool.InputSchema) != schemas[i] {
			t.Errorf("tool %d = %s %s, want t%d %s", i, tool.Name, tool.InputSchema, i, schemas[i])
		}
	}

	// Why LoadFromServer reads the raw result: the SDK client's own tools lose all that.
	ctx := context.Background()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "sdk-only", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: url, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: clientProtocolVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var sdkNames []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		sdkNames = append(sdkNames, tool.Name)
		if tool.Name == "t0" {
			remarshalled, _ := json.Marshal(tool.InputSchema)
			want := `{"properties":{"alpha":{"description":"a \u003c b \u0026\u0026 c \u003e d é \u2028"},"zeta":{"default":1,"maximum":1000,"type":"number"}},"required":["zeta"],"type":"object"}`
			if string(remarshalled) != want {
				t.Errorf("the SDK's t0 schema re-marshalled = %s, want %s (did the SDK change?)", remarshalled, want)
			}
		}
	}
	if !slices.Equal(sdkNames, []string{"t0", "t2"}) { // t1's x-mcp-header annotation: dropped
		t.Errorf("the SDK client listed %q, want t0 and t2 (did the SDK change?)", sdkNames)
	}
}

func TestLoadFromServerInvalidTools(t *testing.T) {
	tests := []struct {
		name string
		page func(cursor string) string
		want string
	}{
		{"no name", func(string) string { return `{"tools":[{"inputSchema":{}}]}` }, `tool #1: no "name"`},
		{"no tools", func(string) string { return `{"nextCursor":""}` }, `no "tools" array`},
		{"not an object", func(string) string { return `{"tools":["x"]}` }, "cannot unmarshal"},
		{"cursor loop", func(string) string { return `{"tools":[],"nextCursor":"again"}` }, "repeats the cursor"},
		{"endless", func(cursor string) string {
			n, _ := strconv.Atoi(cursor)
			var b strings.Builder
			b.WriteString(`{"tools":[`)
			for i := range 1000 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"name":"t%d_%d","inputSchema":{"type":"object"}}`, n, i)
			}
			fmt.Fprintf(&b, `],"nextCursor":"%d"}`, n+1)
			return b.String()
		}, "more than 10000 tools"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadFromServer(context.Background(), Source{URL: rawServer(t, tc.page), Timeout: 10 * time.Second})
			if !errors.Is(err, ErrInvalidTools) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidTools: %s", err, tc.want)
			}
		})
	}
}

func TestLoadFromServerAuthFailure(t *testing.T) {
	srv := newCorpusHTTPServer(t, nil)
	for _, headers := range []map[string]string{nil, {"Authorization": "Bearer wrong"}} {
		_, err := LoadFromServer(context.Background(), Source{URL: srv.URL, Headers: headers, Timeout: 5 * time.Second})
		if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "HTTP 401 Unauthorized") ||
			!strings.Contains(err.Error(), `Bearer realm="mcptest"`) || !strings.Contains(err.Error(), "initialize") {
			t.Errorf("headers %v: err = %v, want ErrAuth naming HTTP 401", headers, err)
		}
	}
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer forbidden.Close()
	_, err := LoadFromServer(context.Background(), Source{URL: forbidden.URL, Timeout: 5 * time.Second})
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "HTTP 403 Forbidden") {
		t.Errorf("err = %v, want ErrAuth naming HTTP 403", err)
	}
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	_, err = LoadFromServer(context.Background(), Source{URL: notFound.URL, Timeout: 5 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "HTTP 404 Not Found") {
		t.Errorf("err = %v, want HTTP 404 named", err)
	}
}

func TestLoadFromServerTimeout(t *testing.T) {
	// A TCP listener that accepts and reads but never answers.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	const timeout = 300 * time.Millisecond
	start := time.Now()
	_, err = LoadFromServer(context.Background(), Source{URL: "http://" + ln.Addr().String() + "/mcp", Timeout: timeout})
	elapsed := time.Since(start)
	if !errors.Is(err, ErrTimeout) || !strings.Contains(err.Error(), "initialize") {
		t.Errorf("err = %v, want ErrTimeout during initialize", err)
	}
	if elapsed > timeout+time.Second {
		t.Errorf("took %v, want about %v", elapsed, timeout)
	}
	t.Logf("hanging HTTP server: gave up after %v", elapsed)

	t.Setenv(stdioServerEnv, "hang")
	start = time.Now()
	_, err = LoadFromServer(context.Background(), Source{Command: []string{os.Args[0]}, Timeout: timeout})
	elapsed = time.Since(start)
	if !errors.Is(err, ErrTimeout) {
		t.Errorf("stdio: err = %v, want ErrTimeout", err)
	}
	if elapsed > timeout+time.Second {
		t.Errorf("stdio: took %v, want about %v (the server killed)", elapsed, timeout)
	}
	t.Logf("hanging stdio server: gave up after %v", elapsed)
}

func TestLoadFromServerUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	_, err = LoadFromServer(context.Background(), Source{URL: "http://" + addr + "/mcp", Timeout: 5 * time.Second})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("err = %v, want ErrUnreachable: connection refused", err)
	}
	_, err = LoadFromServer(context.Background(), Source{Command: []string{"/nonexistent/mcp-server"}, Timeout: 5 * time.Second})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "cannot start the command") {
		t.Errorf("stdio: err = %v, want ErrUnreachable: cannot start", err)
	}
	// A stdio server that exits at once: its stderr is quoted.
	_, err = LoadFromServer(context.Background(), Source{Command: []string{"sh", "-c", "echo boom >&2; exit 3"}, Timeout: 5 * time.Second})
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), "boom") {
		t.Errorf("exiting stdio server: err = %v, want ErrUnreachable quoting stderr", err)
	}
	for _, src := range []Source{{}, {URL: "ftp://x"}, {URL: "http://x", Command: []string{"y"}}, {URL: "http://x", Headers: map[string]string{"Bad Name": "v"}}} {
		if _, err := LoadFromServer(context.Background(), src); err == nil {
			t.Errorf("%+v: no error", src)
		}
	}
}

// A file holding an empty list is refused like a directory without a tool: a check of no tool
// would pass every ratchet, so a truncated or wrong export must not read as a green run.
func TestLoadFromFileRefusesAnEmptyList(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"array.json": `[]`,
		"list.json":  `{"tools":[]}`,
		"paged.json": ` {"tools":[],"nextCursor":"x"} `,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		tools, _, err := LoadFromFile(path)
		if err == nil || !strings.Contains(err.Error(), "no tool in the file") {
			t.Errorf("%s: %d tools, err = %v, want no tool in the file", name, len(tools), err)
		}
	}
}
