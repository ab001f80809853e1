package gen

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/schemacheck"
)

// The SDK shape (ShapeSDK): tool calls as @posthog/mcp 0.16.3 captures them around a real MCP
// server, read from its source (src/extensions/posthog-events.ts, mcp-payloads.ts,
// truncation.ts, sanitization.ts, analytics-parameters.ts) and from the gateway's recordings
// (ingest/gateway/testdata/sdk). Every choice made only for this shape draws from its own
// random generator, after the calls are made, so both shapes hold the same calls (same uuids,
// times, tools, arguments and outcomes).

// Facts of the SDK, restated.
const (
	sdkSource        = "posthog_mcp_analytics"
	sdkLib           = "posthog-node-mcp"
	sdkLibVersion    = "0.16.3"
	sdkMaxDepth      = 10      // normalize depth of $mcp_parameters and $mcp_response
	sdkMaxBreadth    = 100     // entries kept per object or array
	sdkMaxString     = 32_768  // characters kept per string
	sdkMaxEventBytes = 102_400 // an event over this is normalized shallower and shallower
	sdkRedacted      = "[redacted]"
	sdkObjectCut     = "[Object]"
	sdkArrayCut      = "[Array]"
	sdkBreadthCut    = "[MaxProperties ~]"
)

// sdkSensitiveKey is the SDK's pattern of key names whose values it replaces with
// "[redacted]" wherever they occur in what it captures.
var sdkSensitiveKey = regexp.MustCompile(`(?i)^(authorization|cookie|set-cookie|x-api-key|api[-_]?key|api[-_]?token|access[-_]?token|refresh[-_]?token|token|password|secret|client[-_]?secret|private[-_]?key)$`)

// sdkSanitize returns v with the value of every sensitive key replaced by "[redacted]" (the
// SDK also masks URL credentials and PostHog tokens in strings; the generated values hold none).
func sdkSanitize(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			if sdkSensitiveKey.MatchString(k) {
				out[k] = sdkRedacted
			} else {
				out[k] = sdkSanitize(val)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			out[i] = sdkSanitize(val)
		}
		return out
	}
	return v
}

// sdkNormalize is the SDK's normalize: below depth levels an object becomes "[Object]" and an
// array "[Array]"; an object keeps its first 100 keys (then "...": "[MaxProperties ~]"), an
// array its first 100 items (then "[MaxProperties ~]"); a string keeps 32,768 characters
// (then "..."). Keys go in sorted order (the SDK keeps insertion order; the generated objects
// have no order of their own).
func sdkNormalize(v any, depth int) any {
	switch x := v.(type) {
	case string:
		if r := []rune(x); len(r) > sdkMaxString {
			return string(r[:sdkMaxString]) + "..."
		}
		return x
	case map[string]any:
		if depth <= 0 {
			return sdkObjectCut
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := make(map[string]any, min(len(x), sdkMaxBreadth+1))
		for i, k := range keys {
			if i >= sdkMaxBreadth {
				out["..."] = sdkBreadthCut
				break
			}
			out[k] = sdkNormalize(x[k], depth-1)
		}
		return out
	case []any:
		if depth <= 0 {
			return sdkArrayCut
		}
		out := make([]any, 0, min(len(x), sdkMaxBreadth+1))
		for i, item := range x {
			if i >= sdkMaxBreadth {
				out = append(out, sdkBreadthCut)
				break
			}
			out = append(out, sdkNormalize(item, depth-1))
		}
		return out
	}
	return v
}

// sdkServer is an MCP server as the SDK shape presents it: the catalog's tools of one server
// (Tool.Server), listed by tools/list.
type sdkServer struct {
	name     string
	versions [2]string // older, newer
	tools    []*tool
	// listing is the $mcp_response of its tools/list as the SDK captures it: each tool's
	// inputSchema as served (context injected, a root additionalProperties:false deleted),
	// sanitized and normalized, shallower when the event would pass 100 KB.
	listing []byte
	depth   int // the normalize depth the listing needed
	// served maps a tool name to its inputSchema as the listing holds it; servedSHA to the
	// hex SHA-256 of that schema's JSON text; servedCut tells whether the SDK cut or redacted it.
	served    map[string]any
	servedSHA map[string]string
	servedCut map[string]bool
	names     []string // $mcp_listed_tool_names
	// reports: the server names the input keys its schema dropped in the tool result
	// (PostHog's MCP server does since its pull request #111786).
	reports bool
}

// sdkServerVersions are the versions each server runs (older, newer); each user's client
// talks to one of them (userVersion), as users upgrade at their own pace.
var sdkServerVersions = map[string][2]string{
	"github-mcp-server":      {"0.19.1", "0.20.0"},
	"posthog":                {"1.31.0", "1.32.0"},
	"posthog-mcp-standalone": {"0.9.3", "0.9.4"},
	"sentry-mcp":             {"0.17.1", "0.18.0"},
	"kubernetes-mcp-server":  {"0.0.51", "0.0.52"},
}

// sdkProtocols is the MCP protocol version each client negotiates.
var sdkProtocols = map[string]string{
	"claude-code": "2025-06-18", "cursor": "2025-06-18", "claude-ai": "2025-11-25",
	"vscode": "2025-11-25", "codex": "2025-03-26", "": "2025-06-18",
}

// servedSchema is a tool's inputSchema as the SDK serves it (analytics-parameters.ts): unless
// the root has $ref, oneOf, anyOf or allOf or already declares `context`, a required string
// property `context` is added and a root additionalProperties:false is deleted.
func servedSchema(schema map[string]any) map[string]any {
	for _, k := range []string{"$ref", "oneOf", "anyOf", "allOf"} {
		if _, ok := schema[k]; ok {
			return schema
		}
	}
	props, _ := schema["properties"].(map[string]any)
	if _, ok := props["context"]; ok {
		return schema
	}
	out := make(map[string]any, len(schema)+2)
	for k, v := range schema {
		out[k] = v
	}
	np := make(map[string]any, len(props)+1)
	for k, v := range props {
		np[k] = v
	}
	np["context"] = map[string]any{"type": "string", "description": schemacheck.DefaultContextDescription}
	out["properties"] = np
	req, _ := schema["required"].([]any)
	out["required"] = append(append([]any(nil), req...), "context")
	if ap, ok := out["additionalProperties"].(bool); ok && !ap {
		delete(out, "additionalProperties")
	}
	return out
}

// sdkServers builds every server of the catalog.
func (c *catalog) sdkServers() (map[string]*sdkServer, error) {
	servers := map[string]*sdkServer{}
	for _, name := range sortedMapKeys(c.byName) {
		t := c.byName[name]
		s := servers[t.Server]
		if s == nil {
			versions, ok := sdkServerVersions[t.Server]
			if !ok {
				return nil, fmt.Errorf("BUG: server %s has no versions", t.Server)
			}
			s = &sdkServer{name: t.Server, versions: versions, reports: t.Server == "posthog"}
			servers[t.Server] = s
		}
		s.tools = append(s.tools, t)
	}
	for _, s := range servers {
		tools := make([]any, len(s.tools))
		for i, t := range s.tools {
			tools[i] = map[string]any{"name": t.Name, "description": t.description(), "inputSchema": servedSchema(t.Schema)}
			s.names = append(s.names, t.Name)
		}
		response := sdkSanitize(map[string]any{"tools": tools})
		// truncation.ts: normalize at depth 10, then shallower while the event passes 100 KB
		// (the rest of a tools/list event is about 1 KB).
		for s.depth = sdkMaxDepth; ; s.depth-- {
			b, err := json.Marshal(sdkNormalize(response, s.depth))
			if err != nil {
				return nil, err
			}
			s.listing = b
			if len(b)+1024 <= sdkMaxEventBytes || s.depth == 1 {
				break
			}
		}
		var back struct {
			Tools []struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"inputSchema"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(s.listing, &back); err != nil {
			return nil, err
		}
		s.served, s.servedSHA, s.servedCut = map[string]any{}, map[string]string{}, map[string]bool{}
		for _, t := range back.Tools {
			var schema any
			if err := json.Unmarshal(t.InputSchema, &schema); err != nil {
				return nil, err
			}
			sum := sha256.Sum256(t.InputSchema)
			s.served[t.Name], s.servedSHA[t.Name], s.servedCut[t.Name] = schema, hex.EncodeToString(sum[:]), hasMarker(schema)
		}
	}
	return servers, nil
}

// description is the tool's description, or one made up from its name when the schema file
// holds none.
func (t *tool) description() string {
	if t.Description != "" {
		return t.Description
	}
	return "Runs " + strings.ReplaceAll(t.Name, "-", " ") + " on " + t.Server + "."
}

// Shares of the SDK shape's own choices.
const (
	// sdkUnknownToolRate is the share of calls made to a tool name the server does not list
	// (a name the agent made up), answered "Tool X not found".
	sdkUnknownToolRate = 0.004
	// sdkIntentRate is the share of calls whose agent filled the injected `context` argument
	// ($mcp_intent).
	sdkIntentRate = 0.85
	// sdkTextResultRate is the share of reporting servers' results that are text, where the
	// ignored keys come as an appended notice rather than as `_ignoredKeys`.
	sdkTextResultRate = 0.3
)

// sdkCall is what a tool call of the SDK shape carries beyond the demo's record.
type sdkCall struct {
	server    *sdkServer
	version   string
	sessionID string
	requestID int
	// arguments as the SDK captured them ($mcp_parameters.request.params.arguments): JSON.
	arguments []byte
	// unknownTool: the call names a tool the server does not list.
	unknownTool bool
	// errorMessage is the first exception's message of a failed call.
	errorMessage string
	// intent is the index of the call's $mcp_intent text, -1 when the agent gave none.
	intent int
	// textResult: the result is text (a reporting server appends the notice to it).
	textResult bool
	// expect is what deriving the call's ignored keys from the event must give.
	expect derivation
}

// Where a call's ignored keys come from (misuse.Source's values).
const (
	sourceReported      = "reported"
	sourceResponse      = "response"
	sourceSchema        = "schema"
	sourceNotMeasurable = "not_measurable"
)

// Not-measurable buckets (the rollups' not_measurable_* columns).
const (
	bucketNoSchema  = "no_schema"
	bucketTruncated = "truncated"
	bucketOther     = "other"
)

// derivation is the ignored keys a call's event lets the pipeline derive.
type derivation struct {
	source string
	bucket string   // when not measurable
	keys   []string // masked, sorted, at most 20
	total  int
}

// measurable tells whether the call's ignored keys can be known from its event.
func (d derivation) measurable() bool { return d.source != sourceNotMeasurable }

// sdkExtra is a session event of the SDK shape: $mcp_initialize, $mcp_tools_list, or the
// $exception beside a failed call.
type sdkExtra struct {
	server                *sdkServer
	version               string
	sessionID             string
	client, clientVersion string
	call                  *event // the failed call ($exception)
}

// Event names of the SDK's other events (its constants.ts).
const (
	evToolsList  = "$mcp_tools_list"
	evInitialize = "$mcp_initialize"
	evException  = "$exception"
)

// sdkPass turns the calls into SDK-shaped ones and returns the session events to add: before
// a user's first call to a server, an $mcp_initialize and an $mcp_tools_list of that server
// (the same key, so the same partition at an earlier offset: the pipeline has the served
// schemas before it derives the calls), and an $exception beside each failed call. (The SDK
// lists tools at every client connection; one listing per user and server keeps the listings,
// 13 to 100 KB each, from outweighing the calls.)
func (g *generator) sdkPass(events []*event) ([]*event, error) {
	servers, err := g.cat.sdkServers()
	if err != nil {
		return nil, err
	}
	seed := uint64(g.cfg.Seed)
	main := g.rng
	g.rng = rand.New(rand.NewPCG(seed^0x73646b5f73686170, seed+0x706f7374686f67)) // "sdk_shap", "posthog"
	defer func() { g.rng = main }()

	type listed struct{ id, server, version string }
	seen := map[listed]bool{}
	pairs, every := 0, max(g.cfg.ListEvery, 1)
	var extras []*event
	for _, e := range events {
		tc := e.tool
		if tc == nil {
			continue
		}
		srv := servers[tc.schemaTool.Server]
		if tc.toolName == execToolName {
			srv = servers[g.cat.exec.Server]
		}
		sc := &sdkCall{server: srv, sessionID: "ses_" + tc.sessionID, intent: -1, requestID: 2 + g.rng.IntN(60)}
		sc.version = srv.versions[userVersion(e.distinctID)]
		if g.chance(sdkIntentRate) {
			sc.intent = g.rng.IntN(len(sdkIntents))
		}
		sc.textResult = g.chance(sdkTextResultRate)
		tc.sdk = sc
		if err := g.sdkArguments(e, sc); err != nil {
			return nil, err
		}

		k := listed{e.distinctID, srv.name, sc.version}
		first := !seen[k]
		seen[k] = true
		if first {
			pairs++
		}
		if first && (pairs-1)%every == 0 {
			for i, name := range []string{evInitialize, evToolsList} {
				at := e.ts.Add(time.Duration(i-2) * time.Second)
				x := &event{seq: g.nextSeq(), name: name, distinctID: e.distinctID, ts: at, uuid: g.newUUID(at),
					sdk: &sdkExtra{server: srv, version: sc.version, sessionID: sc.sessionID, client: tc.clientName, clientVersion: tc.clientVersion}}
				x.tsText = formatTS(at, time.UTC, true)
				extras = append(extras, x)
			}
		}
		if tc.isError {
			x := &event{seq: g.nextSeq(), name: evException, distinctID: e.distinctID, ts: e.ts, uuid: g.newUUID(e.ts),
				sdk: &sdkExtra{server: srv, version: sc.version, sessionID: sc.sessionID, client: tc.clientName, clientVersion: tc.clientVersion, call: e}}
			x.tsText = formatTS(e.ts, time.UTC, true)
			extras = append(extras, x)
		}
	}
	return extras, nil
}

// userVersion picks, from a distinct_id alone, which of a server's versions its user runs.
func userVersion(distinctID string) int {
	var h uint32 = 2166136261
	for i := 0; i < len(distinctID); i++ {
		h = (h ^ uint32(distinctID[i])) * 16777619
	}
	return int(h>>7) & 1
}

// sdkIntents are the $mcp_intent texts agents write into the injected `context` argument.
var sdkIntents = []string{
	"Looking up the records the user asked about so the assistant can answer their question about recent activity.",
	"Checking the current state of the project before making the change the user requested in this conversation.",
	"Gathering the numbers for a weekly report so the user can review how their product is doing.",
	"Finding the item the user described so the assistant can update it with the details they gave.",
	"Verifying a previous step worked as expected before moving on to the next part of the task.",
	"Collecting context about an error the user reported to help diagnose what went wrong and why.",
	"Listing the available resources so the assistant can pick the right one for the user's request.",
	"Reading the relevant file so the assistant can explain the code the user is asking about.",
	// Intents that leak identifying details, as an intent prompt trial looks for (package
	// intents/details finds and masks them at ingest).
	"Looking up the person jane.doe@example.com so the assistant can show her recent events.",
	"Checking why requests from 203.0.113.42 fail before answering the user's question.",
	"Reading /home/mkowalski/app/config.ts that the user mentioned to explain the error.",
	"Testing the capture call with key phc_Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2 the user pasted.",
}

// sdkArguments sets the call's captured arguments, its error message, and what derivation
// must give. Failed calls (which the demo shape gives no arguments) get arguments here; a
// validation failure's arguments break the schema the way its message says.
func (g *generator) sdkArguments(e *event, sc *sdkCall) error {
	tc := e.tool
	var args map[string]any
	if tc.args != nil {
		if err := json.Unmarshal(tc.args, &args); err != nil {
			return err
		}
		tc.args = nil // the captured form replaces it
	} else {
		args = g.genArgs(tc.schemaTool.Schema)
	}
	if tc.isError {
		switch {
		case g.chance(sdkUnknownToolRate / ToolErrorRate):
			sc.unknownTool = true
			tc.toolName = hallucinatedName(tc.toolName, g.rng.IntN(4))
			tc.execVerb, tc.execTarget, tc.mode = "", "", "tools"
			sc.errorMessage = "MCP error -32602: Tool " + tc.toolName + " not found"
			tc.unknownTool = true
		case tc.errorType == "validation_error":
			sc.errorMessage = g.breakArguments(tc.toolName, tc.schemaTool.Schema, args)
			tc.validation = true
		default:
			sc.errorMessage = toolErrorMessages[tc.errorType]
		}
	}
	captured := args
	if tc.execVerb == "call" && tc.execTarget != "" && tc.execTarget != "unrecognized" && !sc.unknownTool {
		inner, err := json.Marshal(args)
		if err != nil {
			return err
		}
		captured = map[string]any{"command": "call " + tc.execTarget + " " + string(inner)}
	}
	// $mcp_parameters is normalized from its top: the arguments sit three levels down.
	capturedAny := sdkNormalize(sdkSanitize(captured), sdkMaxDepth-3)
	b, err := json.Marshal(capturedAny)
	if err != nil {
		return err
	}
	sc.arguments = b
	if !tc.isError {
		sc.expect = expectDerivation(sc, tc, capturedAny)
	}
	return nil
}

// hallucinatedName is a tool name the agent made up from a real one.
func hallucinatedName(name string, variant int) string {
	switch variant {
	case 0:
		return name + "-v2"
	case 1:
		return name + "s"
	case 2:
		return "get-" + name
	}
	return strings.TrimSuffix(name, "s") + "-all"
}

// toolErrorMessages are the messages of failed calls other than validation errors.
var toolErrorMessages = map[string]string{
	"tool_error":        "Error: the tool failed: unexpected response from the upstream service",
	"api_error":         "Error: upstream API returned 502 Bad Gateway",
	"timeout":           "Error: the request timed out after 30000 ms",
	"permission_denied": "Error: permission denied for this project",
	"rate_limited":      "Error: rate limit exceeded, retry in 20 s",
	"not_found":         "Error: resource not found",
	"validation_error":  "Error: invalid arguments",
}

// breakArguments makes args fail the schema (a required key dropped, or a value of the wrong
// type) and returns the message a zod-validated MCP server answers with.
func (g *generator) breakArguments(toolName string, schema, args map[string]any) string {
	prefix := "MCP error -32602: Input validation error: Invalid arguments for tool " + toolName + ": "
	props, _ := schema["properties"].(map[string]any)
	var required []string
	if req, ok := schema["required"].([]any); ok {
		for _, r := range req {
			if s, ok := r.(string); ok && props[s] != nil {
				required = append(required, s)
			}
		}
	}
	if len(required) > 0 && g.chance(0.5) {
		k := required[g.rng.IntN(len(required))]
		delete(args, k)
		ps, _ := props[k].(map[string]any)
		return prefix + "Invalid input: expected " + zodType(ps) + ", received undefined at " + k
	}
	for _, k := range sortedKeys(props) {
		ps, _ := props[k].(map[string]any)
		if zodType(ps) == "number" || zodType(ps) == "boolean" {
			args[k] = "two"
			return prefix + "Invalid input: expected " + zodType(ps) + ", received string at " + k
		}
	}
	args["unexpected_field"] = 1
	return prefix + `Unrecognized key: "unexpected_field"`
}

// zodType is the type name zod's messages give a schema.
func zodType(s map[string]any) string {
	switch t := schemaType(s); t {
	case "integer":
		return "number"
	case "":
		return "string"
	default:
		return t
	}
}

// expectDerivation restates how the pipeline derives a successful call's ignored keys from
// its SDK-shaped event: from the tool result when the server reports them
// (reporting servers name them only when there are some), else from the arguments against
// the tool's served schema, where whatever the SDK cut or redacted on the way makes the call
// not measurable rather than clean.
func expectDerivation(sc *sdkCall, tc *toolCallRec, captured any) derivation {
	if sc.server.reports && len(tc.ignored) > 0 {
		return derivation{source: sourceResponse, keys: tc.ignored, total: tc.ignoredTotal}
	}
	name := tc.toolName
	served, ok := sc.server.served[name]
	if !ok {
		return derivation{source: sourceNotMeasurable, bucket: bucketNoSchema}
	}
	root, ok := served.(map[string]any)
	if !ok {
		return derivation{source: sourceNotMeasurable, bucket: bucketTruncated}
	}
	for _, k := range []string{"$ref", "oneOf", "anyOf", "allOf"} {
		if _, ok := root[k]; ok {
			return derivation{source: sourceNotMeasurable, bucket: bucketOther}
		}
	}
	var paths []string
	obj, _ := captured.(map[string]any)
	switch walkServed([]any{root}, obj, "", true, &paths) {
	case walkCut:
		return derivation{source: sourceNotMeasurable, bucket: bucketTruncated}
	}
	keys, total := capKeys(paths)
	return derivation{source: sourceSchema, keys: keys, total: total}
}

// walkResult says whether a walk could see every key it had to.
type walkResult int

const (
	walkOK  walkResult = iota
	walkCut            // a key could hide in something the SDK cut or redacted
)

// hasMarker tells whether v holds one of the SDK's truncation or redaction markers.
func hasMarker(v any) bool {
	switch x := v.(type) {
	case string:
		return isMarker(x)
	case map[string]any:
		if _, cut := x["..."]; cut {
			return true
		}
		for _, val := range x {
			if hasMarker(val) {
				return true
			}
		}
	case []any:
		for _, val := range x {
			if hasMarker(val) {
				return true
			}
		}
	}
	return false
}

// isMarker tells the SDK's truncation and redaction markers apart from ordinary strings.
func isMarker(v any) bool {
	s, ok := v.(string)
	return ok && (s == sdkObjectCut || s == sdkArrayCut || s == sdkBreadthCut || s == sdkRedacted)
}

// flattenServed returns the schemas with their anyOf/oneOf/allOf alternatives expanded
// (recursively, 8 levels at most). Served schemas may hold the SDK's markers in place of a
// schema or an alternative: cut is true when one does.
func flattenServed(schemas []any) (all []map[string]any, cut bool) {
	var walk func(s any, depth int)
	walk = func(s any, depth int) {
		if isMarker(s) {
			cut = true
			return
		}
		m, _ := s.(map[string]any)
		if m == nil || depth > 8 {
			return
		}
		all = append(all, m)
		for _, k := range [...]string{"anyOf", "oneOf", "allOf"} {
			if isMarker(m[k]) {
				cut = true
			}
			alts, _ := m[k].([]any)
			for _, a := range alts {
				walk(a, depth+1)
			}
		}
	}
	for _, s := range schemas {
		walk(s, 0)
	}
	return all, cut
}

// walkServed appends the undeclared key paths of obj by ignoredKeys' rules, over a schema as
// served (possibly cut by the SDK) and arguments as captured; it reports walkCut when an
// object or array it must look into is governed by a cut schema, or is itself cut. top marks
// the arguments object itself, whose keys are the tool's parameters even when the schema
// lists none (`{}`: no parameters).
func walkServed(schemas []any, obj map[string]any, path string, top bool, out *[]string) walkResult {
	all, cut := flattenServed(schemas)
	if cut {
		return walkCut
	}
	for _, s := range all {
		for _, k := range []string{"properties", "additionalProperties", "items", "anyOf", "oneOf", "allOf"} {
			if isMarker(s[k]) {
				return walkCut
			}
		}
		if props, ok := s["properties"].(map[string]any); ok {
			if _, cut := props["..."]; cut {
				return walkCut
			}
		}
	}
	if _, cut := obj["..."]; cut {
		return walkCut
	}
	strict, allowed := top, false
	var additional []any
	for _, s := range all {
		if _, ok := s["properties"].(map[string]any); ok {
			strict = true
		}
		switch ap := s["additionalProperties"].(type) {
		case bool:
			if ap {
				allowed = true
			} else {
				strict = true
			}
		case map[string]any:
			allowed = true
			additional = append(additional, ap)
		}
	}
	if !strict && !allowed {
		return walkOK // free-form object
	}
	for _, key := range sortedKeys(obj) {
		val := obj[key]
		var sub []any
		for _, s := range all {
			props, _ := s["properties"].(map[string]any)
			if ps, ok := props[key]; ok {
				sub = append(sub, ps)
			}
		}
		switch {
		case len(sub) > 0:
			if walkValue(sub, val, joinPath(path, key), out) == walkCut {
				return walkCut
			}
		case allowed:
			if len(additional) > 0 && walkValue(additional, val, joinPath(path, key), out) == walkCut {
				return walkCut
			}
		default:
			*out = append(*out, joinPath(path, key))
		}
	}
	return walkOK
}

func walkValue(schemas []any, v any, path string, out *[]string) walkResult {
	switch v := v.(type) {
	case map[string]any:
		return walkServed(schemas, v, path, false, out)
	case []any:
		all, cut := flattenServed(schemas)
		if cut {
			return walkCut
		}
		var items []any
		for _, f := range all {
			if it, ok := f["items"]; ok {
				items = append(items, it)
			}
		}
		if len(items) == 0 {
			return walkOK
		}
		for i, item := range v {
			if walkValue(items, item, joinPath(path, strconv.Itoa(i)), out) == walkCut {
				return walkCut
			}
		}
	case string:
		if v == sdkObjectCut || v == sdkArrayCut || v == sdkBreadthCut {
			return walkCut
		}
		if v == sdkRedacted {
			// A redacted value hides keys only where the schema admits an object or array.
			all, _ := flattenServed(schemas)
			for _, f := range all {
				if t := schemaType(f); t == "object" || t == "array" {
					return walkCut
				}
			}
		}
	}
	return walkOK
}

// sdkToolCallProperties appends a tool call's properties as the SDK sends them: its common
// properties, the server's own (PostHog's exec and recruitment properties, which it passes
// as custom properties), then posthog-node's.
func (e *event) sdkToolCallProperties(p []kv) []kv {
	t, sc := e.tool, e.tool.sdk
	p = append(p, sv("$mcp_source", sdkSource), sv("$session_id", sc.sessionID))
	if t.conversationID != "" {
		p = append(p, sv("$mcp_conversation_id", t.conversationID))
	}
	p = append(p, sv("$mcp_resource_name", t.toolName), sv("$mcp_tool_name", t.toolName))
	if !sc.unknownTool {
		p = append(p, sv("$mcp_tool_description", t.schemaTool.description()))
	}
	p = append(p, kv{k: "$mcp_duration_ms", v: t.durationMs})
	p = sdkCommon(p, sc.server, sc.version, t.clientName, t.clientVersion)
	if sc.intent >= 0 {
		p = append(p, sv("$mcp_intent", sdkIntents[sc.intent]), sv("$mcp_intent_source", "context_parameter"))
	}
	p = append(p, kv{k: "$mcp_is_error", v: strconv.FormatBool(t.isError)})
	if t.isError {
		p = append(p, sv("$mcp_error_type", "Error"), sv("$mcp_error_message", sc.errorMessage))
	}
	params := `{"request":{"id":` + strconv.Itoa(sc.requestID) + `,"jsonrpc":"2.0","method":"tools/call","params":{"name":` +
		string(ingest.AppendJSString(nil, t.toolName)) + `,"arguments":` + string(sc.arguments) + `}}}`
	p = append(p, kv{k: "$mcp_parameters", v: params}, kv{k: "$mcp_response", v: string(e.sdkResult())})
	if t.execVerb != "" {
		p = append(p, sv("$mcp_exec_verb", t.execVerb))
	}
	if t.execTarget != "" {
		p = append(p, sv("$mcp_exec_target_tool", t.execTarget))
	}
	if sc.server.name == "posthog" {
		p = append(p, sv("$mcp_mode", t.mode))
	}
	p = appendDiag(p, t.diag)
	return appendLib(p)
}

// sdkCommon appends the server, client and protocol properties every SDK event carries.
func sdkCommon(p []kv, srv *sdkServer, version, client, clientVersion string) []kv {
	p = append(p, sv("$mcp_server_name", srv.name), sv("$mcp_server_version", version))
	if client != "" {
		p = append(p, sv("$mcp_client_name", client), sv("$mcp_client_version", clientVersion))
	}
	return append(p, sv("$mcp_protocol_version", sdkProtocols[client]))
}

func appendLib(p []kv) []kv {
	return append(p, sv("$lib", sdkLib), sv("$lib_version", sdkLibVersion), kv{k: "$is_server", v: "true"}, kv{k: "$geoip_disable", v: "true"})
}

// sdkExtraProperties appends the properties of an $mcp_initialize, $mcp_tools_list or
// $exception event.
func (e *event) sdkExtraProperties(p []kv) []kv {
	x := e.sdk
	switch e.name {
	case evException:
		t, sc := x.call.tool, x.call.tool.sdk
		p = append(p, sv("$session_id", x.sessionID))
		if t.conversationID != "" {
			p = append(p, sv("$mcp_conversation_id", t.conversationID))
		}
		list := `[{"type":"Error","value":` + string(ingest.AppendJSString(nil, sc.errorMessage)) +
			`,"mechanism":{"type":"generic","handled":true,"synthetic":true,"exception_id":0}}]`
		p = append(p, kv{k: "$exception_list", v: list}, sv("$exception_level", "error"),
			sv("$mcp_resource_name", t.toolName), sv("$mcp_tool_name", t.toolName))
		if !sc.unknownTool {
			p = append(p, sv("$mcp_tool_description", t.schemaTool.description()))
		}
		return appendLib(sdkCommon(p, x.server, x.version, x.client, x.clientVersion))
	case evInitialize:
		p = append(p, sv("$mcp_source", sdkSource), sv("$session_id", x.sessionID),
			sv("$mcp_resource_name", "Unknown Tool Name"), kv{k: "$mcp_duration_ms", v: "4"})
		p = sdkCommon(p, x.server, x.version, x.client, x.clientVersion)
		proto := string(ingest.AppendJSString(nil, sdkProtocols[x.client]))
		client := `{"name":` + string(ingest.AppendJSString(nil, x.client)) + `,"version":` + string(ingest.AppendJSString(nil, x.clientVersion)) + `}`
		server := `{"name":` + string(ingest.AppendJSString(nil, x.server.name)) + `,"version":` + string(ingest.AppendJSString(nil, x.version)) + `}`
		p = append(p,
			kv{k: "$mcp_parameters", v: `{"request":{"id":0,"jsonrpc":"2.0","method":"initialize","params":{"protocolVersion":` + proto + `,"capabilities":{},"clientInfo":` + client + `}}}`},
			kv{k: "$mcp_response", v: `{"protocolVersion":` + proto + `,"capabilities":{"tools":{"listChanged":true}},"serverInfo":` + server + `}`})
		return appendLib(p)
	}
	p = append(p, sv("$mcp_source", sdkSource), sv("$session_id", x.sessionID),
		kv{k: "$mcp_listed_tool_names", v: jsonStringArray(x.server.names)}, kv{k: "$mcp_duration_ms", v: "6"})
	p = sdkCommon(p, x.server, x.version, x.client, x.clientVersion)
	p = append(p, kv{k: "$mcp_is_error", v: "false"},
		kv{k: "$mcp_parameters", v: `{"request":{"id":1,"jsonrpc":"2.0","method":"tools/list"}}`},
		kv{k: "$mcp_response", v: string(x.server.listing)})
	return appendLib(p)
}

// sdkResult is the call's $mcp_response: an error result, or a result made up from the
// call's uuid (so it needs no memory until written): a JSON object both as text and as
// structuredContent, or, for sdkTextResultRate of the calls, text alone. A reporting server
// adds the ignored keys: `_ignoredKeys` and `_ignoredKeysNote` to an object, the notice to a
// text.
func (e *event) sdkResult() []byte {
	t, sc := e.tool, e.tool.sdk
	if t.isError {
		b := append([]byte(`{"content":[{"type":"text","text":`), ingest.AppendJSString(nil, sc.errorMessage)...)
		return append(b, `}],"isError":true}`...)
	}
	var h uint64 = 14695981039346656037
	for i := 0; i < len(e.uuid); i++ {
		h = (h ^ uint64(e.uuid[i])) * 1099511628211
	}
	r := rand.New(rand.NewPCG(h, h>>17|1))
	report := sc.server.reports && len(t.ignored) > 0
	n := 1 + r.IntN(4)
	names := make([]string, n)
	for i := range names {
		names[i] = resultNames[r.IntN(len(resultNames))] + "-" + strconv.Itoa(100+r.IntN(900))
	}
	if sc.textResult {
		text := "Found " + strconv.Itoa(n) + " result(s) for " + t.toolName + ": " + strings.Join(names, ", ") + "."
		if report {
			text += "\n\n" + ignoredNotice(t.ignored, t.ignoredTotal)
		}
		b := append([]byte(`{"content":[{"type":"text","text":`), ingest.AppendJSString(nil, text)...)
		return append(b, `}]}`...)
	}
	obj := []byte(`{"ok":true,"tool":`)
	obj = ingest.AppendJSString(obj, t.toolName)
	obj = append(obj, `,"count":`...)
	obj = strconv.AppendInt(obj, int64(n), 10)
	obj = append(obj, `,"results":[`...)
	for i, name := range names {
		if i > 0 {
			obj = append(obj, ',')
		}
		obj = append(obj, `{"id":`...)
		obj = strconv.AppendInt(obj, int64(10_000+r.IntN(90_000)), 10)
		obj = append(obj, `,"name":`...)
		obj = ingest.AppendJSString(obj, name)
		obj = append(obj, `,"status":`...)
		obj = ingest.AppendJSString(obj, resultStatuses[r.IntN(len(resultStatuses))])
		obj = append(obj, `,"updated_at":`...)
		obj = ingest.AppendJSString(obj, e.ts.Add(-time.Duration(r.IntN(90*24))*time.Hour).Format("2006-01-02T15:04:05Z"))
		obj = append(obj, `,"url":`...)
		obj = ingest.AppendJSString(obj, "https://app.example.com/"+t.schemaTool.Server+"/"+name)
		obj = append(obj, '}')
	}
	obj = append(obj, ']')
	if r.IntN(2) == 0 {
		obj = append(obj, `,"next_cursor":`...)
		obj = ingest.AppendJSString(obj, "c_"+strconv.FormatUint(r.Uint64(), 36))
	}
	if report {
		obj = append(obj, `,"_ignoredKeys":`...)
		obj = append(obj, jsonStringArray(t.ignored)...)
		obj = append(obj, `,"_ignoredKeysNote":`...)
		obj = ingest.AppendJSString(obj, ignoredNotice(t.ignored, t.ignoredTotal))
	}
	obj = append(obj, '}')
	b := append([]byte(`{"content":[{"type":"text","text":`), ingest.AppendJSString(nil, string(obj))...)
	b = append(b, `}],"structuredContent":`...)
	b = append(b, obj...)
	return append(b, '}')
}

var (
	resultNames    = []string{"weekly-signups", "checkout-funnel", "api-latency", "release-notes", "onboarding", "billing-page", "retention", "errors-by-route"}
	resultStatuses = []string{"active", "draft", "archived", "running"}
)

// ignoredNotice is the notice PostHog's MCP server gives for ignored keys: the keys shown
// JSON-quoted, and how many more there were beyond them.
func ignoredNotice(keys []string, total int) string {
	b := []byte("Ignored input keys: ")
	for i, k := range keys {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = ingest.AppendJSString(b, k)
	}
	if more := total - len(keys); more > 0 {
		b = append(b, " and "...)
		b = strconv.AppendInt(b, int64(more), 10)
		b = append(b, " more"...)
	}
	return string(b) + ". These keys are not part of the tool's input schema, so the tool did not use them."
}
