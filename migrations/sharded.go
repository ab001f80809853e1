package migrations

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	chparser "github.com/AfterShip/clickhouse-sql-parser/parser"
)

// The sharded layout of a cluster (Options.Sharded; docs/DESIGN.md §8, "A sharded cluster"):
// the tables that store rows, the Null tables and the materialized views live in
// LocalDatabase on every shard, and Database holds a Distributed table of the same name and
// columns over each of them, the analyst views (reading the Distributed tables) and
// schema_migrations. Readers and writers keep naming Database's tables.

// LocalDatabase is the database of a sharded cluster's shard-local tables and materialized
// views.
const LocalDatabase = "mcpulse_local"

// Sharding keys of the Distributed tables: what is counted together stays on one shard.
const (
	// keyIdentity keeps a person of recruitment and suppression (the identity hash) together.
	keyIdentity = "cityHash64(identity_hash)"
	// keyDistinctID keeps a user's events together.
	keyDistinctID = "cityHash64(distinct_id)"
	// keyPartition keeps what the consumer writes per Kafka partition together (every
	// version of a cumulative rollup cell, the batch markers).
	keyPartition = "cityHash64(kafka_topic, kafka_partition)"
	// keyFirstShard puts a small operational table whole on the first shard.
	keyFirstShard = "0"
)

// ShardingKeys is the sharding key expression of each table's Distributed table, by the
// table's name in Database (a name a later migration renames to or drops included, since
// the migrations create them in order). A storage table of a migration that is missing
// here fails the sharded rewrite.
var ShardingKeys = map[string]string{
	"recruitment_events":                 keyIdentity,
	"suppression_audit":                  keyIdentity,
	"contact_policy_violations":          keyIdentity,
	"contact_policy_violations_keyed":    keyIdentity,
	"contact_policy_violations_by_month": keyIdentity,

	"tool_calls":                 keyDistinctID,
	"mcp_exceptions":             keyDistinctID,
	"mcp_feedback":               keyDistinctID,
	"mcp_identify_events":        keyDistinctID,
	"mcp_initialize_events":      keyDistinctID,
	"mcp_resource_prompt_events": keyDistinctID,
	"other_events":               keyDistinctID,
	"tools_list_events":          keyDistinctID,

	// The raw tables rebuilt partitioned by Kafka partition (migration 0044), under their
	// names while they are built and swapped.
	"mcp_initialize_events_by_stream":      keyDistinctID,
	"mcp_initialize_events_by_month":       keyDistinctID,
	"mcp_exceptions_by_stream":             keyDistinctID,
	"mcp_exceptions_by_month":              keyDistinctID,
	"other_events_by_stream":               keyDistinctID,
	"other_events_by_month":                keyDistinctID,
	"mcp_feedback_by_stream":               keyDistinctID,
	"mcp_feedback_by_month":                keyDistinctID,
	"mcp_resource_prompt_events_by_stream": keyDistinctID,
	"mcp_resource_prompt_events_by_month":  keyDistinctID,
	"mcp_identify_events_by_stream":        keyDistinctID,
	"mcp_identify_events_by_month":         keyDistinctID,
	"tools_list_events_by_stream":          keyDistinctID,
	"tools_list_events_by_month":           keyDistinctID,
	// Likewise tool_calls and recruitment_events (migration 0045), and the Null feeds the
	// views read instead of them, keyed as their raw table so a feed row lands on the shard
	// of its raw row.
	"tool_calls_by_stream":         keyDistinctID,
	"tool_calls_by_month":          keyDistinctID,
	"tool_calls_feed":              keyDistinctID,
	"recruitment_events_by_stream": keyIdentity,
	"recruitment_events_by_month":  keyIdentity,
	"recruitment_events_feed":      keyIdentity,

	"tool_call_stats_hourly":    keyPartition,
	"ignored_key_paths_hourly":  keyPartition,
	"gate_reason_calls_hourly":  keyPartition,
	"events_by_name_hourly":     keyPartition,
	"rollup_batches":            keyPartition,
	"rollup_writes":             keyPartition,
	"rollup_writes_before_0035": keyPartition,

	"dead_letters":                    keyFirstShard,
	"dead_letters_keyed":              keyFirstShard,
	"dead_letters_by_month":           keyFirstShard,
	"alert_notifications":             keyFirstShard,
	"alert_state":                     keyFirstShard,
	"alert_transitions":               keyFirstShard,
	"campaign_lint_runs":              keyFirstShard,
	"flag_payload_versions":           keyFirstShard,
	"schema_check_runs":               keyFirstShard,
	"schema_check_tools":              keyFirstShard,
	"schema_verdicts":                 keyFirstShard,
	"served_tool_schemas":             keyFirstShard,
	"served_tool_schemas_in":          keyFirstShard,
	"cardinality_overflow_hourly":     keyFirstShard,
	"recruitment_funnel_daily":        keyFirstShard,
	"gate_reason_people_sealed":       keyFirstShard,
	"ignored_key_paths_sealed":        keyFirstShard,
	"rollup_epochs":                   keyFirstShard,
	"rollup_epochs_taken":             keyFirstShard,
	"rollup_sealed_hours":             keyFirstShard,
	"rollup_seals":                    keyFirstShard,
	"gate_reason_people_hourly":       keyFirstShard,
	"gate_reasons_hourly":             keyFirstShard,
	"ignored_key_rates_hourly":        keyFirstShard,
	"ignored_key_rates_hourly_sealed": keyFirstShard,
	"ignored_keys_hourly":             keyFirstShard,
}

// objectKind is what a name in Database stands for in the sharded layout.
type objectKind int

const (
	kindStorage objectKind = iota + 1 // a local table with a Distributed table over it
	kindView                          // an analyst view in Database
	kindMatView                       // a materialized view in LocalDatabase
)

// Statement is one statement a migration runs, in the variant of the schema being created.
type Statement struct {
	// SQL is the statement run.
	SQL string
	// Rename, for a RENAME TABLE, is its form without ON CLUSTER, which renameDone reads to
	// tell a rename an earlier attempt already did; "" otherwise.
	Rename string
}

// shardedPlanner rewrites statements for the sharded layout, in migration order: it keeps
// what each name of Database stands for (a DROP or RENAME acts on what the name is).
type shardedPlanner struct {
	cluster string
	kinds   map[string]objectKind
	// stale are the tables ALTERed since their Distributed tables were last made: those are
	// made anew once, before the next statement of another kind or at the migration's end
	// (each ON CLUSTER statement costs a round of the DDL queue).
	stale []string
	// altered reports that the statement rewritten last was an ALTER TABLE.
	altered bool
}

// flush returns the statements that make the Distributed tables of the stale tables anew.
func (p *shardedPlanner) flush() ([]Statement, error) {
	var out []Statement
	for _, name := range p.stale {
		create, err := p.distributedTable(name)
		if err != nil {
			return nil, err
		}
		out = append(out, Statement{SQL: p.dropDistributed(name)}, Statement{SQL: create})
	}
	p.stale = nil
	return out, nil
}

// dbNameRE matches a name qualified by Database (not LocalDatabase, whose name continues with
// an underscore).
var dbNameRE = regexp.MustCompile(`\b` + Database + `\.`)

// toLocal qualifies every Database name of stmt by LocalDatabase instead.
func toLocal(stmt string) string { return dbNameRE.ReplaceAllString(stmt, LocalDatabase+".") }

// distributedTable is the CREATE statement of the Distributed table over local table name.
func (p *shardedPlanner) distributedTable(name string) (string, error) {
	key, ok := ShardingKeys[name]
	if !ok {
		return "", fmt.Errorf("table %s has no sharding key: add it to migrations.ShardingKeys", name)
	}
	c := quoteCluster(p.cluster)
	return fmt.Sprintf("CREATE TABLE IF NOT EXISTS %s.%s ON CLUSTER %s AS %s.%s ENGINE = Distributed(%s, %s, %s, %s)",
		Database, name, c, LocalDatabase, name, c, LocalDatabase, name, key), nil
}

// dropDistributed is the DROP statement of the Distributed table name.
func (p *shardedPlanner) dropDistributed(name string) string {
	return fmt.Sprintf("DROP TABLE IF EXISTS %s.%s ON CLUSTER %s", Database, name, quoteCluster(p.cluster))
}

// statement rewrites one migration statement into the statements of the sharded layout,
// after those that make the Distributed tables of tables ALTERed before anew (unless stmt
// ALTERs a table too).
func (p *shardedPlanner) statement(stmt string) ([]Statement, error) {
	p.altered = false
	out, err := p.rewrite(stmt)
	if err != nil || p.altered {
		return out, err
	}
	before, err := p.flush()
	if err != nil {
		return nil, err
	}
	return append(before, out...), nil
}

// rewrite rewrites one migration statement into the statements of the sharded layout.
func (p *shardedPlanner) rewrite(stmt string) ([]Statement, error) {
	stmts, err := chparser.NewParser(stmt).ParseStmts()
	if err != nil {
		return nil, fmt.Errorf("statement %q does not parse: %w", firstLine(stmt), err)
	}
	if len(stmts) != 1 {
		return nil, fmt.Errorf("want one statement, parsed %d: %q", len(stmts), firstLine(stmt))
	}
	local := func() (Statement, error) {
		s, err := ClusterStatement(toLocal(stmt), p.cluster)
		return Statement{SQL: s}, err
	}
	kept := func() ([]Statement, error) {
		s, err := ClusterStatement(stmt, p.cluster)
		return []Statement{{SQL: s}}, err
	}
	// ours reports the table name of id when it is in Database.
	ours := func(id *chparser.TableIdentifier) (string, bool) {
		if id == nil || id.Database == nil || unquote(id.Database.Name) != Database {
			return "", false
		}
		return unquote(id.Table.Name), true
	}
	// rebuild drops and recreates the Distributed table of name over its local table.
	rebuild := func(out []Statement, name string) ([]Statement, error) {
		create, err := p.distributedTable(name)
		if err != nil {
			return nil, err
		}
		return append(out, Statement{SQL: p.dropDistributed(name)}, Statement{SQL: create}), nil
	}
	switch n := stmts[0].(type) {
	case *chparser.InsertStmt:
		return kept() // through the Distributed tables
	case *chparser.CreateView:
		if name, ok := ours(n.Name); ok {
			p.kinds[name] = kindView
		}
		return kept() // reads the Distributed tables, so answers for the cluster
	case *chparser.CreateMaterializedView:
		name, ok := ours(n.Name)
		if !ok {
			return nil, fmt.Errorf("materialized view %s: want a name in %s", n.Name.String(), Database)
		}
		p.kinds[name] = kindMatView
		s, err := local()
		return []Statement{s}, err
	case *chparser.CreateTable:
		name, ok := ours(n.Name)
		if !ok {
			return nil, fmt.Errorf("table %s: want a name in %s", n.Name.String(), Database)
		}
		s, err := local()
		if err != nil {
			return nil, err
		}
		create, err := p.distributedTable(name)
		if err != nil {
			return nil, err
		}
		p.kinds[name] = kindStorage
		return []Statement{s, {SQL: create}}, nil
	case *chparser.AlterTable:
		name, ok := ours(n.TableIdentifier)
		if !ok || p.kinds[name] != kindStorage {
			return nil, fmt.Errorf("ALTER TABLE %s: want a table of %s", n.TableIdentifier.String(), Database)
		}
		s, err := local()
		if err != nil {
			return nil, err
		}
		// 18.16 refuses ALTER ... ON CLUSTER on a Distributed table when the shards use
		// internal replication (code 371); one holds no rows, so it is made anew (flush).
		if !slices.Contains(p.stale, name) {
			p.stale = append(p.stale, name)
		}
		p.altered = true
		return []Statement{s}, nil
	case *chparser.OptimizeStmt, *chparser.TruncateTable:
		s, err := local()
		return []Statement{s}, err
	case *chparser.DropStmt:
		name, ok := ours(n.Name)
		if !ok || !strings.EqualFold(n.DropTarget, "TABLE") && !strings.EqualFold(n.DropTarget, "VIEW") {
			return nil, fmt.Errorf("no sharded form for statement %q", firstLine(stmt))
		}
		kind := p.kinds[name]
		delete(p.kinds, name)
		switch kind {
		case kindView:
			return kept()
		case kindMatView:
			s, err := local()
			return []Statement{s}, err
		}
		// A table, or a name no migration created: whatever either database holds under it.
		s, err := local()
		if err != nil {
			return nil, err
		}
		return []Statement{s, {SQL: p.dropDistributed(name)}}, nil
	case *chparser.RenameStmt:
		loc := renameRE.FindStringIndex(stmt)
		if loc == nil {
			return nil, fmt.Errorf("no sharded form for statement %q", firstLine(stmt))
		}
		var sources, targets []string
		for _, pair := range strings.Split(stmt[loc[1]:], ",") {
			m := renamePairRE.FindStringSubmatch(pair)
			if m == nil || m[1] != Database || m[3] != Database || p.kinds[m[2]] != kindStorage {
				return nil, fmt.Errorf("RENAME %q: want tables of %s", strings.TrimSpace(pair), Database)
			}
			sources, targets = append(sources, m[2]), append(targets, m[4])
		}
		s, err := local()
		if err != nil {
			return nil, err
		}
		s.Rename = toLocal(stmt)
		out := []Statement{s}
		for _, name := range sources {
			if !slices.Contains(targets, name) {
				delete(p.kinds, name)
				out = append(out, Statement{SQL: p.dropDistributed(name)})
			}
		}
		for _, name := range targets {
			p.kinds[name] = kindStorage
			if out, err = rebuild(out, name); err != nil {
				return nil, err
			}
		}
		return out, nil
	case *chparser.CreateDatabase:
		return nil, fmt.Errorf("no sharded form for statement %q: the databases are the bootstrap's", firstLine(stmt))
	}
	return nil, fmt.Errorf("no sharded form for statement %q", firstLine(stmt))
}

// ShardedPlan returns, for each of all (every migration, in version order, applied or not:
// a DROP or RENAME acts on what earlier migrations made a name), the statements of each of
// its statements in the sharded layout on cluster: plan[i][j] are those of all[i]'s
// statement j. Errors: an invalid cluster name, a statement with no sharded form, a storage
// table without a ShardingKeys entry.
func ShardedPlan(all []Migration, cluster string) ([][][]Statement, error) {
	if err := ValidClusterName(cluster); err != nil {
		return nil, err
	}
	p := &shardedPlanner{cluster: cluster, kinds: map[string]objectKind{}}
	plan := make([][][]Statement, len(all))
	for i, m := range all {
		plan[i] = make([][]Statement, len(m.Statements))
		for j, st := range m.Statements {
			var err error
			if plan[i][j], err = p.statement(st); err != nil {
				return nil, fmt.Errorf("migration %04d_%s statement %d: %w", m.Version, m.Name, j+1, err)
			}
		}
		rest, err := p.flush()
		if err != nil {
			return nil, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, err)
		}
		if last := len(plan[i]) - 1; last >= 0 {
			plan[i][last] = append(plan[i][last], rest...)
		}
	}
	return plan, nil
}

// ShardedBootstrap returns BootstrapForCluster(cluster) with LocalDatabase created too.
func ShardedBootstrap(cluster string) ([]string, error) {
	boot, err := BootstrapForCluster(cluster)
	if err != nil {
		return nil, err
	}
	local, err := ClusterStatement("CREATE DATABASE IF NOT EXISTS "+LocalDatabase, cluster)
	if err != nil {
		return nil, err
	}
	return append(boot, local), nil
}
