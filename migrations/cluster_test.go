package migrations_test

import (
	"regexp"
	"strings"
	"testing"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"

	"github.com/mcpulse/mcpulse/migrations"
)

// allStatements returns the bootstrap and every migration's statements for cluster.
func allStatements(t *testing.T, cluster string) []string {
	t.Helper()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	out, err := migrations.BootstrapForCluster(cluster)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		sts, err := m.ForCluster(cluster)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, sts...)
	}
	return out
}

func TestPlainStatementsAreTheFilesUnchanged(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		sts, err := m.ForCluster("")
		if err != nil {
			t.Fatal(err)
		}
		for i := range sts {
			if sts[i] != m.Statements[i] {
				t.Errorf("%04d statement %d changed without a cluster:\n%s\nwant\n%s", m.Version, i+1, sts[i], m.Statements[i])
			}
		}
	}
	boot, err := migrations.BootstrapForCluster("")
	if err != nil {
		t.Fatal(err)
	}
	for i := range boot {
		if boot[i] != migrations.Bootstrap[i] {
			t.Errorf("bootstrap statement %d changed without a cluster", i+1)
		}
	}
}

var (
	createRE  = regexp.MustCompile(`(?is)^\s*(CREATE\s+(?:DATABASE|TABLE|MATERIALIZED\s+VIEW|VIEW)|ALTER\s+TABLE|DROP\s+TABLE)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?(\S+)`)
	insertRE  = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s`)
	renameRE  = regexp.MustCompile(`(?is)^\s*RENAME\s+TABLE\s`)
	mergeTree = regexp.MustCompile(`\b(\w*)MergeTree\(([^()]*)\)`)
)

// Every statement of every migration runs on every host, every table is replicated under the
// shard and replica macros, its own engine arguments kept, and nothing else changes.
func TestClusterStatementsRunOnClusterWithReplicatedEngines(t *testing.T) {
	plain, cluster := allStatements(t, ""), allStatements(t, "prod")
	if len(plain) != len(cluster) {
		t.Fatalf("%d plain statements, %d cluster ones", len(plain), len(cluster))
	}
	tables := 0
	for i := range plain {
		p, c := plain[i], cluster[i]
		switch {
		case insertRE.MatchString(p): // runs on the migrating host; replication copies the rows
			if c != p {
				t.Errorf("INSERT changed for the cluster:\n%s", c)
			}
			continue
		case renameRE.MatchString(p): // ON CLUSTER follows the last pair
			if c != p+" ON CLUSTER prod" {
				t.Errorf("RENAME for the cluster is\n%s\nwant the plain statement and ON CLUSTER prod", c)
			}
			continue
		}
		m := createRE.FindStringSubmatch(p)
		if m == nil {
			t.Errorf("statement kind not covered by this test:\n%s", p)
			continue
		}
		head := m[0]
		if !strings.HasPrefix(c, head+" ON CLUSTER prod") {
			t.Errorf("cluster statement does not start %q:\n%s", head+" ON CLUSTER prod", c)
			continue
		}
		rest := strings.TrimPrefix(c, head+" ON CLUSTER prod")
		pe, ce := mergeTree.FindStringSubmatch(p), mergeTree.FindStringSubmatch(rest)
		if pe == nil {
			if rest != strings.TrimPrefix(p, head) {
				t.Errorf("non-table statement changed beyond ON CLUSTER:\n%s\nfrom\n%s", c, p)
			}
			continue
		}
		tables++
		name := strings.SplitN(m[2], ".", 2)
		wantArgs := "'/clickhouse/tables/{shard}/" + name[0] + "/" + name[1] + "', '{replica}'"
		if m[2] == "mcpulse.schema_migrations" { // one table on every host of every shard
			wantArgs = "'/clickhouse/tables/all/mcpulse/schema_migrations', '{shard}-{replica}'"
		}
		if pe[2] != "" {
			wantArgs += ", " + pe[2]
		}
		if ce == nil || ce[1] != "Replicated"+pe[1] || ce[2] != wantArgs {
			t.Errorf("%s: engine %v, want Replicated%sMergeTree(%s)", m[2], ce, pe[1], wantArgs)
			continue
		}
		if strings.Replace(rest, ce[0], pe[0], 1) != strings.TrimPrefix(p, head) {
			t.Errorf("%s changed beyond ON CLUSTER and the engine:\n%s", m[2], c)
		}
	}
	if tables < 14 { // 13 in the migrations and schema_migrations
		t.Errorf("%d replicated tables, want at least 14", tables)
	}
}

// The emitted SQL parses as ClickHouse SQL (AfterShip's parser), and the parsed statements
// carry the cluster and replicated engines.
func TestClusterStatementsParse(t *testing.T) {
	for _, cluster := range []string{"prod", "eu-west_1"} {
		for _, st := range allStatements(t, cluster) {
			stmts, err := chparser.NewParser(st).ParseStmts()
			if err != nil {
				t.Errorf("cluster %s: %v\n%s", cluster, err, st)
				continue
			}
			if len(stmts) != 1 {
				t.Errorf("parsed %d statements, want 1:\n%s", len(stmts), st)
				continue
			}
			out := stmts[0].String()
			// An INSERT runs on the host that migrates; replication copies its rows.
			if _, isInsert := stmts[0].(*chparser.InsertStmt); !isInsert && !strings.Contains(out, "ON CLUSTER") {
				t.Errorf("parsed statement lost ON CLUSTER: %s", out)
			}
			if strings.Contains(st, "MergeTree(") && !strings.Contains(out, "Replicated") {
				t.Errorf("parsed table is not replicated: %s", out)
			}
		}
	}
}

func TestClusterStatementRefusesWhatItCannotRewrite(t *testing.T) {
	for _, tc := range []struct{ name, stmt, cluster string }{
		{"bad cluster name", "CREATE DATABASE IF NOT EXISTS mcpulse", "prod; DROP TABLE x"},
		{"cluster name with a quote", "CREATE DATABASE IF NOT EXISTS mcpulse", "a`b"},
		{"unknown statement", "SYSTEM RELOAD DICTIONARIES", "prod"},
		{"table without database", "CREATE TABLE t (a UInt8) ENGINE = MergeTree() ORDER BY a", "prod"},
		{"statement that does not parse", "CREATE TABLE d.t (a UInt8 ENGINE = MergeTree ORDER BY a", "prod"},
		{"two statements", "CREATE DATABASE a; CREATE DATABASE b", "prod"},
		{"log engine", "CREATE TABLE d.t (a UInt8) ENGINE = Log", "prod"},
		{"already on cluster", "CREATE VIEW d.v ON CLUSTER other AS SELECT 1", "prod"},
		{"materialized view with an inner table", "CREATE MATERIALIZED VIEW d.v ENGINE = MergeTree() ORDER BY a AS SELECT 1 AS a", "prod"},
	} {
		if got, err := migrations.ClusterStatement(tc.stmt, tc.cluster); err == nil {
			t.Errorf("%s: ClusterStatement = %q, want an error", tc.name, got)
		}
	}
	got, err := migrations.ClusterStatement("CREATE TABLE IF NOT EXISTS d.in (a UInt8) ENGINE = Null", "prod")
	if want := "CREATE TABLE IF NOT EXISTS d.in ON CLUSTER prod (a UInt8) ENGINE = Null"; err != nil || got != want {
		t.Errorf("Null table: %q, %v; want %q (nothing to replicate)", got, err, want)
	}
	// The parser finds the engine's arguments, nested parentheses included, and backquoted
	// names; the statement's own text is kept around them.
	got, err = migrations.ClusterStatement("CREATE TABLE IF NOT EXISTS `d`.`t`\n(a UInt8)\nENGINE = SummingMergeTree((a))\nORDER BY a", "prod")
	if want := "CREATE TABLE IF NOT EXISTS `d`.`t` ON CLUSTER prod\n(a UInt8)\nENGINE = ReplicatedSummingMergeTree('/clickhouse/tables/{shard}/d/t', '{replica}', (a))\nORDER BY a"; err != nil || got != want {
		t.Errorf("nested engine arguments, backquoted name:\n got %q, %v\nwant %q", got, err, want)
	}
	got, err = migrations.ClusterStatement("INSERT INTO d.t SELECT 1", "prod")
	if err != nil || got != "INSERT INTO d.t SELECT 1" {
		t.Errorf("INSERT: %q, %v; want it unchanged", got, err)
	}
	got, err = migrations.ClusterStatement("CREATE TABLE IF NOT EXISTS d.t (a UInt8) ENGINE = MergeTree ORDER BY a", "eu-1")
	want := "CREATE TABLE IF NOT EXISTS d.t ON CLUSTER `eu-1` (a UInt8) ENGINE = MergeTree ORDER BY a"
	want = strings.Replace(want, "MergeTree", "ReplicatedMergeTree('/clickhouse/tables/{shard}/d/t', '{replica}')", 1)
	if err != nil || got != want {
		t.Errorf("MergeTree without parentheses, hyphenated cluster:\n got %q, %v\nwant %q", got, err, want)
	}
}
