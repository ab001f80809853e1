package consumers

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// Misuse of tools (package misuse): for each stored tool call that reported no ignored keys,
// derive them from its result or from its arguments against the tool's input schema as the
// call's own session was served it last before the call, classify its error, and tell a call
// to a tool that listing lacks. The consumer feeds the batch's $mcp_tools_list events to its
// listing state (misuse.Listings) in event-time order and asks it to judge each call; for a
// server version the state knows no listing of, or whose listing names a called tool without
// its schema, the stored listing is read from ClickHouse
// (sql/queries/served_tool_schemas_for_server.sql), once per version per batch at most. A
// call's derivation from its arguments is looked up by (its schema's hash, the arguments'
// shape) first (misuse.DeriveCache): calls of one tool repeat a few shapes.

// listingPage is a tools list event as the listing state takes it; pos is its place in the log.
func listingPage(ev *ingest.Event, pos misuse.Position) misuse.ListingPage {
	t := ev.ToolsList
	p := misuse.ListingPage{
		Server: t.ServerName, Version: t.ServerVersion, Session: t.SessionID, At: ev.Timestamp, Pos: pos,
		Cursor: t.Cursor, HasCursor: t.HasCursor, NextCursor: t.NextCursor, Names: t.ListedToolNames,
		Tools: make([]misuse.ServedTool, len(t.Tools)),
	}
	for i, tool := range t.Tools {
		p.Tools[i] = misuse.ServedTool{Name: tool.Name, InputSchema: tool.InputSchema}
	}
	return p
}

// loadStored reads a server version's stored listing from ClickHouse into the listing state.
func (c *Consumer) loadStored(ctx context.Context, conn driver.Conn, server, version string, now time.Time) error {
	rows, err := conn.Query(ctx, mcsql.Query("served_tool_schemas_for_server"), server, version)
	if err != nil {
		return fmt.Errorf("served schemas of %q %q: %w", server, version, err)
	}
	defer rows.Close()
	var tools []misuse.ServedTool
	for rows.Next() {
		var (
			tool, sha, schema, description string
			truncated                      uint8
			first, last                    time.Time
		)
		if err := rows.Scan(&tool, &sha, &schema, &description, &truncated, &first, &last); err != nil {
			return fmt.Errorf("served schemas of %q %q: %w", server, version, err)
		}
		tools = append(tools, misuse.ServedTool{Name: tool, InputSchema: []byte(schema)})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("served schemas of %q %q: %w", server, version, err)
	}
	c.listings.PutStored(server, version, tools, now)
	return nil
}

// deriveMisuse fills the misuse columns of the batch's tool-call rows (ignored keys and their
// source, the not-measurable reason, unknown_tool), and the properties of a call it finds
// misused (ingest.ToolCallProperties). events are the batch's stored tool calls and tool
// listings, positions their places in the log (one each), rows the tool-call rows; the rows
// are modified in place.
func (c *Consumer) deriveMisuse(ctx context.Context, events []*ingest.Event, positions []misuse.Position, rows []ingest.ToolCallRow) error {
	calls := make(map[uuid.UUID]*ingest.Event, len(rows))
	var lists []int
	for i, ev := range events {
		switch {
		case ev.ToolsList != nil:
			lists = append(lists, i)
		case ev.ToolCall != nil:
			calls[ev.UUID] = ev
		}
	}
	// In event time (a listing's pages in the order they were served), then log order.
	slices.SortStableFunc(lists, func(a, b int) int { return events[a].Timestamp.Compare(events[b].Timestamp) })
	for _, i := range lists {
		c.listings.Observe(listingPage(events[i], positions[i]))
	}
	c.lookupVerdicts(ctx) // of the schemas the listings brought
	verdicts := make([]misuse.Verdict, len(rows))
	at := func(r *ingest.ToolCallRow, ev *ingest.Event) misuse.CallAt {
		return misuse.CallAt{Server: r.ServerName, Version: r.ServerVersion, Session: ev.ToolCall.SessionID, At: ev.Timestamp,
			Pos: misuse.Position{Partition: r.KafkaPartition, Offset: r.KafkaOffset}}
	}
	// Calls the stream gives no schema for (no listing of their version, or one that names the
	// tool without its schema): their versions' stored listings, read at most once per batch.
	type versionKey struct{ server, version string }
	asked, read := map[versionKey]bool{}, map[versionKey]bool{}
	now := c.now()
	for i := range rows {
		r := &rows[i]
		ev := calls[r.UUID]
		if ev == nil || !judgedByListing(r) {
			continue // no listing to look for
		}
		v, err := c.listings.JudgeContext(ctx, at(r, ev), r.RawToolName)
		if err != nil {
			return err // shutting down: the batch is not committed
		}
		verdicts[i] = v
		k := versionKey{r.ServerName, r.ServerVersion}
		if !wantsStored(verdicts[i]) || asked[k] {
			continue
		}
		asked[k] = true
		if c.listings.NeedsStored(k.server, k.version, now) {
			if err := c.loadStored(ctx, c.cfg.ClickHouse, k.server, k.version, now); err != nil {
				return err
			}
			read[k] = true
		}
	}
	if len(read) > 0 {
		c.lookupVerdicts(ctx) // of the schemas the stored listings brought
	}
	for i := range rows {
		r := &rows[i]
		ev := calls[r.UUID]
		if ev == nil {
			continue
		}
		if judgedByListing(r) && wantsStored(verdicts[i]) && read[versionKey{r.ServerName, r.ServerVersion}] {
			v, err := c.listings.JudgeContext(ctx, at(r, ev), r.RawToolName)
			if err != nil {
				return err
			}
			verdicts[i] = v
		}
		v := verdicts[i]
		call := ev.ToolCall
		misused := r.Misused() // as the row builder saw it
		if v.Unknown {
			r.UnknownTool = 1
		}
		if !call.IgnoredKeysReported { // a reported call's row holds its keys already
			k := c.derive(misuse.Call{Response: call.Response, Parameters: call.Parameters, Schema: v.Schema, Valid: true}) // Parse checked them
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

// derive is misuse.Derive through the consumer's derivation cache (misuse.DeriveCache), which
// gives the same outcome; a Consumer built without one derives every call.
func (c *Consumer) derive(call misuse.Call) misuse.IgnoredKeys {
	if c.derivations == nil {
		return misuse.Derive(call)
	}
	return c.derivations.Derive(call)
}

// wantsStored reports whether a call's verdict may change once its version's stored listing is
// read: no listing judged it, or the listing that did names the tool without a schema (as
// @traceloop/instrumentation-mcp's tools/list span does), and the stored listing may hold the
// schema (the same server's PostHog events, or the scheduled schema check's fetch).
func wantsStored(v misuse.Verdict) bool {
	return v.Schema == nil && !v.Unknown
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
