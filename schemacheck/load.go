package schemacheck

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Getting a server's tools: LoadFromServer asks a running MCP server with the
// official Go SDK client, LoadFromFile reads saved tools/list results, tool objects and bare
// input schemas. Both keep each tool's inputSchema as the raw JSON the server (or file) holds:
// the serialized size is defined on the schema as served, so nothing here re-marshals it.

// DefaultTimeout bounds a whole LoadFromServer listing (connect, initialize, every tools/list
// page) when Source.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// MaxListedTools caps a server listing: a server listing more tools than this (or paginating
// forever) is refused with an error rather than exhausting memory.
const MaxListedTools = 10000

// clientProtocolVersion is the protocol version LoadFromServer asks for in initialize. The
// SDK's default (2026-07-28) first tries the stateless server/discover RPC, which deployed
// servers do not know; 2025-11-25 is the newest version negotiated with initialize, and the
// server may answer with an older one it supports.
const clientProtocolVersion = "2025-11-25"

// Errors a LoadFromServer error wraps (test with errors.Is), so callers can tell a server that
// could not be reached from one that refused the credentials, took too long, or served tools
// that are not tools.
var (
	ErrUnreachable  = errors.New("MCP server unreachable")
	ErrAuth         = errors.New("MCP server refused the credentials")
	ErrTimeout      = errors.New("MCP server did not answer in time")
	ErrInvalidTools = errors.New("MCP server served an invalid tools/list result")
)

// Source says where to get a server's tools from: exactly one of URL (Streamable HTTP) and
// Command (a local server over stdio).
type Source struct {
	// URL is the server's Streamable HTTP endpoint (http or https).
	URL string
	// Headers are sent with every HTTP request (for example Authorization); URL only.
	Headers map[string]string
	// Command is the argv of a stdio server (no shell): Command[0] is looked up in $PATH.
	Command []string
	// Timeout bounds the whole listing; zero means DefaultTimeout.
	Timeout time.Duration
}

// String describes the source for messages (never the header values: they hold tokens).
func (s Source) String() string {
	if s.URL != "" {
		return s.URL
	}
	return "stdio server " + strings.Join(s.Command, " ")
}

// ServerInfo is how an MCP server names itself: the serverInfo (an Implementation: name and
// version) of its initialize result (MCP specification, "Lifecycle"). The MCP analytics SDK
// reports it as $mcp_server_name and $mcp_server_version, Traceloop's spans name the server by
// it, and served_tool_schemas keeps a server's schemas under it.
type ServerInfo struct {
	Name, Version string
}

// Listing is what LoadListing got of a server: how it names itself and the tools it lists.
type Listing struct {
	Server ServerInfo
	Tools  []Tool
}

// LoadFromServer is LoadListing's tools: the server's tools as listed, with their raw input
// schemas.
func LoadFromServer(ctx context.Context, src Source) ([]Tool, error) {
	l, err := LoadListing(ctx, src)
	return l.Tools, err
}

// LoadListing connects to the server, initializes an MCP session, lists every tool
// (following nextCursor until it is empty) and closes the session. Server is the initialize
// result's serverInfo; each Tool's InputSchema is the raw JSON of the server's tools/list
// result, byte for byte. The error wraps one of ErrUnreachable, ErrAuth, ErrTimeout and
// ErrInvalidTools when it is one of those.
//
// The SDK client decodes a tool's inputSchema into a map[string]any, which loses the key order,
// turns numbers into float64 and, marshalled back, HTML-escapes <, > and & — all of which
// change the serialized size this package measures — and it silently drops tools whose
// x-mcp-header annotations it rejects. So the SDK drives the protocol (initialize, the
// tools/list calls, pagination, the transports) while a thin wrapper around its connection
// keeps the raw result of every tools/list response, and the tools are read from that.
func LoadListing(ctx context.Context, src Source) (Listing, error) {
	tools, info, err := loadListing(ctx, src)
	if err != nil {
		return Listing{}, err
	}
	return Listing{Server: info, Tools: tools}, nil
}

func loadListing(ctx context.Context, src Source) ([]Tool, ServerInfo, error) {
	var info ServerInfo
	if (src.URL == "") == (len(src.Command) == 0) {
		return nil, info, errors.New("schemacheck: a source needs exactly one of a URL and a command")
	}
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	wire := &wireLog{}
	var transport mcp.Transport
	var cmd *exec.Cmd
	var stderr *tailBuffer
	if src.URL != "" {
		u, err := url.Parse(src.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, info, fmt.Errorf("schemacheck: server URL %q is not an http(s) URL", src.URL)
		}
		for name, value := range src.Headers {
			if !validHeaderName(name) || strings.ContainsAny(value, "\r\n\x00") {
				return nil, info, fmt.Errorf("schemacheck: invalid HTTP header %q", name)
			}
		}
		base := http.DefaultTransport.(*http.Transport).Clone()
		transport = &mcp.StreamableClientTransport{
			Endpoint: src.URL,
			HTTPClient: &http.Client{Transport: &headerRoundTripper{
				base: base, headers: src.Headers, wire: wire,
			}},
			// Only responses to our own requests matter: no standalone GET stream.
			DisableStandaloneSSE: true,
		}
		defer base.CloseIdleConnections()
	} else {
		if src.Command[0] == "" {
			return nil, info, errors.New("schemacheck: empty stdio command")
		}
		cmd = exec.Command(src.Command[0], src.Command[1:]...)
		stderr = &tailBuffer{max: 2048}
		cmd.Stderr = stderr
		transport = &mcp.CommandTransport{Command: cmd, TerminateDuration: 2 * time.Second}
	}

	captured := &capturingTransport{inner: transport, wire: wire}
	if cmd != nil {
		// A stdio server that does not answer in time is killed at once: the SDK's polite
		// shutdown (close stdin, wait, SIGTERM, wait, SIGKILL) would take seconds more.
		stopKill := context.AfterFunc(ctx, captured.killProcess)
		defer stopKill()
		captured.process = func() *os.Process { return cmd.Process }
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "mcpulse-schemacheck", Version: "1"}, nil)
	phase := "initialize"
	fail := func(err error) error { return classifyLoadError(ctx, src, timeout, phase, wire, stderr, err) }
	session, err := client.Connect(ctx, captured, &mcp.ClientSessionOptions{ProtocolVersion: clientProtocolVersion})
	if err != nil {
		return nil, info, fail(err)
	}
	if init := session.InitializeResult(); init != nil && init.ServerInfo != nil {
		info = ServerInfo{Name: init.ServerInfo.Name, Version: init.ServerInfo.Version}
	}
	closed := false
	closeSession := func() {
		if !closed {
			closed = true
			_ = session.Close()
		}
	}
	defer closeSession()

	var tools []Tool
	seenCursors := map[string]bool{}
	cursor := ""
	for page := 1; ; page++ {
		phase = fmt.Sprintf("tools/list (page %d)", page)
		wire.startList()
		if _, err := session.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor}); err != nil {
			return nil, info, fail(err)
		}
		raw, ok := wire.listResult()
		if !ok {
			return nil, info, fmt.Errorf("schemacheck: %s: %s: the tools/list response was not seen on the connection", src, phase)
		}
		pageTools, next, err := decodeToolsPage(raw)
		if err != nil {
			return nil, info, fmt.Errorf("schemacheck: %s: %s: %w: %v", src, phase, ErrInvalidTools, err)
		}
		tools = append(tools, pageTools...)
		if len(tools) > MaxListedTools {
			return nil, info, fmt.Errorf("schemacheck: %s: %w: more than %d tools listed (at page %d); refusing to go on",
				src, ErrInvalidTools, MaxListedTools, page)
		}
		if next == "" {
			break
		}
		if seenCursors[next] {
			return nil, info, fmt.Errorf("schemacheck: %s: %w: page %d repeats the cursor %q of an earlier page (pagination loops)",
				src, ErrInvalidTools, page, shorten(next, 80))
		}
		seenCursors[next] = true
		cursor = next
	}
	closeSession()
	return tools, info, nil
}

// decodeToolsPage reads one tools/list result: its tools, with their raw input schemas, and
// its nextCursor. A tool without a name is an error (it cannot be reported); a tool without an
// inputSchema is kept with an empty InputSchema, for the checker to report.
func decodeToolsPage(raw json.RawMessage) ([]Tool, string, error) {
	var page struct {
		Tools      *[]json.RawMessage `json:"tools"`
		NextCursor *string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		return nil, "", fmt.Errorf("result is not a tools/list result: %v", err)
	}
	if page.Tools == nil {
		return nil, "", errors.New(`result has no "tools" array`)
	}
	tools := make([]Tool, 0, len(*page.Tools))
	for i, rt := range *page.Tools {
		t, err := decodeToolObject(rt)
		if err != nil {
			return nil, "", fmt.Errorf("tool #%d: %v", i+1, err)
		}
		tools = append(tools, t)
	}
	next := ""
	if page.NextCursor != nil {
		next = *page.NextCursor
	}
	return tools, next, nil
}

// decodeTool reads one tool object: a non-empty string name, its inputSchema, raw, and its
// description.
func decodeToolObject(raw json.RawMessage) (Tool, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return Tool{}, fmt.Errorf("not a JSON object: %s", shorten(string(raw), 60))
	}
	var t struct {
		Name        json.RawMessage `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
		Description json.RawMessage `json:"description"`
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tool{}, err
	}
	var name string
	if len(t.Name) == 0 || t.Name[0] != '"' || json.Unmarshal(t.Name, &name) != nil || name == "" {
		if len(t.Name) == 0 {
			return Tool{}, errors.New(`no "name"`)
		}
		return Tool{}, fmt.Errorf(`"name" is not a non-empty string: %s`, shorten(string(t.Name), 60))
	}
	// A missing inputSchema stays empty (the checker reports it); "inputSchema": null stays null.
	// A description that is not a string is left out.
	var desc string
	_ = json.Unmarshal(t.Description, &desc)
	return Tool{Name: name, InputSchema: bytes.Clone(t.InputSchema), Description: desc}, nil
}

// classify turns a failed session step into a clear error wrapping one of the Err* values.
func classifyLoadError(ctx context.Context, src Source, timeout time.Duration, phase string, wire *wireLog, stderr *tailBuffer, err error) error {
	where := fmt.Sprintf("schemacheck: %s: %s", src, phase)
	status, authHeader := wire.httpStatus()
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		hint := "check the Authorization header (token missing, expired or wrong)"
		if status == http.StatusForbidden {
			hint = "the token is valid but not allowed here (scopes, project or IP allowlist)"
		}
		if authHeader != "" {
			hint += "; the server asks: WWW-Authenticate: " + shorten(authHeader, 200)
		}
		return fmt.Errorf("%s: %w: HTTP %d %s: %s", where, ErrAuth, status, http.StatusText(status), hint)
	case errors.Is(ctx.Err(), context.DeadlineExceeded) || errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%s: %w: no answer within %s", where, ErrTimeout, timeout)
	case ctx.Err() != nil:
		return fmt.Errorf("%s: %w", where, ctx.Err())
	}
	var dnsErr *net.DNSError
	var opErr *net.OpError
	var execErr *exec.Error
	switch {
	case errors.As(err, &execErr) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: %w: cannot start the command: %v", where, ErrUnreachable, err)
	case errors.As(err, &dnsErr):
		return fmt.Errorf("%s: %w: cannot resolve host %q: %v", where, ErrUnreachable, dnsErr.Name, dnsErr.Err)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("%s: %w: connection refused (is the server running, and is the URL's port right?)", where, ErrUnreachable)
	case errors.As(err, &opErr):
		return fmt.Errorf("%s: %w: %v", where, ErrUnreachable, opErr)
	}
	if status != 0 {
		hint := ""
		switch {
		case status >= 500:
			hint = " (the server failed; try again later)"
		case status == http.StatusNotFound || status == http.StatusMethodNotAllowed ||
			status == http.StatusNotAcceptable || status == http.StatusUnsupportedMediaType:
			hint = fmt.Sprintf(" (is %s an MCP Streamable HTTP endpoint?)", src.URL)
		}
		return fmt.Errorf("%s: server answered HTTP %d %s%s: %v", where, status, http.StatusText(status), hint, err)
	}
	if stderr != nil {
		tail := strings.TrimSpace(stderr.String())
		if tail != "" {
			tail = "; its stderr ends with:\n" + tail
		}
		if errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
			errors.Is(err, syscall.EPIPE) || strings.Contains(err.Error(), "broken pipe") {
			return fmt.Errorf("%s: %w: the server process exited or closed its stdin/stdout (%v)%s", where, ErrUnreachable, err, tail)
		}
		var syntaxErr *json.SyntaxError
		if errors.As(err, &syntaxErr) || strings.Contains(err.Error(), "invalid character") {
			return fmt.Errorf("%s: the server wrote something that is not JSON-RPC to stdout (logs belong on stderr): %v%s",
				where, err, tail)
		}
	}
	var rpcErr *jsonrpc.Error
	if errors.As(err, &rpcErr) {
		return fmt.Errorf("%s: the server answered with an error: %w", where, err)
	}
	if strings.Contains(err.Error(), "unmarshal") {
		return fmt.Errorf("%s: %w: %v", where, ErrInvalidTools, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// capturingTransport wraps the SDK transport's connection in a capturingConn.
type capturingTransport struct {
	inner mcp.Transport
	wire  *wireLog
	// process, for a stdio server, returns its process once the inner transport started it.
	process func() *os.Process

	mu        sync.Mutex
	connected bool
	killed    bool
}

func (t *capturingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.killed {
		return nil, ctx.Err()
	}
	conn, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	t.connected = true
	return &capturingConn{Connection: conn, wire: t.wire}, nil
}

// killProcess kills a started stdio server (its context is done).
func (t *capturingTransport) killProcess() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.killed = true
	if t.connected && t.process != nil {
		if p := t.process(); p != nil {
			_ = p.Kill()
		}
	}
}

// capturingConn notes the IDs of the initialize and tools/list calls it writes and keeps the
// raw results of their responses as they are read. Wrapping hides the Streamable HTTP
// connection's unexported session-update hook from the SDK; the one thing it did that matters
// here, the MCP-Protocol-Version header, headerRoundTripper sets from the initialize result.
type capturingConn struct {
	mcp.Connection
	wire *wireLog
}

func (c *capturingConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if req, ok := msg.(*jsonrpc.Request); ok && req.IsCall() {
		c.wire.sent(req.Method, req.ID)
	}
	return c.Connection.Write(ctx, msg)
}

func (c *capturingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if resp, ok := msg.(*jsonrpc.Response); ok && err == nil {
		c.wire.received(resp)
	}
	return msg, err
}

// wireLog is what the capturing connection and the HTTP round tripper saw.
type wireLog struct {
	mu              sync.Mutex
	initID          jsonrpc.ID
	listID          jsonrpc.ID
	listRaw         json.RawMessage
	listDone        bool
	protocolVersion string
	status          int // last HTTP status that was not 2xx
	authenticate    string
}

func (w *wireLog) sent(method string, id jsonrpc.ID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch method {
	case "initialize":
		w.initID = id
	case "tools/list":
		w.listID = id
	}
}

func (w *wireLog) received(resp *jsonrpc.Response) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.listID.IsValid() && resp.ID == w.listID:
		if resp.Error == nil {
			w.listRaw = bytes.Clone(resp.Result)
			w.listDone = true
		}
	case w.initID.IsValid() && resp.ID == w.initID && resp.Error == nil:
		var init struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		if json.Unmarshal(resp.Result, &init) == nil {
			w.protocolVersion = init.ProtocolVersion
		}
	}
}

func (w *wireLog) startList() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.listID, w.listRaw, w.listDone = jsonrpc.ID{}, nil, false
}

func (w *wireLog) listResult() (json.RawMessage, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.listRaw, w.listDone
}

func (w *wireLog) version() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.protocolVersion
}

func (w *wireLog) sawStatus(code int, authenticate string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.status, w.authenticate = code, authenticate
}

func (w *wireLog) httpStatus() (int, string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.status, w.authenticate
}

// headerRoundTripper adds the Source's headers (never overriding the SDK's own), the
// MCP-Protocol-Version header once initialize has answered, and notes error statuses.
type headerRoundTripper struct {
	base    http.RoundTripper
	headers map[string]string
	wire    *wireLog
}

func (rt *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for name, value := range rt.headers {
		if req.Header.Get(name) == "" {
			req.Header.Set(name, value)
		}
	}
	if v := rt.wire.version(); v != "" && req.Header.Get("Mcp-Protocol-Version") == "" {
		req.Header.Set("Mcp-Protocol-Version", v)
	}
	resp, err := rt.base.RoundTrip(req)
	if err == nil && (resp.StatusCode < 200 || resp.StatusCode > 299) && req.Method == http.MethodPost {
		rt.wire.sawStatus(resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	return resp, err
}

// validHeaderName reports whether name is an HTTP token (RFC 9110 §5.6.2).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// tailBuffer keeps the last max bytes written to it (a stdio server's stderr).
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.max {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.max:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// LoadFromFile reads tools saved to disk. path is one of:
//   - a tools/list result, {"tools":[...]};
//   - a JSON array of tool objects;
//   - one tool object ({"name":..., "inputSchema":...});
//   - a bare input schema, the tool being named after the file (<tool>.json);
//   - a directory of *.json and *.snap files, each holding one tool object or (*.json) one bare
//     input schema named <tool>.json, read in file name order.
//
// Input schemas are kept as the raw bytes of the file. In a directory, a file that is none of
// these (another format, a list of several tools, a schema bundle, invalid JSON) and a second
// tool of a name already loaded are skipped, each with a reason in warnings; a single file that
// is none of these is an error, as are a file holding an empty list and a directory without a
// tool (a check of no tool would pass every ratchet).
func LoadFromFile(path string) (tools []Tool, warnings []string, err error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, nil, fmt.Errorf("schemacheck: tools file: %w", err)
	}
	if !info.IsDir() {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, nil, fmt.Errorf("schemacheck: tools file: %w", err)
		}
		tools, err := parseToolsFile(path, data, false)
		if err != nil {
			return nil, nil, fmt.Errorf("schemacheck: %s: %w", path, err)
		}
		if len(tools) == 0 {
			return nil, nil, fmt.Errorf("schemacheck: %s: no tool in the file (an empty list): nothing to check", path)
		}
		tools, warnings = dedupe(tools, path, map[string]string{})
		return tools, warnings, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, nil, fmt.Errorf("schemacheck: tools directory: %w", err)
	}
	from := map[string]string{}
	for _, e := range entries {
		file := filepath.Join(path, e.Name())
		ext := strings.ToLower(filepath.Ext(e.Name()))
		switch {
		case e.IsDir():
			warnings = append(warnings, fmt.Sprintf("%s: skipped: a directory (subdirectories are not read)", file))
			continue
		case ext != ".json" && ext != ".snap":
			warnings = append(warnings, fmt.Sprintf("%s: skipped: not a .json or .snap file", file))
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: skipped: %v", file, err))
			continue
		}
		got, err := parseToolsFile(file, data, true)
		if err != nil {
			warnings = append(warnings, fmt.Sprintf("%s: skipped: %v", file, err))
			continue
		}
		var ws []string
		got, ws = dedupe(got, file, from)
		tools = append(tools, got...)
		warnings = append(warnings, ws...)
	}
	if len(tools) == 0 {
		return nil, warnings, fmt.Errorf("schemacheck: %s: no tool in the directory (%d files skipped)", path, len(warnings))
	}
	return tools, warnings, nil
}

// dedupe drops a tool whose name is already loaded (from maps each loaded name to its file),
// with a warning: a server can only serve one tool of a name.
func dedupe(tools []Tool, file string, from map[string]string) ([]Tool, []string) {
	var warnings []string
	kept := tools[:0:0]
	for _, t := range tools {
		if prev, dup := from[t.Name]; dup {
			warnings = append(warnings, fmt.Sprintf("%s: tool %q skipped: a tool of that name was already loaded from %s",
				file, t.Name, prev))
			continue
		}
		from[t.Name] = file
		kept = append(kept, t)
	}
	return kept, warnings
}

// rootSchemaKeywords are JSON Schema keywords whose presence at the root of an object that is not
// a tool makes it a bare input schema.
var rootSchemaKeywords = []string{
	"type", "properties", "$schema", "$ref", "$id", "anyOf", "oneOf", "allOf", "not", "required",
	"additionalProperties", "patternProperties", "items", "enum", "const", "$defs", "definitions",
}

// parseToolsFile reads one file's tools. inDir means the file is one entry of a directory,
// where only one tool per file belongs (a list is skipped: it is a layout of its own).
func parseToolsFile(file string, data []byte, inDir bool) ([]Tool, error) {
	data = bytes.TrimPrefix(data, []byte("\xef\xbb\xbf"))
	trimmed := bytes.TrimSpace(data)
	if !json.Valid(trimmed) {
		var v any
		err := json.Unmarshal(trimmed, &v)
		if err == nil {
			err = errors.New("invalid JSON")
		}
		return nil, fmt.Errorf("not JSON: %v", err)
	}
	isSnap := strings.EqualFold(filepath.Ext(file), ".snap")
	switch {
	case len(trimmed) > 0 && trimmed[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(trimmed, &list); err != nil {
			return nil, err
		}
		if inDir {
			return nil, fmt.Errorf("holds a JSON array of %d tools, a layout of its own: load the file by itself", len(list))
		}
		return decodeToolList(list)
	case len(trimmed) == 0 || trimmed[0] != '{':
		return nil, errors.New("neither a JSON object nor an array")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &obj); err != nil {
		return nil, err
	}
	if rawTools, ok := obj["tools"]; ok {
		var list []json.RawMessage
		if err := json.Unmarshal(rawTools, &list); err != nil || bytes.HasPrefix(bytes.TrimSpace(rawTools), []byte("null")) {
			return nil, errors.New(`"tools" is not an array of tools`)
		}
		if inDir {
			return nil, fmt.Errorf("holds a tools/list result of %d tools, a layout of its own: load the file by itself", len(list))
		}
		return decodeToolList(list)
	}
	if _, ok := obj["inputSchema"]; ok {
		t, err := decodeToolObject(trimmed)
		if err != nil {
			return nil, fmt.Errorf("a tool object, but %v", err)
		}
		return []Tool{t}, nil
	}
	if reason := schemaBundle(obj); reason != "" {
		return nil, errors.New(reason)
	}
	if isSnap {
		return nil, errors.New("a .snap file that holds no tool object (no inputSchema)")
	}
	isSchema := len(obj) == 0
	for _, k := range rootSchemaKeywords {
		if _, ok := obj[k]; ok {
			isSchema = true
			break
		}
	}
	if !isSchema {
		if reason := toolMetadataMap(obj); reason != "" {
			return nil, errors.New(reason)
		}
		return nil, errors.New("neither a tools/list result, a tool object (no inputSchema) nor an input schema (no JSON Schema keyword at its root)")
	}
	name := strings.TrimSuffix(filepath.Base(file), filepath.Ext(file))
	if name == "" {
		return nil, errors.New("a bare input schema, but its file name gives no tool name")
	}
	return []Tool{{Name: name, InputSchema: json.RawMessage(bytes.Clone(trimmed))}}, nil
}

func decodeToolList(list []json.RawMessage) ([]Tool, error) {
	tools := make([]Tool, 0, len(list))
	for i, raw := range list {
		t, err := decodeToolObject(raw)
		if err != nil {
			return nil, fmt.Errorf("tool #%d: %v", i+1, err)
		}
		tools = append(tools, t)
	}
	return tools, nil
}

// The two files of PostHog's standalone MCP server (posthog-mcp-standalone/) cannot be turned
// into tools; schemaBundle and toolMetadataMap recognize them to say why.
//
// tool-definitions.json maps each tool name to its metadata (description, title, category,
// scopes, annotations) and holds no input schema. tool-inputs.json is a schema bundle, a root
// holding only "definitions" keyed by the TypeScript schema's name (DashboardCreateSchema,
// QueryRunInputSchema, ...), never by tool name, and which definition belongs to which tool
// lives only in the server's source code. Guessing the pairing from the names would misreport
// tools (44 tools, 45 definitions, names such as properties-list vs
// ProjectPropertyDefinitionsInputSchema), and the server generates the schemas it serves from
// its zod types at run time anyway, so these files are not what it serves.

// schemaBundle explains a root that holds only definitions (tool-inputs.json), or returns "".
func schemaBundle(obj map[string]json.RawMessage) string {
	defs, ok := obj["definitions"]
	if !ok {
		defs, ok = obj["$defs"]
	}
	if !ok {
		return ""
	}
	for k := range obj {
		switch k {
		case "definitions", "$defs", "$schema", "$id", "title", "description", "$comment":
		default:
			return ""
		}
	}
	var m map[string]json.RawMessage
	_ = json.Unmarshal(defs, &m)
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	return fmt.Sprintf("a schema bundle (%d definitions such as %s, and no root schema): its definitions are keyed "+
		"by schema name, not tool name, and which tool uses which is not in the file (the layout of PostHog's "+
		"standalone MCP tool-inputs.json)", len(names), strings.Join(firstFew(names, 3), ", "))
}

// toolMetadataMap explains an object mapping tool names to tool metadata without input
// schemas (tool-definitions.json), or returns "".
func toolMetadataMap(obj map[string]json.RawMessage) string {
	if len(obj) < 2 {
		return ""
	}
	for _, v := range obj {
		var entry map[string]json.RawMessage
		if json.Unmarshal(v, &entry) != nil {
			return ""
		}
		_, hasDesc := entry["description"]
		_, hasTitle := entry["title"]
		if !hasDesc && !hasTitle {
			return ""
		}
	}
	return fmt.Sprintf("maps %d tool names to tool metadata (description, title, annotations) without input "+
		"schemas (the layout of PostHog's standalone MCP tool-definitions.json, whose tool-inputs.json does not "+
		"say which schema is whose)", len(obj))
}

func firstFew(s []string, n int) []string {
	if len(s) > n {
		return append(s[:n:n], "…")
	}
	return s
}
