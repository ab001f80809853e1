package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Target is where a mutation (ALTER TABLE ... DELETE) or a partition operation (DROP
// PARTITION) on a table of Database must run, and where its parts and mutations are listed.
// Readers and INSERTs keep naming Database's table whatever the layout; only these
// operations need the table that stores the parts, which on the sharded layout is the local
// table on every host of the cluster, since a Distributed table has neither parts nor
// mutations.
type Target struct {
	// Database and Table name the table that holds the parts: Database and the table's name
	// on one server or an unsharded cluster (a replicated table replicates its mutations
	// itself); on the sharded layout the local database and table the Distributed table
	// reads (LocalDatabase and the same name, as migrate up --sharded creates them).
	Database, Table string
	// Cluster is the Distributed table's cluster (a remote_servers key) on the sharded
	// layout, "" otherwise.
	Cluster string
}

// Name is what an ALTER TABLE statement names to reach the target: "mcpulse.t", or on the
// sharded layout "mcpulse_local.t ON CLUSTER c" (every host of the cluster runs it; a
// replicated table's replicas apply the mutation once).
func (t Target) Name() string {
	if t.Cluster == "" {
		return t.Database + "." + t.Table
	}
	return t.Database + "." + t.Table + " ON CLUSTER " + quoteCluster(t.Cluster)
}

// System is the table function or name that reads system table name (parts, mutations) of
// the hosts holding the target's parts: "system.<name>" on one server or an unsharded
// cluster (the host conn talks to), and "cluster('c', system, <name>)" on the sharded layout
// (one replica of every shard, as a Distributed read chooses). Filter its rows by the
// target's Database and Table.
func (t Target) System(name string) string {
	if t.Cluster == "" {
		return "system." + name
	}
	return fmt.Sprintf("cluster('%s', system, %s)", strings.ReplaceAll(t.Cluster, "'", `\'`), name)
}

// MutationTarget returns where mutations and partition operations on table (its name in
// Database, without the database) run, read from the server conn talks to: when
// Database.table is a Distributed table (the sharded layout, migrate up --cluster NAME
// --sharded), the local table and cluster of its engine arguments; otherwise the table
// itself. So a writer needs no flag to know the layout. Errors: ClickHouse's, wrapped; a
// table missing from Database; a Distributed engine whose arguments do not name a cluster,
// database and table.
func MutationTarget(ctx context.Context, conn driver.Conn, table string) (Target, error) {
	var engine, full string
	err := conn.QueryRow(ctx, "SELECT engine, engine_full FROM system.tables WHERE database = ? AND name = ?", Database, table).Scan(&engine, &full)
	if errors.Is(err, sql.ErrNoRows) {
		return Target{}, fmt.Errorf("where to mutate %s.%s: no such table", Database, table)
	}
	if err != nil {
		return Target{}, fmt.Errorf("where to mutate %s.%s: %w", Database, table, err)
	}
	if engine != "Distributed" {
		return Target{Database: Database, Table: table}, nil
	}
	t, err := distributedTarget(full)
	if err != nil {
		return Target{}, fmt.Errorf("where to mutate %s.%s: %w", Database, table, err)
	}
	return t, nil
}

// distributedTarget reads the cluster, database and table of a Distributed engine's
// definition as system.tables' engine_full shows it: Distributed(cluster, database, table[,
// sharding key]), each of the first three an identifier, a backquoted one or a string literal
// (18.16 shows them as they were written, current releases as string literals). The
// definition is read by the ClickHouse SQL parser, as a table's engine.
func distributedTarget(full string) (Target, error) {
	stmts, err := chparser.NewParser("CREATE TABLE t (x UInt8) ENGINE = " + full).ParseStmts()
	if err != nil || len(stmts) != 1 {
		return Target{}, fmt.Errorf("engine %q does not parse: %v", full, err)
	}
	ct, ok := stmts[0].(*chparser.CreateTable)
	if !ok || ct.Engine == nil || ct.Engine.Name != "Distributed" {
		return Target{}, fmt.Errorf("engine %q is not Distributed(...)", full)
	}
	var args []chparser.Expr
	if p := ct.Engine.Params; p != nil && p.Items != nil {
		args = p.Items.Items
	}
	if len(args) < 3 {
		return Target{}, fmt.Errorf("engine %q: want a cluster, a database and a table", full)
	}
	names := make([]string, 3)
	for i := range names {
		e := args[i]
		if c, ok := e.(*chparser.ColumnExpr); ok {
			e = c.Expr
		}
		switch v := e.(type) {
		case *chparser.Ident:
			names[i] = v.Name
		case *chparser.StringLiteral:
			names[i] = v.Literal
		}
		if names[i] == "" {
			return Target{}, fmt.Errorf("engine %q: argument %d is not a name", full, i+1)
		}
	}
	return Target{Cluster: names[0], Database: names[1], Table: names[2]}, nil
}
