package migrations_test

import (
	"context"
	"regexp"
	"strings"
	"testing"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// Engines that merge rows of equal sort key: they do so only inside one partition, so a
// partition key that is not a function of the sort key lets two versions of one row live in
// two partitions for ever (and a FINAL query filtered on one of them returns the stale one).
var collapsingEngines = map[string]bool{
	"ReplacingMergeTree": true, "CollapsingMergeTree": true, "VersionedCollapsingMergeTree": true,
	"AggregatingMergeTree": true, "SummingMergeTree": true,
}

// identifier matches a column name in an expression: an identifier not followed by "(" (a
// function name) and not a quoted string.
var identifier = regexp.MustCompile(`'[^']*'|\b[A-Za-z_][A-Za-z0-9_]*\b(\s*\()?`)

// columnsOf returns the column names an expression reads.
func columnsOf(expr string) []string {
	var cols []string
	for _, m := range identifier.FindAllStringSubmatch(expr, -1) {
		if strings.HasPrefix(m[0], "'") || m[1] != "" {
			continue
		}
		cols = append(cols, m[0])
	}
	return cols
}

// sameForEveryCopy are the columns outside a sort key that every copy of one event holds alike,
// so a partition key may read them too: kafka_partition, because the producer's message key
// (distinct_id, or the identity hash) picks the partition, so a redelivered event lands on the
// partition its first copy did (until partitions are added: docs/scaling.md).
var sameForEveryCopy = map[string]bool{"kafka_partition": true}

// After every migration, each table whose engine collapses rows has a partition key made only of
// columns in its sort key (or sameForEveryCopy), so every version of a row lands in the same
// partition.
func TestCollapsingTablesPartitionByTheirSortKey(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := migrations.Up(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	rows, err := ch.Query(ctx, "SELECT name, engine FROM system.tables WHERE database = 'mcpulse' ORDER BY name")
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name, engine string
		if err := rows.Scan(&name, &engine); err != nil {
			t.Fatal(err)
		}
		if collapsingEngines[engine] {
			tables = append(tables, name)
		}
	}
	rows.Close()
	if len(tables) < 5 {
		t.Fatalf("found %d collapsing tables (%v): the query or the schema changed", len(tables), tables)
	}
	for _, table := range tables {
		var create string
		if err := ch.QueryRow(ctx, "SHOW CREATE TABLE mcpulse."+table).Scan(&create); err != nil {
			t.Fatal(err)
		}
		stmts, err := chparser.NewParser(create).ParseStmts()
		if err != nil || len(stmts) != 1 {
			t.Fatalf("%s: parsing %q: %v", table, create, err)
		}
		ct, ok := stmts[0].(*chparser.CreateTable)
		if !ok || ct.Engine == nil {
			t.Fatalf("%s: not a CREATE TABLE with an engine: %s", table, create)
		}
		if ct.Engine.PartitionBy == nil {
			continue
		}
		if ct.Engine.OrderBy == nil {
			t.Errorf("%s: partitioned but has no sort key", table)
			continue
		}
		sortCols := map[string]bool{}
		for _, c := range columnsOf(strings.TrimPrefix(ct.Engine.OrderBy.String(), "ORDER BY")) {
			sortCols[c] = true
		}
		for _, c := range columnsOf(strings.TrimPrefix(ct.Engine.PartitionBy.String(), "PARTITION BY")) {
			if !sortCols[c] && !sameForEveryCopy[c] {
				t.Errorf("%s: partition key %s reads column %s, which is not in the sort key %s",
					table, ct.Engine.PartitionBy.String(), c, ct.Engine.OrderBy.String())
			}
		}
	}
}

func TestColumnsOfSkipsFunctionsAndStrings(t *testing.T) {
	got := strings.Join(columnsOf("toYYYYMM(received_at, 'UTC'), (hour, tool_name)"), ",")
	if got != "received_at,hour,tool_name" {
		t.Errorf("columnsOf = %s", got)
	}
}
