// Package migrations creates and upgrades mcpulse's ClickHouse schema (DESIGN.md §4) from the
// numbered SQL files embedded from sql/ (NNNN_name.sql, applied in order). Applied versions are
// recorded in mcpulse.schema_migrations, and every statement is idempotent (IF NOT EXISTS; a
// RENAME TABLE that an interrupted earlier run already did is taken as done, see Up), so
// `mcpulse migrate up` may run any number of times.
//
// Why not golang-migrate: its ClickHouse driver records versions with an INSERT ... VALUES
// statement that hangs on ClickHouse 18.16 (the test server), so this runner records versions
// with a native-protocol batch insert, which works on 18.16 and current releases.
package migrations

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// Database is the ClickHouse database every mcpulse table lives in.
const Database = "mcpulse"

// MaxPartitionsPerInsert is how many partitions one INSERT (or INSERT ... SELECT) may write:
// current ClickHouse refuses an insert block that falls in more than
// max_partitions_per_insert_block partitions (100 by default; code 252, TOO_MANY_PARTS), and
// the raw tables and rollups are partitioned by UTC month (toYYYYMM), so writers cut their
// inserts to at most this many months. ClickHouse 18.16 has no such limit.
const MaxPartitionsPerInsert = 100

//go:embed sql/*.sql
var files embed.FS

// Migration is one numbered SQL file.
type Migration struct {
	Version    int      // the file's numeric prefix
	Name       string   // file name without the prefix and extension
	Checksum   string   // hex SHA-256 of the file, recorded when applied
	Statements []string // statements in file order, comments removed
}

// All returns the embedded migrations in version order. It fails on a badly named file or a
// repeated version: a BUG in the build, caught by the tests.
func All() ([]Migration, error) {
	entries, err := fs.ReadDir(files, "sql")
	if err != nil {
		return nil, err
	}
	var out []Migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		prefix, rest, ok := strings.Cut(strings.TrimSuffix(name, ".sql"), "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration file %s: want NNNN_name.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migration version %d used by %s and %s", v, other, name)
		}
		seen[v] = name
		data, err := files.ReadFile(path.Join("sql", name))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(data)
		out = append(out, Migration{Version: v, Name: rest, Checksum: hex.EncodeToString(sum[:]), Statements: SplitStatements(string(data))})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// SplitStatements splits SQL text into statements at semicolons that end a line, after
// dropping whole-line "--" comments. The migration files keep to that layout.
func SplitStatements(sqlText string) []string {
	var kept []string
	for _, line := range strings.Split(sqlText, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		kept = append(kept, line)
	}
	var out []string
	var cur strings.Builder
	for _, line := range kept {
		cur.WriteString(line)
		cur.WriteByte('\n')
		if strings.HasSuffix(strings.TrimSpace(line), ";") {
			if st := strings.TrimSuffix(strings.TrimSpace(cur.String()), ";"); st != "" {
				out = append(out, st)
			}
			cur.Reset()
		}
	}
	if st := strings.TrimSpace(cur.String()); st != "" {
		out = append(out, st)
	}
	return out
}

// Applied is a migration recorded in mcpulse.schema_migrations.
type Applied struct {
	Version  int
	Name     string
	Checksum string
}

// Bootstrap are the statements Up runs before any migration: the database and the table
// recording applied migrations.
var Bootstrap = []string{
	"CREATE DATABASE IF NOT EXISTS " + Database,
	`CREATE TABLE IF NOT EXISTS ` + Database + `.schema_migrations
(
    version UInt32,
    name String,
    checksum String,
    applied_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree()
ORDER BY version`,
}

// migrationsTableStatement is the index in Bootstrap of schema_migrations' CREATE TABLE.
const migrationsTableStatement = 1

// Options choose the variant of the schema Up creates.
type Options struct {
	// Cluster, when set, is the ClickHouse cluster (a remote_servers key) every statement
	// runs ON CLUSTER, with replicated tables (ClusterStatement). Default: "", one server.
	Cluster string
	// PreflightTimeout bounds each check of the Preflight run before any statement on a
	// cluster. Default: 0, DefaultPreflightTimeout (10 s).
	PreflightTimeout time.Duration
	// DDLTimeout bounds how long each ON CLUSTER statement waits for every host to run it
	// (whole seconds; DDLTimeoutSettings), after which it fails while the hosts that have not
	// run it yet keep it in their DDL queue. Keep it under the connection's read timeout.
	// Default: 0, DefaultDDLTimeout (30 s).
	DDLTimeout time.Duration
	// Sharded, with Cluster, creates the sharded layout (docs/DESIGN.md §8): the tables,
	// Null tables and materialized views in LocalDatabase on every shard, and in Database a
	// Distributed table over each table (ShardingKeys), the analyst views and
	// schema_migrations. Inserts through the Distributed tables need insert_distributed_sync
	// = 1 and JOINs of two of them distributed_product_mode = 'allow' in the servers'
	// profile; Up sends the first with its own statements. Default: false, every table in
	// Database on each shard.
	Sharded bool
	// Below, when positive, stops before the migration of that version: only those below it
	// are applied, leaving the schema an earlier release left (a database to upgrade, in
	// tests of an upgrade). Default: 0, every migration.
	Below int
}

// Up creates database mcpulse if needed and applies every migration not yet recorded, in
// order, recording each after all its statements succeeded. It returns the migrations it
// applied now (none when the schema is current). A recorded migration whose embedded file
// changed since is reported in the log, not re-run. A migration is re-run from its first
// statement after a failed attempt; a RENAME TABLE that fails then with its sources gone and
// its targets there (renameDone) is logged and taken as done.
func Up(ctx context.Context, conn driver.Conn, log *slog.Logger) ([]Migration, error) {
	return UpWith(ctx, conn, log, Options{})
}

// UpWith is Up for the schema variant of opts. On a cluster, conn may be any host of it: the
// statements run ON CLUSTER, and schema_migrations is replicated on every host of every
// shard (BootstrapForCluster). There it first runs Preflight and returns its error (a
// *PreflightError naming each host down) before any statement, and reads the applied
// versions after SYSTEM SYNC REPLICA, so a run right after another one through another host
// sees what that one recorded.
func UpWith(ctx context.Context, conn driver.Conn, log *slog.Logger, opts Options) ([]Migration, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	all, err := All()
	if err != nil {
		return nil, err
	}
	if opts.Sharded && opts.Cluster == "" {
		return nil, errors.New("a sharded schema needs a cluster (Options.Cluster)")
	}
	bootstrap, err := BootstrapForCluster(opts.Cluster)
	if err != nil {
		return nil, err
	}
	var plan [][][]Statement
	if opts.Sharded {
		if bootstrap, err = ShardedBootstrap(opts.Cluster); err != nil {
			return nil, err
		}
		if plan, err = ShardedPlan(all, opts.Cluster); err != nil {
			return nil, err
		}
	}
	ddlCtx := ctx // the context of the schema statements: on a cluster, with the DDL timeout
	settings := clickhouse.Settings{}
	lifted, err := liftPartitionLimit(ctx, conn, settings)
	if err != nil {
		return nil, err
	}
	if lifted {
		ddlCtx = clickhouse.Context(ctx, clickhouse.WithSettings(settings))
	}
	if opts.Cluster != "" {
		began := time.Now()
		hosts, err := Preflight(ctx, conn, opts.Cluster, opts.PreflightTimeout)
		if err != nil {
			return nil, err
		}
		log.Info("cluster preflight passed", "cluster", opts.Cluster, "hosts", len(hosts), "took", time.Since(began).Round(time.Millisecond))
		if opts.DDLTimeout == 0 {
			opts.DDLTimeout = DefaultDDLTimeout
		}
		timeout, err := DDLTimeoutSettings(conn, opts.DDLTimeout)
		if err != nil {
			return nil, err
		}
		maps.Copy(settings, timeout)
		if opts.Sharded {
			// The backfills insert through Distributed tables; the next statement reads them.
			settings["insert_distributed_sync"] = 1
		}
		ddlCtx = clickhouse.Context(ctx, clickhouse.WithSettings(settings))
	}
	for _, st := range bootstrap {
		if err := conn.Exec(ddlCtx, st); err != nil {
			return nil, fmt.Errorf("prepare migrations table: %w", ddlTimedOut(err, opts))
		}
	}
	if opts.Cluster != "" {
		// Another host's records reach this replica asynchronously; wait for them.
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+Database+".schema_migrations"); err != nil {
			return nil, fmt.Errorf("wait for the applied migrations to replicate: %w", err)
		}
	}
	applied, err := AppliedVersions(ctx, conn)
	if err != nil {
		return nil, err
	}
	var done []Migration
	for mi, m := range all {
		if opts.Below > 0 && m.Version >= opts.Below {
			break
		}
		if prev, ok := applied[m.Version]; ok {
			if prev.Checksum != m.Checksum {
				log.Warn("applied migration differs from the embedded file; not re-run", "version", m.Version, "name", m.Name)
			}
			continue
		}
		start := time.Now()
		var statements [][]Statement
		if plan != nil {
			statements = plan[mi]
		} else {
			sts, err := m.ForCluster(opts.Cluster)
			if err != nil {
				return done, err
			}
			for i, st := range sts {
				statements = append(statements, []Statement{{SQL: st, Rename: m.Statements[i]}})
			}
		}
		for i, group := range statements {
			for _, st := range group {
				if err := conn.Exec(ddlCtx, st.SQL); err != nil {
					if ran, _ := renameDone(ctx, conn, st.Rename); ran {
						log.Warn("migration statement failed, but its rename is done: taken as run by an earlier attempt",
							"version", m.Version, "name", m.Name, "statement", i+1, "err", err)
						continue
					}
					return done, fmt.Errorf("migration %04d_%s statement %d: %w", m.Version, m.Name, i+1, ddlTimedOut(err, opts))
				}
			}
		}
		if err := record(ctx, conn, m); err != nil {
			return done, err
		}
		log.Info("applied migration", "version", m.Version, "name", m.Name, "statements", len(m.Statements), "took", time.Since(start).Round(time.Millisecond))
		done = append(done, m)
	}
	if opts.Cluster == "" && (opts.Below == 0 || opts.Below > rawByPartitionVersion) {
		if err := enableInsertDedup(ctx, conn, log); err != nil {
			return done, err
		}
	}
	return done, nil
}

// liftPartitionLimit adds max_partitions_per_insert_block = 0 (no limit) to settings when the
// server knows the setting (current releases; 18.16 has no limit and refuses the name), and
// reports whether it did. A migration copying a table whose partition key is finer than a month
// (0044: month and Kafka partition) writes as many partitions as the table holds in one
// INSERT ... SELECT, which current releases refuse beyond 100 (code 252) unless lifted; the
// copy's parts are merged afterwards like any other.
func liftPartitionLimit(ctx context.Context, conn driver.Conn, settings clickhouse.Settings) (bool, error) {
	var known uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM system.settings WHERE name = 'max_partitions_per_insert_block'").Scan(&known); err != nil {
		return false, fmt.Errorf("look up max_partitions_per_insert_block: %w", err)
	}
	if known == 0 {
		return false, nil
	}
	settings["max_partitions_per_insert_block"] = 0
	return true, nil
}

// rawByPartitionVersion is the migration that partitions the raw tables by Kafka partition;
// every raw table exists once it is applied.
const rawByPartitionVersion = 44

// ddlTimedOut explains a cluster statement that outlived Options.DDLTimeout (ClickHouse's
// TIMEOUT_EXCEEDED, code 159, whose message counts the hosts that have not run it).
func ddlTimedOut(err error, opts Options) error {
	var ex *clickhouse.Exception
	if opts.Cluster == "" || !errors.As(err, &ex) || ex.Code != 159 {
		return err
	}
	return fmt.Errorf("not run by every host of cluster %s within the DDL timeout %s (the hosts that have not run it keep it in their DDL queue and run it when they can; rerun migrate up once they are back): %w", opts.Cluster, opts.DDLTimeout, err)
}

// renamePairRE matches one "db.source TO db.target" pair of a RENAME TABLE statement, each
// name database-qualified and plain (the migrations' names).
var renamePairRE = regexp.MustCompile(`(?is)^\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s+TO\s+([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*$`)

// renameDone reports whether stmt, a RENAME TABLE statement without ON CLUSTER, has already
// been applied on conn's server: every table it renames away (a source no pair renames back
// to) is missing and every target exists (system.tables). RENAME has no IF EXISTS on
// ClickHouse 18.16, so a migration re-run after an attempt that renamed its tables but did
// not get to record the migration (a lost connection; an ON CLUSTER rename that timed out
// waiting for a host, which runs it from the DDL queue when it is back) would fail on it for
// ever; Up takes such a failed RENAME as done. On a cluster only conn's host is looked at.
//
// It returns false for any other statement, and for a RENAME of a name that is not a plain
// database-qualified one; the error is the system.tables query's.
func renameDone(ctx context.Context, conn driver.Conn, stmt string) (bool, error) {
	loc := renameRE.FindStringIndex(stmt)
	if loc == nil {
		return false, nil
	}
	type table struct{ db, name string }
	var sources, targets []table
	dbs := map[string]bool{}
	for _, pair := range strings.Split(stmt[loc[1]:], ",") {
		m := renamePairRE.FindStringSubmatch(pair)
		if m == nil {
			return false, nil
		}
		sources, targets = append(sources, table{m[1], m[2]}), append(targets, table{m[3], m[4]})
		dbs[m[1]], dbs[m[3]] = true, true
	}
	rows, err := conn.Query(ctx, "SELECT database, name FROM system.tables WHERE has(?, database)", slices.Sorted(maps.Keys(dbs)))
	if err != nil {
		return false, fmt.Errorf("read system.tables: %w", err)
	}
	defer rows.Close()
	exists := map[table]bool{}
	for rows.Next() {
		var t table
		if err := rows.Scan(&t.db, &t.name); err != nil {
			return false, fmt.Errorf("read system.tables: %w", err)
		}
		exists[t] = true
	}
	if err := rows.Err(); err != nil {
		return false, fmt.Errorf("read system.tables: %w", err)
	}
	for _, t := range targets {
		if !exists[t] {
			return false, nil
		}
	}
	for _, s := range sources {
		if exists[s] && !slices.Contains(targets, s) {
			return false, nil
		}
	}
	return true, nil
}

// BootstrapForCluster returns Bootstrap rewritten by ClusterStatement, except that
// schema_migrations is replicated on every host of every shard (ClusterWidePath,
// ClusterWideReplicaName), so "migrate up" run against any host sees every version applied.
func BootstrapForCluster(cluster string) ([]string, error) {
	out := make([]string, len(Bootstrap))
	for i, st := range Bootstrap {
		path, replica := ReplicaPath, ReplicaName
		if i == migrationsTableStatement {
			path, replica = ClusterWidePath, ClusterWideReplicaName
		}
		var err error
		if out[i], err = clusterStatement(st, cluster, path, replica); err != nil {
			return nil, fmt.Errorf("bootstrap statement %d: %w", i+1, err)
		}
	}
	return out, nil
}

func record(ctx context.Context, conn driver.Conn, m Migration) error {
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO "+Database+".schema_migrations (version, name, checksum, applied_at)")
	if err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := batch.Append(uint32(m.Version), m.Name, m.Checksum, time.Now().UTC()); err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	if err := batch.Send(); err != nil {
		return fmt.Errorf("record migration %d: %w", m.Version, err)
	}
	return nil
}

// AppliedVersions reads mcpulse.schema_migrations, keyed by version.
func AppliedVersions(ctx context.Context, conn driver.Conn) (map[int]Applied, error) {
	rows, err := conn.Query(ctx, "SELECT version, name, checksum FROM "+Database+".schema_migrations FINAL")
	if err != nil {
		return nil, fmt.Errorf("read applied migrations: %w", err)
	}
	defer rows.Close()
	out := map[int]Applied{}
	for rows.Next() {
		var (
			v        uint32
			name, cs string
		)
		if err := rows.Scan(&v, &name, &cs); err != nil {
			return nil, err
		}
		out[int(v)] = Applied{Version: int(v), Name: name, Checksum: cs}
	}
	return out, rows.Err()
}
