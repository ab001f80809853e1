package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/segmentio/encoding/json"

	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/misuse"
)

// The kinds the MCP analytics SDK (@posthog/mcp 0.16.3) sends besides tool calls, and the
// properties it puts on every event (src/extensions/posthog-events.ts). Their payloads
// ($mcp_parameters, $mcp_response, $exception_list) are the SDK's captures of MCP messages, cut
// and redacted by it (src/extensions/truncation.ts, mcp-payloads.ts): the fields read from them
// are taken where they have the expected type and left empty otherwise, never a reason to
// refuse the event.

// SDKSource is the $mcp_source the MCP analytics SDK puts on every event it sends
// (src/extensions/constants.ts POSTHOG_MCP_ANALYTICS_SOURCE), through instrument() and through
// its custom-dispatcher API (PostHogMCP) alike; a tool call's row holds it as its source.
const SDKSource = "posthog_mcp_analytics"

// Server and client properties of the MCP analytics SDK's events.
const (
	propServerName      = "$mcp_server_name"
	propServerVersion   = "$mcp_server_version"
	propClientName      = "$mcp_client_name"
	propClientVersion   = "$mcp_client_version"
	propProtocolVersion = "$mcp_protocol_version"
	propSessionID       = "$session_id"
	propParameters      = "$mcp_parameters"
	propResponse        = "$mcp_response"
)

// sdkCommonReads are the SDK's session properties every SDK kind reads.
var sdkCommonReads = []propKey{keyServerName, keyServerVersion, keyClientName, keyClientVersion, keyProtocolVersion, keySessionID}

// Session holds the MCP session properties the SDK puts on its events.
type Session struct {
	SessionID       string // $session_id
	ServerName      string // $mcp_server_name
	ServerVersion   string // $mcp_server_version
	ClientName      string // $mcp_client_name
	ClientVersion   string // $mcp_client_version
	ProtocolVersion string // $mcp_protocol_version: the version negotiated at initialize
}

func (p propertyReader) session(s *Session) {
	s.SessionID = p.str(keySessionID)
	s.ServerName = p.name(keyServerName)
	s.ServerVersion = p.name(keyServerVersion)
	s.ClientName = p.name(keyClientName)
	s.ClientVersion = p.name(keyClientVersion)
	s.ProtocolVersion = p.name(keyProtocolVersion)
}

// bound bounds the names and versions of s that were filled from elsewhere than properties
// (safetext.MaxName, as propertyReader.name does).
func (s *Session) bound() {
	for _, f := range []*string{&s.ServerName, &s.ServerVersion, &s.ClientName, &s.ClientVersion, &s.ProtocolVersion} {
		*f = safetext.Bound(*f, safetext.MaxName)
	}
}

// ToolsList holds a $mcp_tools_list event: the tools an MCP server listed to a client.
type ToolsList struct {
	Session
	// ListedToolNames is $mcp_listed_tool_names: every tool name listed (the SDK never cuts it).
	ListedToolNames []string
	// Tools are the tools of $mcp_response.tools that have a name, in order; the SDK keeps at
	// most 100 entries of an array, so a long list is cut here (not in ListedToolNames).
	Tools []ServedTool
	// Cursor is the request's pagination cursor (MCP tools/list params.cursor) and HasCursor
	// whether the request carried one: a request without one asks for a listing's first page,
	// one with a cursor (even "") for a later page. It is read from
	// $mcp_parameters.request.params.cursor, where the SDK's wrapped server captures the
	// request, else $mcp_parameters.params.cursor or $mcp_parameters.cursor (a custom
	// dispatcher's captureToolsList passes whatever it was given as parameters).
	Cursor    string
	HasCursor bool
	// NextCursor is $mcp_response.nextCursor: the cursor of the listing's next page, "" on its
	// last page (MCP's pagination: the result carries nextCursor while more pages follow).
	NextCursor string
}

// ServedTool is one tool of a tools/list result as captured.
type ServedTool struct {
	Name        string
	Description string // "" when absent or not a string
	// InputSchema is the tool's inputSchema JSON text exactly as received (nil when absent);
	// it shares the event's bytes.
	InputSchema json.RawMessage
}

var toolsListReads = append([]propKey{keyListedToolNames, keyResponse, keyParameters}, sdkCommonReads...)

// servedToolKeys are the members of a listed tool that servedTools reads.
var servedToolKeys = [...]string{"name", "description", "inputSchema"}

// servedTools returns the tools that have a name of the well-formed tools array at b[i] (a
// '['), nil when none has, and the offset just after the array. Each tool's members are read
// in one pass over it.
func servedTools(b []byte, i int) (tools []ServedTool, end int) {
	var tool [len(servedToolKeys)][]byte
	for i = skipSpace(b, i+1); i < len(b) && b[i] != ']'; {
		if b[i] == '{' {
			end = objectMembers(b, i, servedToolKeys[:], tool[:])
		} else { // not an object: no name
			end, _ = skipValue(b, i)
			clear(tool[:])
		}
		if i = skipSpace(b, end); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		name, ok := stringValue(tool[0])
		if !ok || name == "" {
			continue // the SDK's "[MaxProperties ~]" after 100 tools, or something unreadable
		}
		desc, _ := stringValue(tool[1])
		tools = append(tools, ServedTool{Name: safetext.Bound(name, safetext.MaxName), Description: desc, InputSchema: tool[2]})
	}
	return tools, min(i+1, len(b)) // past the ']'
}

func decodeToolsList(p *propertyReader, ev *Event) {
	t := &ToolsList{}
	p.session(&t.Session)
	listed := keyListedToolNames
	if raw := p.raw(listed); !isNull(raw) {
		items, ok := arrayItems(raw)
		if !ok {
			p.v.add(path(listed), "must be an array of strings")
		}
		for i, item := range items {
			s, ok := stringValue(item)
			if !ok || isNull(item) {
				p.v.add(path(listed)+"["+itoa(i)+"]", "must be a string")
				continue
			}
			t.ListedToolNames = append(t.ListedToolNames, safetext.Bound(s, safetext.MaxName))
		}
	}
	// One pass over the result, its tools array included (the bulk of the event).
	var nextCursor []byte
	if result := p.raw(keyResponse); len(result) > 0 && result[0] == '{' {
		for i := skipSpace(result, 1); i < len(result) && result[i] == '"'; {
			keyEnd := skipString(result, i)
			j := skipSpace(result, skipSpace(result, keyEnd)+1)
			var end int
			switch name := unquote(result[i:keyEnd]); {
			case string(name) == "tools" && result[j] == '[':
				t.Tools, end = servedTools(result, j)
			default:
				end, _ = skipValue(result, j)
				switch string(name) {
				case "tools": // the last tools member is not an array
					t.Tools = nil
				case "nextCursor":
					nextCursor = result[j:end]
				}
			}
			if i = skipSpace(result, end); i < len(result) && result[i] == ',' {
				i = skipSpace(result, i+1)
			}
		}
	}
	t.NextCursor, _ = stringValue(nextCursor)
	// Peeked: the request stays in properties, as sent.
	params := p.peek(keyParameters)
	for _, at := range [][]byte{objectValue(objectValue(params, "request"), "params"), objectValue(params, "params"), params} {
		if c := objectValue(at, "cursor"); c != nil && !isNull(c) {
			t.Cursor, _ = stringValue(c)
			t.HasCursor = true
			break
		}
	}
	ev.ToolsList = t
}

// ServedSchemaRow is one row of mcpulse.served_tool_schemas_in: a tool's input schema as an
// MCP server version served it (the schema-check workstream's table; its readers deduplicate
// by content hash per server name, version and tool).
type ServedSchemaRow struct {
	ServerName    string `ch:"server_name"`
	ServerVersion string `ch:"server_version"`
	ToolName      string `ch:"tool_name"`
	// SchemaSHA256 is the lowercase hex SHA-256 of InputSchema.
	SchemaSHA256 string `ch:"schema_sha256"`
	// InputSchema is the inputSchema JSON text exactly as the event held it.
	InputSchema string `ch:"input_schema"`
	Description string `ch:"description"`
	// Truncated is 1 when the SDK cut or redacted the schema (misuse.SchemaTruncated).
	Truncated uint8     `ch:"truncated"`
	SeenAt    time.Time `ch:"seen_at"`
	EventUUID uuid.UUID `ch:"event_uuid"`
}

// NewServedSchemaRow is the served_tool_schemas_in row of one tool that server name and
// version served, seen at seenAt: schema_sha256 is the hex SHA-256 of its InputSchema text as
// served, truncated says the text holds the MCP analytics SDK's cut or redaction markers
// (misuse.SchemaTruncated), event is the event (or schema check run) that saw it. The server
// name, version and tool name are bounded to safetext.MaxName bytes (safetext.Bound), as an
// event's are when it is parsed, so a listing fetched by the schema check and one reported in
// events name a long tool alike. The consumer
// writes a $mcp_tools_list event's tools with it, and the schema check
// (schemacheck.StoreServedSchemas) the tools it fetched from the server.
func NewServedSchemaRow(server, version string, tool ServedTool, seenAt time.Time, event uuid.UUID) ServedSchemaRow {
	sum := sha256.Sum256(tool.InputSchema)
	b := func(s string) string { return safetext.Bound(s, safetext.MaxName) }
	return ServedSchemaRow{
		ServerName: b(server), ServerVersion: b(version), ToolName: b(tool.Name),
		SchemaSHA256: hex.EncodeToString(sum[:]), InputSchema: string(tool.InputSchema), Description: tool.Description,
		Truncated: flag(truncated.of(sum, tool.InputSchema)), SeenAt: seenAt, EventUUID: event,
	}
}

// ToolsListRow is one row of mcpulse.tools_list_events (migration 0043): a tools/list request
// for a listing's first page, when and by which user's client, so a tool call can be
// attributed to the tool schemas its client last fetched (DESIGN.md §8, "Intent prompt
// trials"). Names are the session properties as the event held them (bounded).
type ToolsListRow struct {
	UUID           uuid.UUID `ch:"uuid"`
	ListedAt       time.Time `ch:"listed_at"`
	DistinctID     string    `ch:"distinct_id"`
	ClientName     string    `ch:"client_name"`
	ClientVersion  string    `ch:"client_version"`
	ServerName     string    `ch:"server_name"`
	ServerVersion  string    `ch:"server_version"`
	SessionID      string    `ch:"session_id"`
	KafkaPartition int32     `ch:"kafka_partition"`
	KafkaOffset    int64     `ch:"kafka_offset"`
}

func toolsListRows(rs *Rows, ev *Event, at RowContext) {
	t := ev.ToolsList
	if !t.HasCursor {
		rs.ToolsLists = append(rs.ToolsLists, ToolsListRow{
			UUID: ev.UUID, ListedAt: ev.Timestamp, DistinctID: ev.DistinctID, ClientName: t.ClientName,
			ClientVersion: t.ClientVersion, ServerName: t.ServerName, ServerVersion: t.ServerVersion,
			SessionID: t.SessionID, KafkaPartition: at.Partition, KafkaOffset: at.Offset,
		})
	}
	for _, tool := range t.Tools {
		rs.ServedSchemas = append(rs.ServedSchemas, NewServedSchemaRow(t.ServerName, t.ServerVersion, tool, ev.Timestamp, ev.UUID))
	}
}

// truncatedCacheSize bounds truncated: the schemas of many servers' listings.
const truncatedCacheSize = 4096

// truncated caches misuse.SchemaTruncated by the schema's SHA-256. A server sends the same
// listing on every session, and telling a cut schema needs a decode of any schema whose text
// may hold a marker (a \u escape is enough): in a profile of SDK-shaped traffic those decodes
// were 5% of the consumer's CPU.
var truncated truncatedCache

// truncatedCache is misuse.SchemaTruncated by schema SHA-256, emptied when it reaches
// truncatedCacheSize entries. Safe for concurrent use.
type truncatedCache struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]bool
}

// of returns misuse.SchemaTruncated(schema), whose SHA-256 is sum.
func (c *truncatedCache) of(sum [sha256.Size]byte, schema []byte) bool {
	c.mu.Lock()
	v, ok := c.m[sum]
	c.mu.Unlock()
	if ok {
		return v
	}
	v = misuse.SchemaTruncated(schema)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= truncatedCacheSize {
		c.m = make(map[[sha256.Size]byte]bool, 64)
	}
	c.m[sum] = v
	c.mu.Unlock()
	return v
}

// servedSchemaKey is a row's key in mcpulse.served_tool_schemas (its ORDER BY).
type servedSchemaKey struct{ server, version, tool, sha string }

// CollapseServedSchemas returns the served-schema rows of one batch (rows, in batch order) with
// each key of mcpulse.served_tool_schemas (server name, server version, tool, schema hash) kept
// at most twice: the key's row with the earliest seen_at and its row with the latest seen_at,
// or one row when they are the same. The rows kept stay in batch order, each with its own
// event's uuid, description and seen_at, and with Truncated the largest of its key's rows. The
// result shares rows' backing array, as slices.DeleteFunc does: rows is not to be used after.
//
// Why: a server version lists its tools on every session, so SDK traffic repeats the same
// listing many times within a batch, each row carrying a whole input schema (kilobytes) that
// the client encodes and ClickHouse reads only to fold into the same states. The view over
// served_tool_schemas_in folds anyState(input_schema) (one text per hash), maxState(truncated),
// minState(seen_at), maxState(seen_at) and argMaxState(description, seen_at); the rows kept
// give the same states as all of them:
//   - seen_at is compared as the DateTime column stores it, in whole seconds (Unix): two
//     events of one second tie in ClickHouse, whatever their fractions.
//   - among rows of equal seen_at, ClickHouse's argMax keeps the value it met first, so an
//     insert of the whole batch gives the description of the first row, in batch order, of
//     the latest second: that row is the one kept (and, for the earliest, the first row of
//     the earliest second). Across inserts (other batches, or a batch cut by months), a tie on
//     seen_at is settled by the order in which ClickHouse merges their states, with or without
//     the collapse.
//
// A row dropped adds nothing to its key that the rows kept do not. Should ClickHouse refuse a
// row kept for good, its event is dead-lettered as before; the events of the rows dropped are
// counted stored.
func CollapseServedSchemas(rows []ServedSchemaRow) []ServedSchemaRow {
	if len(rows) < 2 {
		return rows
	}
	// first and last index, per key in order of first appearance, the key's earliest and
	// latest row; truncated the largest flag of its rows.
	type span struct {
		first, last int
		truncated   uint8
	}
	at := make(map[servedSchemaKey]int, 64)
	spans := make([]span, 0, 64)
	for i := range rows {
		r := &rows[i]
		k := servedSchemaKey{r.ServerName, r.ServerVersion, r.ToolName, r.SchemaSHA256}
		j, ok := at[k]
		if !ok {
			at[k] = len(spans)
			spans = append(spans, span{first: i, last: i, truncated: r.Truncated})
			continue
		}
		s := &spans[j]
		sec := r.SeenAt.Unix()
		if sec < rows[s.first].SeenAt.Unix() {
			s.first = i
		}
		if sec > rows[s.last].SeenAt.Unix() {
			s.last = i
		}
		s.truncated = max(s.truncated, r.Truncated)
	}
	if len(spans) == len(rows) {
		return rows // no key repeats
	}
	keep := make([]bool, len(rows))
	for _, s := range spans {
		keep[s.first], keep[s.last] = true, true
		rows[s.first].Truncated, rows[s.last].Truncated = s.truncated, s.truncated
	}
	out := rows[:0]
	for i := range rows {
		if keep[i] {
			out = append(out, rows[i])
		}
	}
	clear(rows[len(out):]) // let the schemas of the rows dropped go
	return out
}

// Initialize holds a $mcp_initialize event: an MCP session's handshake.
type Initialize struct {
	Session
	// RequestedProtocolVersion is the version the client asked for
	// ($mcp_parameters.request.params.protocolVersion); Session.ProtocolVersion is the one
	// negotiated (the SDK's $mcp_protocol_version, else $mcp_response.protocolVersion).
	RequestedProtocolVersion string
	// ClientCapabilities and ServerCapabilities are the capabilities objects of the request
	// and the result as JSON text ("" when absent or not objects).
	ClientCapabilities string
	ServerCapabilities string
}

var initializeReads = append([]propKey{keyParameters, keyResponse}, sdkCommonReads...)

func decodeInitialize(p *propertyReader, ev *Event) {
	in := &Initialize{}
	p.session(&in.Session)
	// Peeked: the request and result stay whole in properties (the server's instructions, ...).
	params := objectValue(objectValue(p.peek(keyParameters), "request"), "params")
	result := p.peek(keyResponse)
	in.RequestedProtocolVersion, _ = stringValue(objectValue(params, "protocolVersion"))
	in.ClientCapabilities = objectText(objectValue(params, "capabilities"))
	in.ServerCapabilities = objectText(objectValue(result, "capabilities"))
	fill := func(dst *string, raw []byte) {
		if *dst == "" {
			*dst, _ = stringValue(raw)
		}
	}
	client, server := objectValue(params, "clientInfo"), objectValue(result, "serverInfo")
	fill(&in.ClientName, objectValue(client, "name"))
	fill(&in.ClientVersion, objectValue(client, "version"))
	fill(&in.ServerName, objectValue(server, "name"))
	fill(&in.ServerVersion, objectValue(server, "version"))
	fill(&in.ProtocolVersion, objectValue(result, "protocolVersion"))
	fill(&in.ProtocolVersion, objectValue(params, "protocolVersion"))
	in.Session.bound()
	in.RequestedProtocolVersion = safetext.Bound(in.RequestedProtocolVersion, safetext.MaxName)
	ev.Initialize = in
}

// InitializeRow is one row of mcpulse.mcp_initialize_events.
type InitializeRow struct {
	UUID                     uuid.UUID `ch:"uuid"`
	Timestamp                time.Time `ch:"timestamp"`
	DistinctID               string    `ch:"distinct_id"`
	SessionID                string    `ch:"session_id"`
	ClientName               string    `ch:"client_name"`
	ClientVersion            string    `ch:"client_version"`
	ProtocolVersion          string    `ch:"protocol_version"`
	RequestedProtocolVersion string    `ch:"requested_protocol_version"`
	ClientCapabilities       string    `ch:"client_capabilities"`
	ServerName               string    `ch:"server_name"`
	ServerVersion            string    `ch:"server_version"`
	ServerCapabilities       string    `ch:"server_capabilities"`
	Properties               string    `ch:"properties"` // Event.Extra
	KafkaPartition           int32     `ch:"kafka_partition"`
	KafkaOffset              int64     `ch:"kafka_offset"`
	InsertedAt               time.Time `ch:"inserted_at"`
}

func initializeRows(rs *Rows, ev *Event, at RowContext) {
	in := ev.Initialize
	rs.Initialize = append(rs.Initialize, InitializeRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, DistinctID: ev.DistinctID, SessionID: in.SessionID,
		ClientName: in.ClientName, ClientVersion: in.ClientVersion, ProtocolVersion: in.ProtocolVersion,
		RequestedProtocolVersion: in.RequestedProtocolVersion, ClientCapabilities: in.ClientCapabilities,
		ServerName: in.ServerName, ServerVersion: in.ServerVersion, ServerCapabilities: in.ServerCapabilities,
		Properties: string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
	})
}

// Exception holds a $exception event (PostHog error tracking's format).
type Exception struct {
	Session
	ToolName string // $mcp_tool_name ("" for an exception outside a tool call)
	// Type and Message are the first exception's of $exception_list ("" when absent).
	Type, Message string
	Level         string // $exception_level
}

var exceptionReads = append([]propKey{keyExceptionList, keyExceptionLevel, keyToolName}, sdkCommonReads...)

func decodeException(p *propertyReader, ev *Event) {
	x := &Exception{}
	p.session(&x.Session)
	x.ToolName = p.name(keyToolName)
	x.Level = p.name(keyExceptionLevel)
	// Peeked: the list (stack frames, further exceptions) stays in properties.
	if list, ok := arrayItems(p.peek(keyExceptionList)); ok && len(list) > 0 {
		x.Type, _ = stringValue(objectValue(list[0], "type"))
		x.Message, _ = stringValue(objectValue(list[0], "value"))
		x.Type, x.Message = safetext.Bound(x.Type, safetext.MaxName), safetext.Bound(x.Message, safetext.MaxText)
	}
	ev.Exception = x
}

// ExceptionRow is one row of mcpulse.mcp_exceptions.
type ExceptionRow struct {
	UUID             uuid.UUID `ch:"uuid"`
	Timestamp        time.Time `ch:"timestamp"`
	DistinctID       string    `ch:"distinct_id"`
	SessionID        string    `ch:"session_id"`
	ToolName         string    `ch:"tool_name"`
	ExceptionType    string    `ch:"exception_type"`
	ExceptionMessage string    `ch:"exception_message"`
	ExceptionLevel   string    `ch:"exception_level"`
	ErrorClass       string    `ch:"error_class"` // misuse.ClassifyError of the message
	ServerName       string    `ch:"server_name"`
	ServerVersion    string    `ch:"server_version"`
	ClientName       string    `ch:"client_name"`
	ClientVersion    string    `ch:"client_version"`
	ProtocolVersion  string    `ch:"protocol_version"`
	Properties       string    `ch:"properties"` // Event.Extra
	KafkaPartition   int32     `ch:"kafka_partition"`
	KafkaOffset      int64     `ch:"kafka_offset"`
	InsertedAt       time.Time `ch:"inserted_at"`
}

func exceptionRows(rs *Rows, ev *Event, at RowContext) {
	x := ev.Exception
	rs.Exceptions = append(rs.Exceptions, ExceptionRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, DistinctID: ev.DistinctID, SessionID: x.SessionID,
		ToolName: x.ToolName, ExceptionType: x.Type, ExceptionMessage: x.Message, ExceptionLevel: x.Level,
		ErrorClass: string(misuse.ClassifyError(x.Message)), ServerName: x.ServerName, ServerVersion: x.ServerVersion,
		ClientName: x.ClientName, ClientVersion: x.ClientVersion, ProtocolVersion: x.ProtocolVersion,
		Properties: string(ev.Extra), KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
	})
}

// OtherEventRow is one row of mcpulse.other_events: an event of a name no other kind has,
// kept to be counted per name and hour.
type OtherEventRow struct {
	UUID           uuid.UUID `ch:"uuid"`
	Timestamp      time.Time `ch:"timestamp"`
	Event          string    `ch:"event"`
	DistinctID     string    `ch:"distinct_id"`
	KafkaPartition int32     `ch:"kafka_partition"`
	KafkaOffset    int64     `ch:"kafka_offset"`
	InsertedAt     time.Time `ch:"inserted_at"`
}

func otherRows(rs *Rows, ev *Event, at RowContext) {
	rs.OtherEvents = append(rs.OtherEvents, OtherEventRow{
		UUID: ev.UUID, Timestamp: ev.Timestamp, Event: ev.Name, DistinctID: ev.DistinctID,
		KafkaPartition: at.Partition, KafkaOffset: at.Offset, InsertedAt: at.InsertedAt,
	})
}

// objectValue returns the raw value of key in a raw, well-formed JSON object (the last one
// when repeated), or nil when raw is not an object or has no such key.
func objectValue(raw []byte, key string) []byte {
	var v [1][]byte
	objectValues(raw, []string{key}, v[:])
	return v[0]
}

// objectValues sets vals[k] to objectValue(raw, keys[k]) for every k (len(vals) >= len(keys)),
// in one pass over raw.
func objectValues(raw []byte, keys []string, vals [][]byte) {
	if len(raw) == 0 || raw[0] != '{' {
		clear(vals)
		return
	}
	objectMembers(raw, 0, keys, vals)
}

// objectMembers sets vals[k] to the raw value of keys[k] in the well-formed JSON object at
// b[i] (a '{'), the last one when repeated and nil when absent, and returns the offset just
// after the object.
func objectMembers(b []byte, i int, keys []string, vals [][]byte) int {
	clear(vals)
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		keyEnd := skipString(b, i)
		j := skipSpace(b, skipSpace(b, keyEnd)+1)
		end, _ := skipValue(b, j)
		name := unquote(b[i:keyEnd])
		for k, key := range keys {
			if string(name) == key {
				vals[k] = b[j:end]
			}
		}
		if i = skipSpace(b, end); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	return min(i+1, len(b)) // past the '}'
}

// objectText returns a raw JSON object as text, or "" when raw is not an object.
func objectText(raw []byte) string {
	if len(raw) == 0 || raw[0] != '{' {
		return ""
	}
	return string(raw)
}
