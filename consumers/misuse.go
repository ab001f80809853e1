package consumers

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// Misuse of tools (package misuse): for each stored tool call that reported no ignored keys,
// derive them from its result or from its arguments against the tool's input schema as the
// call's server name and version served it, classify its error, and tell a call to a tool the
// server version does not list. The schemas come from the $mcp_tools_list events of the batch
// and, for a server version the consumer has not seen yet, from ClickHouse
// (sql/queries/served_tool_schemas_for_server.sql).

// sdkBreadthLimit is how many entries the MCP analytics SDK keeps of an array it captures
// (@posthog/mcp src/extensions/truncation.ts, MAX_BREADTH): a listing read back from
// ClickHouse with that many tools or more may have been cut.
const sdkBreadthLimit = 100

// Bounds of the served-schema cache.
const (
	// maxServedVersions is how many server versions the cache holds; the oldest loaded is
	// dropped first (it is read again from ClickHouse when a call needs it).
	maxServedVersions = 1024
	// servedRecheck is how long a server version with no stored listing is not asked again.
	servedRecheck = time.Minute
)

type servedKey struct{ server, version string }

// servedVersion is what the cache knows of one server version.
type servedVersion struct {
	schemas map[string]*misuse.Schema // compiled input schema by tool name
	hashes  map[string][32]byte       // the SHA-256 each schema was compiled from
	// listed holds every tool name listed, when the whole listing is known ($mcp_listed_tool_names,
	// or a stored listing shorter than the SDK's cut); nil when it is not.
	listed  map[string]bool
	checked time.Time // when ClickHouse was last asked; zero for a listing from the stream
}

// servedSchemas caches served schemas per server version. Safe for concurrent use.
type servedSchemas struct {
	mu      sync.Mutex
	entries map[servedKey]*servedVersion
	order   []servedKey // insertion order, for eviction
}

func (s *servedSchemas) get(k servedKey) *servedVersion {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.entries[k]
}

// put stores v for k, evicting the oldest entry beyond maxServedVersions.
func (s *servedSchemas) put(k servedKey, v *servedVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[servedKey]*servedVersion{}
	}
	if _, ok := s.entries[k]; !ok {
		s.order = append(s.order, k)
		if len(s.order) > maxServedVersions {
			delete(s.entries, s.order[0])
			s.order = s.order[1:]
		}
	}
	s.entries[k] = v
}

// learn adds a tools list event's listing to the cache, compiling only schemas it has not
// compiled before (every session of a server lists the same tools).
func (s *servedSchemas) learn(t *ingest.ToolsList) {
	k := servedKey{t.ServerName, t.ServerVersion}
	prev := s.get(k)
	v := &servedVersion{schemas: map[string]*misuse.Schema{}, hashes: map[string][32]byte{}}
	if prev != nil {
		for name, sc := range prev.schemas {
			v.schemas[name], v.hashes[name] = sc, prev.hashes[name]
		}
		v.listed = prev.listed
	}
	for _, tool := range t.Tools {
		sum := sha256.Sum256(tool.InputSchema)
		if have, ok := v.hashes[tool.Name]; ok && have == sum {
			continue
		}
		v.schemas[tool.Name], _ = misuse.CompileSchema(tool.InputSchema) // never nil; a failure derives not_measurable
		v.hashes[tool.Name] = sum
	}
	if len(t.ListedToolNames) > 0 {
		v.listed = map[string]bool{}
		for _, name := range t.ListedToolNames {
			v.listed[name] = true
		}
	}
	s.put(k, v)
}

// load reads a server version's stored listing from ClickHouse into the cache.
func (s *servedSchemas) load(ctx context.Context, conn driver.Conn, k servedKey, now time.Time) error {
	rows, err := conn.Query(ctx, mcsql.Query("served_tool_schemas_for_server"), k.server, k.version)
	if err != nil {
		return fmt.Errorf("served schemas of %q %q: %w", k.server, k.version, err)
	}
	defer rows.Close()
	v := &servedVersion{schemas: map[string]*misuse.Schema{}, hashes: map[string][32]byte{}, listed: map[string]bool{}, checked: now}
	for rows.Next() {
		var (
			tool, sha, schema, description string
			truncated                      uint8
			first, last                    time.Time
		)
		if err := rows.Scan(&tool, &sha, &schema, &description, &truncated, &first, &last); err != nil {
			return fmt.Errorf("served schemas of %q %q: %w", k.server, k.version, err)
		}
		v.schemas[tool], _ = misuse.CompileSchema([]byte(schema))
		v.hashes[tool] = sha256.Sum256([]byte(schema))
		v.listed[tool] = true
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("served schemas of %q %q: %w", k.server, k.version, err)
	}
	if len(v.listed) == 0 || len(v.listed) >= sdkBreadthLimit {
		v.listed = nil // unknown, or maybe cut by the SDK
	}
	s.put(k, v)
	return nil
}

// deriveMisuse fills the misuse columns of the batch's tool-call rows (ignored keys and their
// source, the not-measurable reason, unknown_tool), and the properties of a call it finds
// misused (ingest.ToolCallProperties). events are the batch's stored events, rows their rows;
// the rows are modified in place.
func (c *Consumer) deriveMisuse(ctx context.Context, events []*ingest.Event, rows []ingest.ToolCallRow) error {
	calls := make(map[uuid.UUID]*ingest.Event, len(rows))
	for _, ev := range events {
		switch {
		case ev.ToolsList != nil:
			c.served.learn(ev.ToolsList)
		case ev.ToolCall != nil:
			calls[ev.UUID] = ev
		}
	}
	now := c.now()
	for i := range rows {
		k := servedKey{rows[i].ServerName, rows[i].ServerVersion}
		if !judgedByListing(&rows[i]) || calls[rows[i].UUID] == nil {
			continue // no listing to look for
		}
		if v := c.served.get(k); v == nil || (!v.checked.IsZero() && len(v.schemas) == 0 && now.Sub(v.checked) > servedRecheck) {
			if err := c.served.load(ctx, c.cfg.ClickHouse, k, now); err != nil {
				return err
			}
		}
	}
	for i := range rows {
		r := &rows[i]
		ev := calls[r.UUID]
		if ev == nil {
			continue
		}
		call := ev.ToolCall
		misused := r.Misused() // as the row builder saw it
		var v *servedVersion
		if judgedByListing(r) {
			v = c.served.get(servedKey{r.ServerName, r.ServerVersion})
		}
		if v != nil && v.listed != nil && !v.listed[r.RawToolName] {
			r.UnknownTool = 1
		}
		if !call.IgnoredKeysReported { // a reported call's row holds its keys already
			var schema *misuse.Schema
			if v != nil {
				schema = v.schemas[r.RawToolName]
			}
			k := misuse.Derive(misuse.Call{Response: call.Response, Parameters: call.Parameters, Schema: schema, Valid: true}) // Parse checked them
			r.IgnoredKeys, r.IgnoredKeysTotal = nonNilKeys(k.Keys), uint32(min(k.Total, 1<<32-1))
			r.CountedIgnoredKeys = nonNilKeys(c.keys.Counted(k.Keys))
			r.IgnoredKeysSource, r.IgnoredKeysReason = string(k.Source), string(k.Reason)
		}
		if !misused && r.Misused() { // (a reported call's parameters were let go in prepare: none kept)
			r.Properties = ingest.ToolCallProperties(ev, r)
		}
	}
	return nil
}

// judgedByListing reports whether a tool call is judged against the listings of its server
// name and version: when it names its server, or when it came from the MCP analytics SDK
// (ingest.SDKSource), whose custom-dispatcher API (PostHogMCP) sends no server name or version
// on calls and listings alike, so that its calls meet its listings under the empty name. A
// call from anywhere else without a server name has no listing to be judged against.
func judgedByListing(r *ingest.ToolCallRow) bool {
	return r.ServerName != "" || r.Source == ingest.SDKSource
}

func nonNilKeys(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
