package schemacheck

import (
	"context"
	"errors"
	"fmt"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/consumers/chwrite"
	"github.com/mcpulse/mcpulse/ingest"
)

// A check that lists the server's tools (LoadListing) also feeds the schemas it was served to
// mcpulse.served_tool_schemas (migration 0021), the table the consumer fills from the
// $mcp_tools_list events of servers instrumented with the PostHog MCP analytics SDK and from
// semantic-convention tools/list spans. The consumer judges a tool call whose own listing
// named the tool without its schema (@traceloop/instrumentation-mcp's tools/list span) against
// the server version's stored listing, read from that table: so a server seen only through
// such spans gets its calls' ignored keys measured once a schema check has fetched its tools,
// provided its spans name the server as it names itself (Traceloop takes the trace's
// initialize result's serverInfo; the semantic conventions the resource's service.name and
// service.version).

// ErrNoServerName is StoreServedSchemas' error for a server whose initialize result named it
// nothing (serverInfo.name is required by the MCP specification): its schemas would be stored
// under no server any call names.
var ErrNoServerName = errors.New("the server's initialize result gave no serverInfo name")

// servedSchemas is the served_tool_schemas_in insert (a Null table whose materialized view
// folds rows into served_tool_schemas).
var servedSchemas = func() *chwrite.Table[ingest.ServedSchemaRow] {
	t, err := chwrite.NewTable[ingest.ServedSchemaRow]("mcpulse.served_tool_schemas_in")
	if err != nil {
		panic(err) // ServedSchemaRow's tags are fixed: a failure is a bug
	}
	return t
}()

// StoreServedSchemas inserts the tools of listing, fetched from the server by the check run,
// into mcpulse.served_tool_schemas_in under the server's own serverInfo name and version
// (listing.Server, not the run's configured name), one row per tool as
// ingest.NewServedSchemaRow builds the consumer's (schema_sha256, truncated), seen at the
// run's start (first_seen and last_seen of a schema first served then) with the run's id as
// event_uuid. A tool listed without an inputSchema is stored with an empty one, so that the
// stored listing still names it (a call to it is not taken for a call to an unlisted tool).
// Storing the same run again changes nothing (the table's states fold idempotently). It
// returns the rows stored; the error is ErrNoServerName, ClickHouse's, or a BUG when the run
// id is no UUID.
func StoreServedSchemas(ctx context.Context, ch driver.Conn, run Run, listing Listing) (int, error) {
	if listing.Server.Name == "" {
		return 0, ErrNoServerName
	}
	id, err := uuid.Parse(run.ID)
	if err != nil {
		return 0, fmt.Errorf("BUG: run id %q: %w", run.ID, err)
	}
	rows := make([]ingest.ServedSchemaRow, len(listing.Tools))
	for i, t := range listing.Tools {
		rows[i] = ingest.NewServedSchemaRow(listing.Server.Name, listing.Server.Version,
			ingest.ServedTool{Name: t.Name, Description: t.Description, InputSchema: t.InputSchema}, run.StartedAt, id)
	}
	if err := servedSchemas.Insert(ctx, ch, rows); err != nil {
		return 0, err
	}
	return len(rows), nil
}
