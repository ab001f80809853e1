package chdb_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/testkit/chdb"
)

func openCurrent(t *testing.T) driver.Conn {
	t.Helper()
	inst := chdb.ForTest(t)
	if !strings.HasPrefix(inst.Version, "26.") {
		t.Errorf("engine version %s, want the 26.x pinned in testdata/chdb", inst.Version)
	}
	ch, err := stores.OpenClickHouse(context.Background(), inst.DSN)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ch.Close() })
	return ch
}

// The server carries clickhouse-go's batch inserts, bound queries, empty results and errors
// the way clickhouse-server does.
func TestServerSpeaksNativeProtocol(t *testing.T) {
	ch := openCurrent(t)
	ctx := context.Background()
	if err := ch.Exec(ctx, `CREATE TABLE t (id UInt32, s String, at DateTime('UTC'), keys Array(String),
		d Nullable(Float64)) ENGINE = MergeTree ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC)
	d := 2.5
	b, err := ch.PrepareBatch(ctx, "INSERT INTO t (id, s, at, keys, d)")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range [][]any{{uint32(1), "it's \t\n", at, []string{"a.0", "b"}, &d}, {uint32(2), "", at.Add(time.Hour), []string{}, nil}} {
		if err := b.Append(r...); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Send(); err != nil {
		t.Fatal(err)
	}
	var (
		s    string
		got  time.Time
		keys []string
		gotD *float64
	)
	if err := ch.QueryRow(ctx, "SELECT s, at, keys, d FROM t WHERE id = ? AND at >= ?", 1, at).Scan(&s, &got, &keys, &gotD); err != nil {
		t.Fatal(err)
	}
	if s != "it's \t\n" || !got.Equal(at) || !slices.Equal(keys, []string{"a.0", "b"}) || gotD == nil || *gotD != 2.5 {
		t.Errorf("row 1 read back as %q %v %q %v", s, got, keys, gotD)
	}

	rows, err := ch.Query(ctx, "-- nothing matches\nSELECT id, s FROM t WHERE id > ?", 5)
	if err != nil {
		t.Fatal(err)
	}
	if cols := rows.Columns(); !slices.Equal(cols, []string{"id", "s"}) || rows.Next() {
		t.Errorf("empty result: columns %q, want [id s] and no row", cols)
	}
	rows.Close()

	// An empty result whose column has a state prefix (LowCardinality) carries only the header.
	rows, err = ch.Query(ctx, "SELECT toLowCardinality(s) AS l FROM t WHERE id > 5")
	if err != nil {
		t.Fatal(err)
	}
	if rows.Next() || rows.Err() != nil || rows.ColumnTypes()[0].DatabaseTypeName() != "LowCardinality(String)" {
		t.Errorf("empty LowCardinality result: %v, type %s", rows.Err(), rows.ColumnTypes()[0].DatabaseTypeName())
	}
	rows.Close()

	err = ch.Exec(ctx, "SELECT throwIf(1, 'refused on purpose')")
	var ex *clickhouse.Exception
	if !errors.As(err, &ex) || ex.Code != 395 || !strings.Contains(ex.Message, "refused on purpose") {
		t.Errorf("throwIf: %v, want exception code 395 with its message", err)
	}
	if err := ch.Ping(ctx); err != nil {
		t.Errorf("ping after an exception: %v", err)
	}
}
