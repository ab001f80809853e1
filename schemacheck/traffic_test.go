package schemacheck_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/misuse"
	"github.com/mcpulse/mcpulse/schemacheck"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// served is one listed tool of one $mcp_tools_list event, as the consumer inserts it.
type served struct {
	server, version, tool, schema, description string
	at                                         time.Time
	event                                      uuid.UUID
}

// insertServed writes rows into served_tool_schemas_in with the column list the consumer uses
// (CONTRACTS.md), in one block, the way a consumer batch would.
func insertServed(t *testing.T, ch driver.Conn, rows ...served) {
	t.Helper()
	ctx := context.Background()
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.served_tool_schemas_in (server_name, server_version, tool_name,
schema_sha256, input_schema, description, truncated, seen_at, event_uuid)`)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		sum := sha256.Sum256([]byte(r.schema))
		truncated := uint8(0)
		if misuse.SchemaTruncated([]byte(r.schema)) {
			truncated = 1
		}
		if err := batch.Append(r.server, r.version, r.tool, hex.EncodeToString(sum[:]), r.schema, r.description, truncated, r.at, r.event); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
}

// TestServedSchemasFromTraffic: snapshots are kept once per content hash with first and last
// seen, replays change nothing, and LoadFromTraffic reads a version's best snapshot per tool
// (the latest version by default) on ClickHouse 18.16.
func TestServedSchemasFromTraffic(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	t0 := time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC)
	a1 := `{"type":"object","properties":{"q":{"type":"string","description":"query"}}}`
	a2 := `{"type":"object","properties":{"q":{"type":"string","description":"the query"}}}`
	cut := `{"type":"object","properties":{"deep":{"type":"object","properties":{"x":"[Object]"}}}}`
	whole := `{"type":"object","properties":{"deep":{"type":"object","properties":{"x":{"type":"string"}}}}}`
	ev := func(i int) uuid.UUID { return uuid.NewSHA1(uuid.NameSpaceOID, []byte{byte(i)}) }
	listing := []served{
		{"posthog", "1.0.0", "a-tool", a1, "first", t0, ev(1)},
		{"posthog", "1.0.0", "b-tool", whole, "b", t0, ev(1)},
		{"posthog", "1.0.0", "a-tool", a1, "renamed", t0.Add(2 * time.Hour), ev(2)},
		// The same version served b-tool cut once (a bigger tools/list event): the whole
		// snapshot stays the better one.
		{"posthog", "1.0.0", "b-tool", cut, "b", t0.Add(3 * time.Hour), ev(3)},
		{"posthog", "1.1.0", "a-tool", a2, "new", t0.Add(24 * time.Hour), ev(4)},
		{"other", "", "a-tool", a1, "", t0, ev(5)},
	}
	insertServed(t, e.ClickHouse, listing...)
	// A replay of the same events (a redelivered batch), in another order and block.
	insertServed(t, e.ClickHouse, listing[3], listing[0], listing[2])

	type row struct {
		server, version, tool string
		truncated             uint8
		first, last           time.Time
		description           string
	}
	rows, err := e.ClickHouse.Query(ctx, `SELECT server_name, server_version, tool_name, truncated, first_seen, last_seen, description
FROM mcpulse.v_served_tool_schemas ORDER BY server_name, server_version, tool_name, truncated`)
	if err != nil {
		t.Fatal(err)
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.server, &r.version, &r.tool, &r.truncated, &r.first, &r.last, &r.description); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	rows.Close()
	want := []row{
		{"other", "", "a-tool", 0, t0, t0, ""},
		{"posthog", "1.0.0", "a-tool", 0, t0, t0.Add(2 * time.Hour), "renamed"},
		{"posthog", "1.0.0", "b-tool", 0, t0, t0, "b"},
		{"posthog", "1.0.0", "b-tool", 1, t0.Add(3 * time.Hour), t0.Add(3 * time.Hour), "b"},
		{"posthog", "1.1.0", "a-tool", 0, t0.Add(24 * time.Hour), t0.Add(24 * time.Hour), "new"},
	}
	if len(got) != len(want) {
		t.Fatalf("%d snapshots, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g := got[i]
		g.first, g.last = g.first.UTC(), g.last.UTC()
		if g != want[i] {
			t.Errorf("snapshot %d = %+v, want %+v", i, g, want[i])
		}
	}

	latest, err := schemacheck.LoadFromTraffic(ctx, e.ClickHouse, schemacheck.TrafficSource{ServerName: "posthog"})
	if err != nil {
		t.Fatal(err)
	}
	if latest.ServerVersion != "1.1.0" || len(latest.Tools) != 1 || string(latest.Tools[0].InputSchema) != a2 || len(latest.Versions) != 2 {
		t.Fatalf("latest = %+v", latest)
	}
	if v := latest.Versions[1]; v.ServerVersion != "1.0.0" || v.Tools != 2 || v.TruncatedTools != 0 || v.SchemaChanges != 1 {
		t.Fatalf("version 1.0.0 = %+v (b-tool has a whole snapshot; its cut one is a change)", v)
	}
	old, err := schemacheck.LoadFromTraffic(ctx, e.ClickHouse, schemacheck.TrafficSource{ServerName: "posthog", ServerVersion: new("1.0.0")})
	if err != nil {
		t.Fatal(err)
	}
	if len(old.Tools) != 2 || old.Tools[0].Name != "a-tool" || old.Tools[1].Name != "b-tool" || string(old.Tools[1].InputSchema) != whole || old.Tools[1].Truncated {
		t.Fatalf("1.0.0 = %+v", old.Tools)
	}
	if !old.FirstSeen.Equal(t0) || !old.LastSeen.Equal(t0.Add(2*time.Hour)) {
		t.Fatalf("1.0.0 seen %s..%s", old.FirstSeen, old.LastSeen)
	}
	if none, err := schemacheck.LoadFromTraffic(ctx, e.ClickHouse, schemacheck.TrafficSource{ServerName: "other", ServerVersion: new("")}); err != nil || len(none.Tools) != 1 {
		t.Fatalf("a server without a version: %+v, %v", none, err)
	}
	for _, src := range []schemacheck.TrafficSource{{ServerName: "nobody"}, {ServerName: "posthog", ServerVersion: new("9.9.9")}} {
		if _, err := schemacheck.LoadFromTraffic(ctx, e.ClickHouse, src); !errors.Is(err, schemacheck.ErrNoTraffic) {
			t.Errorf("%s: err = %v, want ErrNoTraffic", src, err)
		}
	}

	// The check of a cut snapshot: a lower bound, no problems from the SDK's markers.
	insertServed(t, e.ClickHouse, served{"cutonly", "2", "b-tool", cut, "", t0, ev(9)})
	snap, err := schemacheck.LoadFromTraffic(ctx, e.ClickHouse, schemacheck.TrafficSource{ServerName: "cutonly"})
	if err != nil {
		t.Fatal(err)
	}
	r := schemacheck.Check(snap.Tools, schemacheck.Settings{InjectContext: new(false)})
	if tr := r.PerTool[0]; !tr.Truncated || len(tr.Problems) != 0 || tr.SchemaChars != len(cut) || r.TruncatedTools != 1 {
		t.Fatalf("cut snapshot check: %+v", tr)
	}
}
