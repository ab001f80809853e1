package migrations

import (
	"fmt"
	"regexp"
	"strings"
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
	// name is a plain or backquoted identifier, optionally database-qualified.
	nameRE = `((?:` + "`[^`]+`" + `|[A-Za-z_][A-Za-z0-9_]*)(?:\.(?:` + "`[^`]+`" + `|[A-Za-z_][A-Za-z0-9_]*))?)`
	// ddlRE matches the start of a statement that ON CLUSTER applies to, up to the object's
	// name, after which " ON CLUSTER c" goes.
	ddlRE = regexp.MustCompile(`(?is)^\s*(?:CREATE\s+(?:DATABASE|TABLE|MATERIALIZED\s+VIEW|VIEW)|ALTER\s+TABLE|DROP\s+(?:DATABASE|TABLE|VIEW|DICTIONARY)|TRUNCATE\s+TABLE|OPTIMIZE\s+TABLE)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?` + nameRE)
	// engineRE matches a MergeTree-family engine clause (new syntax) and its arguments.
	engineRE = regexp.MustCompile(`(?i)\bENGINE\s*=\s*(Replacing|Aggregating|Summing|Collapsing|VersionedCollapsing|Graphite)?MergeTree\b(?:\s*\(([^()]*)\))?`)
	// nullEngineRE matches the Null engine, which stores nothing: each host's Null table
	// feeds that host's materialized views, whose TO tables are replicated, so it is created
	// on every host as it is.
	nullEngineRE = regexp.MustCompile(`(?i)\bENGINE\s*=\s*Null\b`)
	// insertRE matches statements that need no rewriting: data written on one replica is
	// copied to the others by replication.
	insertRE      = regexp.MustCompile(`(?is)^\s*INSERT\s+INTO\s`)
	createTableRE = regexp.MustCompile(`(?is)^\s*CREATE\s+TABLE\s`)
	createMVRE    = regexp.MustCompile(`(?is)^\s*CREATE\s+MATERIALIZED\s+VIEW\s`)
	// renameRE matches RENAME TABLE, whose ON CLUSTER clause comes after the last pair.
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
//   - a table's XMergeTree(args) engine becomes ReplicatedXMergeTree(ReplicaPath,
//     ReplicaName, args); a Null table (it stores nothing) keeps its engine;
//   - INSERT statements are kept as they are (replication copies their rows).
//
// Any other statement is an error, so a migration of a new kind cannot silently skip hosts.
// With cluster "", stmt is returned unchanged.
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
	if insertRE.MatchString(stmt) {
		return stmt, nil
	}
	if renameRE.MatchString(stmt) {
		if strings.Contains(strings.ToUpper(stmt), " ON CLUSTER ") {
			return "", fmt.Errorf("statement already has ON CLUSTER: %q", firstLine(stmt))
		}
		return strings.TrimRight(stmt, " \t\n;") + " ON CLUSTER " + quoteCluster(cluster), nil
	}
	loc := ddlRE.FindStringSubmatchIndex(stmt)
	if loc == nil {
		return "", fmt.Errorf("no cluster form for statement %q", firstLine(stmt))
	}
	if strings.Contains(strings.ToUpper(stmt[loc[1]:]), " ON CLUSTER ") {
		return "", fmt.Errorf("statement already has ON CLUSTER: %q", firstLine(stmt))
	}
	name := stmt[loc[2]:loc[3]]
	out := stmt[:loc[1]] + " ON CLUSTER " + quoteCluster(cluster) + stmt[loc[1]:]
	if createMVRE.MatchString(stmt) && engineRE.MatchString(stmt) {
		return "", fmt.Errorf("materialized view %s: give it a TO table, whose engine is replicated; an inner table's is not", name)
	}
	if !createTableRE.MatchString(stmt) {
		return out, nil
	}
	engines := engineRE.FindAllStringSubmatchIndex(out, -1)
	if len(engines) == 0 && len(nullEngineRE.FindAllStringIndex(out, -1)) == 1 {
		return out, nil
	}
	if len(engines) != 1 {
		return "", fmt.Errorf("table %s: want one MergeTree-family ENGINE clause, found %d", name, len(engines))
	}
	db, table, ok := strings.Cut(strings.ReplaceAll(name, "`", ""), ".")
	if !ok {
		return "", fmt.Errorf("table %s: want a database-qualified name", name)
	}
	e := engines[0]
	family := ""
	if e[2] >= 0 {
		family = out[e[2]:e[3]]
	}
	args := []string{"'" + fmt.Sprintf(pathFormat, db, table) + "'", "'" + replicaName + "'"}
	if e[4] < 0 { // ENGINE = MergeTree, without parentheses, or arguments the pattern cannot read
		if strings.HasPrefix(strings.TrimSpace(out[e[1]:]), "(") {
			return "", fmt.Errorf("table %s: engine arguments with parentheses are not supported", name)
		}
	} else if a := strings.TrimSpace(out[e[4]:e[5]]); a != "" {
		args = append(args, a)
	}
	engine := "ENGINE = Replicated" + family + "MergeTree(" + strings.Join(args, ", ") + ")"
	return out[:e[0]] + engine + out[e[1]:], nil
}

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
