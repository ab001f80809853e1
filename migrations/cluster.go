package migrations

import (
	"fmt"
	"regexp"
	"strings"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"
)

// The cluster variant of the schema (docs/scaling.md): the same migration files, each
// statement rewritten by ClusterStatement to run ON CLUSTER on every host, with every
// *MergeTree table replicated through ClickHouse Keeper (or ZooKeeper) under the {shard} and
// {replica} macros each host defines in its configuration
// (https://clickhouse.com/docs/engines/table-engines/mergetree-family/replication).

// ReplicaPath is the Keeper path of a replicated table's replicas; {shard} is the host's
// shard macro, so the replicas of one shard share a path. The database and table are written
// out (not the {database}/{table} macros) so a table renamed later keeps its path.
const ReplicaPath = "/clickhouse/tables/{shard}/%s/%s"

// ReplicaName is the replica name argument of every replicated table: the host's {replica}
// macro.
const ReplicaName = "{replica}"

// ClusterWidePath is the Keeper path of a table replicated on every host of every shard
// (schema_migrations): without {shard}, all hosts are replicas of one table, so what one host
// records every host reads.
const ClusterWidePath = "/clickhouse/tables/all/%s/%s"

// ClusterWideReplicaName is the replica name of a ClusterWidePath table. Replica names must
// differ among a table's replicas, and a {replica} macro need only differ within a shard
// (many clusters name the replicas of every shard alike), so the shard is part of the name.
const ClusterWideReplicaName = "{shard}-{replica}"

var (
	clusterNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
	// renameRE matches RENAME TABLE (renameDone reads its pairs).
	renameRE = regexp.MustCompile(`(?is)^\s*RENAME\s+TABLE\s`)
)

// ValidClusterName reports whether name can be used as the cluster name of ON CLUSTER: a
// letter or underscore, then letters, digits, underscores and hyphens (as in a
// remote_servers key).
func ValidClusterName(name string) error {
	if !clusterNameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q: want a letter or _ followed by letters, digits, _ or -", name)
	}
	return nil
}

// quoteCluster writes the cluster name as ClickHouse reads it: bare when it is a plain
// identifier, backquoted when it holds a hyphen.
func quoteCluster(name string) string {
	if strings.Contains(name, "-") {
		return "`" + name + "`"
	}
	return name
}

// ClusterStatement rewrites one migration statement for cluster (validated first):
//
//   - CREATE DATABASE/TABLE/VIEW/MATERIALIZED VIEW, ALTER TABLE, DROP, TRUNCATE and OPTIMIZE
//     get ON CLUSTER cluster after the object's name (a TO view keeps its TO target);
//     RENAME TABLE gets it after its last pair;
//   - a table's XMergeTree(args) engine becomes ReplicatedXMergeTree(ReplicaPath,
//     ReplicaName, args); a Null table (it stores nothing) keeps its engine;
//   - INSERT statements are kept as they are (replication copies their rows).
//
// The statement is parsed with the ClickHouse SQL parser (AfterShip clickhouse-sql-parser),
// which finds the name and the engine; the clauses are spliced into the statement's own text
// there, so everything else stays as written (the parser's printer would reformat it, and
// changes some statements: docs/DESIGN.md §8).
//
// Any other statement, one that does not parse, or one already ON CLUSTER is an error, so a
// migration of a new kind cannot silently skip hosts. With cluster "", stmt is returned
// unchanged.
func ClusterStatement(stmt, cluster string) (string, error) {
	return clusterStatement(stmt, cluster, ReplicaPath, ReplicaName)
}

// clusterStatement is ClusterStatement with the replicated engine's path format (database and
// table) and replica name as given.
func clusterStatement(stmt, cluster, pathFormat, replicaName string) (string, error) {
	if cluster == "" {
		return stmt, nil
	}
	if err := ValidClusterName(cluster); err != nil {
		return "", err
	}
	stmts, err := chparser.NewParser(stmt).ParseStmts()
	if err != nil {
		return "", fmt.Errorf("statement %q does not parse: %w", firstLine(stmt), err)
	}
	if len(stmts) != 1 {
		return "", fmt.Errorf("want one statement, parsed %d: %q", len(stmts), firstLine(stmt))
	}
	onCluster := " ON CLUSTER " + quoteCluster(cluster)
	// at inserts ON CLUSTER after the name ending at end (the parser's end of a backquoted
	// name stops before its closing backquote).
	at := func(end chparser.Pos, already *chparser.ClusterClause) (string, error) {
		if already != nil {
			return "", fmt.Errorf("statement already has ON CLUSTER: %q", firstLine(stmt))
		}
		i := int(end)
		if i < len(stmt) && stmt[i] == '`' {
			i++
		}
		return stmt[:i] + onCluster + stmt[i:], nil
	}
	switch n := stmts[0].(type) {
	case *chparser.InsertStmt:
		return stmt, nil
	case *chparser.RenameStmt:
		if n.OnCluster != nil {
			return "", fmt.Errorf("statement already has ON CLUSTER: %q", firstLine(stmt))
		}
		return strings.TrimRight(stmt, " \t\n;") + onCluster, nil
	case *chparser.CreateDatabase:
		return at(n.Name.End(), n.OnCluster)
	case *chparser.CreateView:
		return at(n.Name.End(), n.OnCluster)
	case *chparser.CreateMaterializedView:
		if n.Engine != nil || n.Destination == nil {
			return "", fmt.Errorf("materialized view %s: give it a TO table, whose engine is replicated; an inner table's is not", n.Name.String())
		}
		return at(n.Name.End(), n.OnCluster)
	case *chparser.AlterTable:
		return at(n.TableIdentifier.End(), n.OnCluster)
	case *chparser.DropStmt:
		return at(n.Name.End(), n.OnCluster)
	case *chparser.TruncateTable:
		return at(n.Name.End(), n.OnCluster)
	case *chparser.OptimizeStmt:
		return at(n.Table.End(), n.OnCluster)
	case *chparser.CreateTable:
		return clusterTable(stmt, n, onCluster, pathFormat, replicaName)
	}
	return "", fmt.Errorf("no cluster form for statement %q", firstLine(stmt))
}

// replicable are the MergeTree engines that have a Replicated form, by lower-case name.
var replicable = map[string]bool{}

func init() {
	for _, f := range []string{"", "Replacing", "Aggregating", "Summing", "Collapsing", "VersionedCollapsing", "Graphite"} {
		replicable[strings.ToLower(f+"MergeTree")] = true
	}
}

// clusterTable is clusterStatement for CREATE TABLE t: ON CLUSTER after the name and the
// engine replicated, its arguments kept as written after the replication path and replica.
func clusterTable(stmt string, t *chparser.CreateTable, onCluster, pathFormat, replicaName string) (string, error) {
	name := t.Name.String()
	if t.OnCluster != nil {
		return "", fmt.Errorf("statement already has ON CLUSTER: %q", firstLine(stmt))
	}
	if t.Engine == nil {
		return "", fmt.Errorf("table %s: want a MergeTree-family or Null engine, found none", name)
	}
	nameEnd := int(t.Name.End())
	if nameEnd < len(stmt) && stmt[nameEnd] == '`' {
		nameEnd++
	}
	if strings.EqualFold(t.Engine.Name, "Null") {
		return stmt[:nameEnd] + onCluster + stmt[nameEnd:], nil
	}
	if !replicable[strings.ToLower(t.Engine.Name)] {
		return "", fmt.Errorf("table %s: engine %s has no replicated form; want a MergeTree-family or Null engine", name, t.Engine.Name)
	}
	if t.Name.Database == nil {
		return "", fmt.Errorf("table %s: want a database-qualified name", name)
	}
	// The engine's name follows ENGINE and "="; its arguments run to the closing parenthesis.
	from := int(t.Engine.EnginePos) + len("ENGINE")
	for from < len(stmt) && (stmt[from] == ' ' || stmt[from] == '\t' || stmt[from] == '\n' || stmt[from] == '\r' || stmt[from] == '=') {
		from++
	}
	to := from + len(t.Engine.Name)
	if to > len(stmt) || !strings.EqualFold(stmt[from:to], t.Engine.Name) || from <= nameEnd {
		return "", fmt.Errorf("BUG: table %s: the parser's engine position does not hold %s", name, t.Engine.Name)
	}
	args := []string{"'" + fmt.Sprintf(pathFormat, unquote(t.Name.Database.Name), unquote(t.Name.Table.Name)) + "'", "'" + replicaName + "'"}
	if p := t.Engine.Params; p != nil {
		if a := strings.TrimSpace(stmt[p.LeftParenPos+1 : p.RightParenPos]); a != "" {
			args = append(args, a)
		}
		to = int(p.RightParenPos) + 1
	}
	engine := "Replicated" + t.Engine.Name + "(" + strings.Join(args, ", ") + ")"
	return stmt[:nameEnd] + onCluster + stmt[nameEnd:from] + engine + stmt[to:], nil
}

// unquote drops the backquotes of an identifier the parser kept them on.
func unquote(s string) string { return strings.Trim(s, "`") }

// ForCluster returns m's statements rewritten by ClusterStatement (m's own with cluster "").
func (m Migration) ForCluster(cluster string) ([]string, error) {
	out := make([]string, len(m.Statements))
	for i, st := range m.Statements {
		var err error
		if out[i], err = ClusterStatement(st, cluster); err != nil {
			return nil, fmt.Errorf("migration %04d_%s statement %d: %w", m.Version, m.Name, i+1, err)
		}
	}
	return out, nil
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
