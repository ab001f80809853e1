package schemacheck

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/sql"
)

// Checking the schemas a server serves without reaching it: every $mcp_tools_list event the
// PostHog MCP analytics SDK sends carries each tool's inputSchema as served (after the SDK
// injected its `context` parameter), and the consumer keeps each distinct one per server name
// and version in ClickHouse (table served_tool_schemas, migration 0021). LoadFromTraffic reads
// one version's tools back, so the ratchets hold for servers mcpulse has no credentials or
// network path for.

// ErrNoTraffic means no tools/list of the server (and version) has been seen in traffic.
var ErrNoTraffic = errors.New("no tools/list seen in traffic")

// TrafficSource names the server whose snapshots are checked.
type TrafficSource struct {
	// ServerName is the server's name as the SDK reports it ($mcp_server_name, the name the
	// server gives in initialize).
	ServerName string
	// ServerVersion is the version to check ($mcp_server_version; "" is a server that reports
	// none); nil means the version seen most recently.
	ServerVersion *string
}

// String describes the source for messages.
func (s TrafficSource) String() string {
	if s.ServerVersion == nil {
		return fmt.Sprintf("traffic of %q (latest version)", s.ServerName)
	}
	return fmt.Sprintf("traffic of %q version %q", s.ServerName, *s.ServerVersion)
}

// Snapshot is one server version's tools as seen in traffic.
type Snapshot struct {
	ServerName    string
	ServerVersion string
	// Tools are the tools with their best snapshot each (one the SDK left whole before one it
	// cut, then the most recent), sorted by name; Tool.Truncated marks the cut ones.
	Tools []Tool
	// FirstSeen and LastSeen bound when any of these snapshots was seen (UTC).
	FirstSeen, LastSeen time.Time
	// Versions are every version of the server seen in traffic, most recently seen first.
	Versions []TrafficVersion
}

// TrafficVersion is one server version seen in traffic (query served_tool_schema_versions).
type TrafficVersion struct {
	ServerVersion  string    `json:"server_version"`
	Tools          int       `json:"tools"`
	TruncatedTools int       `json:"truncated_tools"`
	SchemaChanges  int       `json:"schema_changes"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
}

// LoadFromTraffic reads a server version's tools from the snapshots seen in traffic
// (sql/queries/served_tool_schemas_for_server.sql, after served_tool_schema_versions.sql
// lists the versions). It fails with ErrNoTraffic when none was seen, and wraps ClickHouse
// errors otherwise.
func LoadFromTraffic(ctx context.Context, ch driver.Conn, src TrafficSource) (Snapshot, error) {
	if src.ServerName == "" {
		return Snapshot{}, errors.New("schemacheck: traffic source without a server name")
	}
	snap := Snapshot{ServerName: src.ServerName}
	versions, err := trafficVersions(ctx, ch, src.ServerName)
	if err != nil {
		return snap, err
	}
	snap.Versions = versions
	switch {
	case src.ServerVersion != nil:
		snap.ServerVersion = *src.ServerVersion
	case len(versions) > 0:
		snap.ServerVersion = versions[0].ServerVersion
	}
	rows, err := ch.Query(ctx, sql.Query("served_tool_schemas_for_server"), src.ServerName, snap.ServerVersion)
	if err != nil {
		return snap, fmt.Errorf("schemacheck: reading the schemas seen in traffic: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			name, sha, schema, description string
			truncated                      uint8
			first, last                    time.Time
		)
		if err := rows.Scan(&name, &sha, &schema, &description, &truncated, &first, &last); err != nil {
			return snap, fmt.Errorf("schemacheck: reading the schemas seen in traffic: %w", err)
		}
		snap.Tools = append(snap.Tools, Tool{Name: name, InputSchema: []byte(schema), Description: description, Truncated: truncated != 0})
		if snap.FirstSeen.IsZero() || first.Before(snap.FirstSeen) {
			snap.FirstSeen = first.UTC()
		}
		if last.After(snap.LastSeen) {
			snap.LastSeen = last.UTC()
		}
	}
	if err := rows.Err(); err != nil {
		return snap, fmt.Errorf("schemacheck: reading the schemas seen in traffic: %w", err)
	}
	if len(snap.Tools) == 0 {
		if src.ServerVersion != nil {
			return snap, fmt.Errorf("schemacheck: %s: %w (versions seen: %s)", src, ErrNoTraffic, versionList(versions))
		}
		return snap, fmt.Errorf("schemacheck: %s: %w: is the server instrumented with the PostHog MCP SDK, pointed at mcpulse, and named %q in its initialize response?", src, ErrNoTraffic, src.ServerName)
	}
	return snap, nil
}

// trafficVersions lists a server's versions seen in traffic, most recent first.
func trafficVersions(ctx context.Context, ch driver.Conn, server string) ([]TrafficVersion, error) {
	rows, err := ch.Query(ctx, sql.Query("served_tool_schema_versions"), server)
	if err != nil {
		return nil, fmt.Errorf("schemacheck: listing the versions seen in traffic: %w", err)
	}
	defer rows.Close()
	var out []TrafficVersion
	for rows.Next() {
		var (
			v                        TrafficVersion
			tools, truncated, change uint64
		)
		if err := rows.Scan(&v.ServerVersion, &tools, &truncated, &change, &v.FirstSeen, &v.LastSeen); err != nil {
			return nil, fmt.Errorf("schemacheck: listing the versions seen in traffic: %w", err)
		}
		v.Tools, v.TruncatedTools, v.SchemaChanges = int(tools), int(truncated), int(change)
		v.FirstSeen, v.LastSeen = v.FirstSeen.UTC(), v.LastSeen.UTC()
		out = append(out, v)
	}
	return out, rows.Err()
}

func versionList(vs []TrafficVersion) string {
	if len(vs) == 0 {
		return "none"
	}
	var out []string
	for i, v := range vs {
		if i == 10 {
			out = append(out, fmt.Sprintf("and %d more", len(vs)-10))
			break
		}
		out = append(out, fmt.Sprintf("%q", v.ServerVersion))
	}
	return strings.Join(out, ", ")
}
