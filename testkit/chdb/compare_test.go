package chdb_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/campaigns"
	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/demo"
	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/intents"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/sql"
	"github.com/mcpulse/mcpulse/suppression"
	"github.com/mcpulse/mcpulse/testkit/chdb"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// harnessEvents is the corpus size: every event kind, duplicates and malformed lines, spread
// over the generator's window of hours, in a couple of seconds per engine.
const harnessEvents = 20000

// wallClockColumns hold when something happened on this machine (an insert, a run's
// duration, a verdict decided) or a random id, not a fact of the data, so they differ between
// the two runs.
var wallClockColumns = map[string]bool{"inserted_at": true, "applied_at": true, "duration_ms": true, "run_id": true, "decided_at": true}

// Rollup write bookkeeping (migration 0015, package consumers/rollup): the offset each row of a
// cumulative rollup is as of, the totals it replaced and its version depend on where the
// consumer's batches ended, which differs between the two consumer groups; the newest row of
// each (partition, cell) holds the same totals on both. The epoch and write-marker tables are
// bookkeeping only, and so is a sealed hour's sum of the versions of the rollup rows it saw
// (rollup_sealed_hours.rollup_versions).
var (
	rollupBookkeepingColumns = map[string]bool{"as_of": true, "before": true, "before_as_of": true, "version": true}
	sealBookkeepingColumns   = map[string]bool{"rollup_versions": true}
	rollupBookkeepingTables  = map[string]bool{"rollup_epochs_taken": true, "rollup_writes_before_0035": true, "rollup_batches": true}
)

// engine is one ClickHouse with the Redis database and consumer group that feed it.
type engine struct {
	name string
	ch   driver.Conn
	rdb  redis.UniversalClient
	// group is the consumer group filling ch, so both engines read every message.
	group string
}

// TestCurrentEngineAgreesWith1816 runs mcpulse on ClickHouse 18.16 (the embedded stack) and on
// the current engine (chDB) side by side, and compares what they hold and answer:
//
//   - every migration, through migrations.Up, and the schema it leaves;
//   - a demo/gen corpus through the consumer (one consumer group per engine, each with its
//     own Redis database), so the same rows reach both through the materialized views;
//   - the ops jobs on both with one clock: schema checks, suppression resets (audited through
//     Kafka to both), reconcile (the two Redis databases must end alike), the contact-policy
//     audit;
//   - every table's content;
//   - every query in sql/queries: the panels' and raw queries with the filters bound as the
//     dashboards bind them (all, and narrowed), the others as they are or as their callers
//     bound them in this run;
//   - every other statement mcpulse's code sent while doing the above (the consumer's and the
//     jobs' own reads), replayed on both;
//   - no warning from the current engine (deprecated syntax, obsolete settings).
//
// Migrations, query files and panels are found at run time, so new ones are covered as they
// land.
func TestCurrentEngineAgreesWith1816(t *testing.T) {
	inst := chdb.ForTest(t)
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	rec := &recorder{}
	oldRec, err := openRecording(ctx, env.Stack.ClickHouseDSN, rec)
	if err != nil {
		t.Fatal(err)
	}
	defer oldRec.Close()
	cur, err := stores.OpenClickHouse(ctx, inst.DSN)
	if err != nil {
		t.Fatal(err)
	}
	defer cur.Close()
	rdb1, err := stores.OpenRedis(ctx, strings.TrimSuffix(env.Stack.RedisURL, "/0")+"/1")
	if err != nil {
		t.Fatal(err)
	}
	defer rdb1.Close()
	old := &engine{name: "18.16", ch: oldRec, rdb: env.Redis, group: "chdb-harness-18.16"}
	current := &engine{name: inst.Version, ch: cur, rdb: rdb1, group: "chdb-harness-current"}
	engines := []*engine{old, current}
	t.Logf("ClickHouse 18.16 (clickhouse-server) against ClickHouse %s (chDB)", inst.Version)

	// Migrations: testenv applied them to 18.16; the current engine gets them here.
	if _, err := migrations.Up(ctx, cur, nil); err != nil {
		t.Fatalf("migrations on the current engine: %v", err)
	}
	compareMigrations(ctx, t, env.ClickHouse, cur)
	if all, err := migrations.All(); err == nil {
		t.Logf("migrations: %d applied on both engines, from %04d_%s to %04d_%s", len(all), all[0].Version, all[0].Name, all[len(all)-1].Version, all[len(all)-1].Name)
	}

	now := time.Now().UTC().Truncate(time.Second)
	end := now.Truncate(time.Hour)
	var corpus bytes.Buffer
	if _, err := gen.Generate(gen.Config{Events: harnessEvents, Seed: 12, End: end, Reports: true}, &corpus); err != nil {
		t.Fatal(err)
	}
	corpus.Write(overLimitLines(end.Add(-2 * time.Hour))) // a schema over a limit: its stored verdict
	if _, err := ingest.PublishFile(ctx, env.Publisher, &corpus, "chdb-harness.jsonl", nil); err != nil {
		t.Fatal(err)
	}
	consumersOf := map[*engine]*consumers.Consumer{}
	for _, e := range engines {
		c, err := consumers.New(consumers.Config{
			Brokers: env.Stack.KafkaBrokers, GroupID: e.group, Redis: e.rdb, ClickHouse: e.ch,
			DeadLetters: env.Publisher, BatchWait: 100 * time.Millisecond, IdleToDrain: 500 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		consumersOf[e] = c
	}
	// Each consumer dead-letters the corpus's bad events itself and reads the other's copies
	// too, so both drain twice; the resets' audit events need one more round.
	drainAll := func() {
		for _, e := range engines {
			began := time.Now()
			if err := consumersOf[e].RunUntilDrained(ctx); err != nil {
				t.Fatalf("consumer on %s: %v", e.name, err)
			}
			t.Logf("consumer on %s drained in %s", e.name, time.Since(began).Round(time.Millisecond))
		}
	}
	drainAll()
	drainAll()
	resetHashes := resetSome(ctx, t, old, env.Publisher)
	drainAll()

	// Ops jobs on both engines with one clock.
	reports := map[string][2]any{}
	for i, e := range engines {
		runs, err := demo.RecordSchemaChecks(ctx, e.ch, end)
		if err != nil {
			t.Fatalf("schema checks on %s: %v", e.name, err)
		}
		rep, err := suppression.Reconcile(ctx, e.ch, e.rdb, now, false)
		if err != nil {
			t.Fatalf("reconcile on %s: %v", e.name, err)
		}
		audit, err := suppression.AuditContactPolicy(ctx, e.ch, time.Time{}, now, false)
		if err != nil {
			t.Fatalf("contact-policy audit on %s: %v", e.name, err)
		}
		sealed, err := rollup.SealClosedHours(ctx, e.ch, now)
		if err != nil {
			t.Fatalf("seal of the closed hours on %s: %v", e.name, err)
		}
		if len(sealed.Hours) == 0 {
			t.Errorf("seal of the closed hours on %s sealed no hour; the readers' sealed branch goes unchecked", e.name)
		}
		lintRuns, err := demo.RecordCampaignLint(ctx, e.ch, end)
		if err != nil {
			t.Fatalf("campaign flag lint on %s: %v", e.name, err)
		}
		alerted, err := evaluateAlerts(ctx, e.ch, e.rdb, "harness", now)
		if err != nil {
			t.Fatalf("alerts on %s: %v", e.name, err)
		}
		if len(alerted.Transitions) == 0 || alerted.Sent == 0 || len(alerted.Errors) > 0 {
			t.Errorf("alerts on %s fired nothing or failed: %+v", e.name, alerted)
		}
		if _, err := demo.RecordIntentPromptVersions(ctx, e.ch, end); err != nil {
			t.Fatalf("intent prompt versions on %s: %v", e.name, err)
		}
		intentsReport, err := intents.Run(ctx, e.ch, end.Add(-gen.Window-2*time.Hour), end)
		if err != nil {
			t.Fatalf("intents report on %s: %v", e.name, err)
		}
		var intentsExport bytes.Buffer
		figs, err := intents.Export(ctx, e.ch, end.Add(-gen.Window-2*time.Hour), end, map[string]string{}, &intentsExport)
		if err != nil {
			t.Fatalf("intents export on %s: %v", e.name, err)
		}
		intentsReport.JoinGoals(figs)
		if len(intentsReport.Versions) < 2 {
			t.Errorf("intents report on %s: %d versions, want calls under the SDK default and a recorded version", e.name, len(intentsReport.Versions))
		}
		for name, v := range map[string]any{"schema check runs": runs, "contact-policy audit": audit, "seal of the closed hours": sealed,
			"campaign flag lint runs": lintRuns, "alerts": alerted, "intents report": intentsReport, "intents export": intentsExport.String()} {
			pair := reports[name]
			pair[i] = v
			reports[name] = pair
		}
		if i == 0 {
			// The 18.16 side holds the resets' Redis writes; reconcile must find nothing
			// else to repair there, and must rebuild the same state on the current side.
			if rep.Repairs() != 0 {
				t.Errorf("reconcile on 18.16 repaired %d records of a consistent Redis: %+v", rep.Repairs(), rep)
			}
		}
	}
	for name, pair := range reports {
		if !reflect.DeepEqual(pair[0], pair[1]) {
			a, _ := json.Marshal(pair[0])
			b, _ := json.Marshal(pair[1])
			t.Errorf("%s differs:\n18.16:   %s\ncurrent: %s", name, a, b)
		}
	}
	compareRedis(ctx, t, old.rdb, current.rdb)

	// The payload version in force (sql/campaigns/payload_version_at.sql, read by the campaign
	// flag lint's callers and the intent trials) before, between and after the demo's changes.
	for _, at := range []time.Time{end.Add(-40 * time.Hour), end.Add(-20 * time.Hour), end.Add(-2 * time.Hour), end} {
		for _, variant := range []string{"onboarding-2026q4", "sql-editor-research"} {
			compareQuery(ctx, t, fmt.Sprintf("payload_version_at %s %s", variant, at), env.ClickHouse, cur,
				sql.Campaigns("payload_version_at"), campaigns.RecruitmentFlag, variant, at)
		}
	}

	// The ops `suppression show` of the reset identities: their history and reset audit.
	for _, h := range resetHashes {
		var shown [2]string
		for i, e := range engines {
			rep, err := suppression.Show(ctx, suppression.ShowOptions{Redis: e.rdb, ClickHouse: e.ch, IdentityHash: h})
			if err != nil {
				t.Fatalf("suppression show on %s: %v", e.name, err)
			}
			if len(rep.History) == 0 || len(rep.Resets) == 0 {
				t.Errorf("suppression show %s on %s: %d history events, %d resets; want both", h, e.name, len(rep.History), len(rep.Resets))
			}
			data, _ := json.Marshal(struct{ History, Resets any }{rep.History, rep.Resets})
			shown[i] = string(data)
		}
		if shown[0] != shown[1] {
			t.Errorf("suppression show %s differs:\n18.16:   %s\ncurrent: %s", h, shown[0], shown[1])
		}
	}

	// What the demo reads back to compare with the generator's expected outcome.
	var summaries [2]string
	for i, e := range engines {
		observed, err := report.Observe(ctx, e.ch, e.rdb)
		if err != nil {
			t.Fatalf("reading the stores back on %s: %v", e.name, err)
		}
		summary, err := report.BuildSummary(ctx, e.ch, observed, 10)
		if err != nil {
			t.Fatalf("demo summary on %s: %v", e.name, err)
		}
		data, _ := json.MarshalIndent(struct{ Observed, Summary any }{observed, summary}, "", " ")
		summaries[i] = string(data)
	}
	if summaries[0] != summaries[1] {
		t.Errorf("the stores read back differ:\n%s", diff(lines(summaries[0]), lines(summaries[1])))
	}

	t.Run("tables", func(t *testing.T) { compareTables(ctx, t, env.ClickHouse, cur) })
	t.Run("queries", func(t *testing.T) { compareQueries(ctx, t, env.ClickHouse, oldRec, cur, rec, end) })
	t.Run("statements", func(t *testing.T) { compareStatements(ctx, t, env.ClickHouse, cur, rec) })
	// Deprecated syntax or obsolete settings that still work leave a warning.
	if warnings, err := readAll(ctx, cur, "SELECT message FROM system.warnings"); err != nil {
		t.Errorf("reading the current engine's warnings: %v", err)
	} else if len(warnings.Rows) > 0 {
		t.Errorf("the current engine warns after all of the above:\n%s", strings.Join(warnings.Rows, "\n"))
	}
	if t.Failed() {
		t.Logf("chdbserver log:\n%s", inst.Log())
	}
}

// compareMigrations checks both engines recorded every migration and hold the same tables
// with the same columns.
func compareMigrations(ctx context.Context, t *testing.T, old, cur driver.Conn) {
	t.Helper()
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	for _, conn := range []driver.Conn{old, cur} {
		applied, err := migrations.AppliedVersions(ctx, conn)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range all {
			if a, ok := applied[m.Version]; !ok || a.Checksum != m.Checksum {
				t.Errorf("migration %04d_%s not recorded as applied: %+v", m.Version, m.Name, a)
			}
		}
	}
	// The cluster variant (migrate up --cluster: ON CLUSTER, Replicated* engines) needs a
	// Keeper to create; the current engine parses every statement of it.
	for _, m := range all {
		statements, err := m.ForCluster("mcpulse_cluster")
		if err != nil {
			t.Fatal(err)
		}
		for i, st := range statements {
			if err := cur.Exec(ctx, "EXPLAIN AST "+st); err != nil {
				t.Errorf("migration %04d_%s statement %d, cluster variant: the current engine cannot parse it: %v\n%s", m.Version, m.Name, i+1, err, st)
			}
		}
	}
	const schema = `SELECT t.name, t.engine, c.name, c.type FROM system.columns AS c
ALL INNER JOIN (SELECT name, engine FROM system.tables WHERE database = 'mcpulse') AS t ON t.name = c.table
WHERE c.database = 'mcpulse'`
	compareQuery(ctx, t, "schema (tables, engines, column types)", old, cur, schema)
}

// resetSome resets two identities with responses through the ops reset path on the 18.16
// side (Redis database 0); the audit events reach both engines through Kafka, and reconcile
// rebuilds the current side's Redis from them.
func resetSome(ctx context.Context, t *testing.T, e *engine, pub *ingest.Publisher) []string {
	t.Helper()
	rows, err := e.ch.Query(ctx, `SELECT identity_hash FROM mcpulse.recruitment_events
WHERE kind = 'response' GROUP BY identity_hash ORDER BY identity_hash LIMIT 2`)
	if err != nil {
		t.Fatal(err)
	}
	var hashes []string
	for rows.Next() {
		var h string
		if err := rows.Scan(&h); err != nil {
			t.Fatal(err)
		}
		hashes = append(hashes, h)
	}
	rows.Close()
	if len(hashes) != 2 {
		t.Fatalf("the corpus has %d identities with a response, want 2 to reset", len(hashes))
	}
	for _, h := range hashes {
		if _, err := suppression.Reset(ctx, suppression.ResetOptions{
			Redis: e.rdb, ClickHouse: e.ch, Publisher: pub, IdentityHash: h,
			Actor: "chdb-harness", Reason: "compare engines",
		}); err != nil {
			t.Fatal(err)
		}
	}
	return hashes
}

// compareRedis checks both Redis databases hold the same suppression keys and values, and
// the same keys with and without a TTL.
func compareRedis(ctx context.Context, t *testing.T, a, b redis.UniversalClient) {
	t.Helper()
	dump := func(rdb redis.UniversalClient) []string {
		var out []string
		iter := rdb.Scan(ctx, 0, "mcp:interview:*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			v, err := rdb.Get(ctx, k).Result()
			if err != nil {
				t.Fatalf("GET %s: %v", k, err)
			}
			var parsed any
			if json.Unmarshal([]byte(v), &parsed) == nil {
				// Field order is the writer's (a reset's script or reconcile), not a fact.
				data, _ := json.Marshal(parsed)
				v = string(data)
			}
			ttl, err := rdb.TTL(ctx, k).Result()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s = %s (expires: %v)", k, v, ttl > 0))
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		sort.Strings(out)
		return out
	}
	want, got := &result{Rows: dump(a)}, &result{Rows: dump(b)}
	if len(want.Rows) == 0 {
		t.Error("no suppression record in Redis after the corpus: the comparison proves nothing")
	}
	if d := diff(want, got); d != "" {
		t.Errorf("suppression state in Redis after reconcile differs:\n%s", d)
	}
}

// compareTables compares every table of database mcpulse: AggregatingMergeTree states merged
// per key, ReplacingMergeTree tables read FINAL, wall-clock columns left out.
func compareTables(ctx context.Context, t *testing.T, old, cur driver.Conn) {
	rows, err := old.Query(ctx, `SELECT t.name, t.engine, c.name, c.type FROM system.columns AS c
ALL INNER JOIN (SELECT name, engine FROM system.tables WHERE database = 'mcpulse') AS t ON t.name = c.table
WHERE c.database = 'mcpulse'`)
	if err != nil {
		t.Fatal(err)
	}
	type col struct{ name, typ string }
	engines := map[string]string{}
	columns := map[string][]col{}
	for rows.Next() {
		var table, engineName, name, typ string
		if err := rows.Scan(&table, &engineName, &name, &typ); err != nil {
			t.Fatal(err)
		}
		engines[table] = engineName
		columns[table] = append(columns[table], col{name, typ})
	}
	rows.Close()
	var tables []string
	for table := range columns {
		tables = append(tables, table)
	}
	sort.Strings(tables)
	compared := 0
	for _, table := range tables {
		engineName := engines[table]
		if engineName == "View" || engineName == "MaterializedView" || rollupBookkeepingTables[table] {
			continue
		}
		cumulative := slices.ContainsFunc(columns[table], func(c col) bool { return c.name == "before_as_of" })
		var keys, selected []string
		aggregated := false
		for _, c := range columns[table] {
			if wallClockColumns[c.name] || sealBookkeepingColumns[c.name] || cumulative && rollupBookkeepingColumns[c.name] {
				continue
			}
			if fn, ok := strings.CutPrefix(c.typ, "AggregateFunction("); ok {
				fn, _, _ = strings.Cut(fn, ",")
				selected = append(selected, fmt.Sprintf("%sMerge(%s) AS %s", strings.TrimSpace(fn), c.name, c.name))
				aggregated = true
				continue
			}
			keys = append(keys, c.name)
			selected = append(selected, c.name)
		}
		q := fmt.Sprintf("SELECT %s FROM mcpulse.%s", strings.Join(selected, ", "), table)
		switch {
		case aggregated:
			q += " GROUP BY " + strings.Join(keys, ", ")
		case strings.Contains(engineName, "Replacing"):
			q = fmt.Sprintf("SELECT %s FROM mcpulse.%s FINAL", strings.Join(selected, ", "), table)
		}
		compareQuery(ctx, t, "table "+table, old, cur, q)
		compared++
	}
	t.Logf("compared %d tables", compared)
	if compared == 0 {
		t.Error("no table compared")
	}
}

// compareQueries runs every query in sql/queries on both engines: those a dashboard panel
// names with the panel's parameters bound as dashboards.Run binds them (for every filter
// set), the others without parameters, or as their callers bound them during this run.
func compareQueries(ctx context.Context, t *testing.T, old, oldRec, cur driver.Conn, rec *recorder, end time.Time) {
	ds, err := dashboards.Load()
	if err != nil {
		t.Fatal(err)
	}
	var campaign, client, tool string
	if err := old.QueryRow(ctx, `SELECT
    (SELECT any(campaign_id) FROM mcpulse.recruitment_events WHERE campaign_id != ''),
    (SELECT any(client_name) FROM mcpulse.tool_calls WHERE client_name != ''),
    (SELECT any(tool_name) FROM mcpulse.tool_calls WHERE notEmpty(counted_ignored_keys))`).Scan(&campaign, &client, &tool); err != nil {
		t.Fatal(err)
	}
	filters := []dashboards.Filters{
		{},
		{From: end.Add(-36 * time.Hour), To: end.Add(-2 * time.Hour), Campaign: campaign, Client: client, Tool: tool, Limit: 3},
	}
	bound := map[string]bool{}
	for _, d := range ds {
		for _, p := range d.Panels {
			for _, q := range []string{p.Query, p.RawQuery} {
				if q == "" {
					continue
				}
				bound[q] = true
				for i, f := range filters {
					args := f.Args(p)
					// Through the recording connection too, so the text sent is kept.
					if _, err := readAll(ctx, oldRec, sql.Query(q), args...); err != nil {
						t.Errorf("%s (panel %s/%s, filters #%d) fails on 18.16: %v", q, d.Name, p.ID, i, err)
						continue
					}
					compareQuery(ctx, t, fmt.Sprintf("%s (panel %s/%s, filters #%d)", q, d.Name, p.ID, i), old, cur, sql.Query(q), args...)
				}
			}
		}
	}
	statements := rec.statements()
	plain, byCaller := 0, 0
	for _, name := range sql.Names() {
		if bound[name] {
			continue
		}
		text := sql.Query(name)
		n, err := dashboards.CountPlaceholders(text)
		if err != nil {
			t.Errorf("sql/queries/%s.sql: %v", name, err)
			continue
		}
		if n == 0 {
			compareQuery(ctx, t, name, old, cur, text)
			plain++
			continue
		}
		byCaller++
		re := boundBy(text)
		found := 0
		for _, s := range statements {
			if re.MatchString(strings.TrimSpace(s)) {
				compareQuery(ctx, t, fmt.Sprintf("%s (as bound by its caller)", name), old, cur, s)
				found++
			}
		}
		if found == 0 {
			t.Errorf("sql/queries/%s.sql takes %d parameters, but no dashboard panel names it and no code this test runs bound it: run its caller in TestCurrentEngineAgreesWith1816", name, n)
		}
	}
	t.Logf("sql/queries: %d files named by %d dashboards' panels (each with %d filter sets), %d without parameters, %d as bound by their callers",
		len(bound), len(ds), len(filters), plain, byCaller)
}

// compareStatements replays on both engines every row-returning statement mcpulse's code sent
// to 18.16 during the run (bound texts), so reads written in Go are checked too.
func compareStatements(ctx context.Context, t *testing.T, old, cur driver.Conn, rec *recorder) {
	n := 0
	for _, s := range rec.statements() {
		if !chdb.ReturnsRows(s) {
			continue
		}
		if rollupStatement(s) {
			// Reads of the rollup write bookkeeping, whose rows differ between the two runs
			// (see rollupBookkeepingColumns): both engines must run them.
			if _, err := readAll(ctx, old, s); err != nil {
				t.Errorf("rollup statement fails on 18.16: %v\n%s", err, s)
			}
			if _, err := readAll(ctx, cur, s); err != nil {
				t.Errorf("rollup statement fails on the current engine: %v\n%s", err, s)
			}
			n++
			continue
		}
		compareQuery(ctx, t, "statement", old, cur, s)
		n++
	}
	t.Logf("replayed %d distinct statements", n)
	if n == 0 {
		t.Error("no statement recorded")
	}
}

// compareQuery runs query on both engines and reports any difference.
func compareQuery(ctx context.Context, t *testing.T, what string, old, cur driver.Conn, query string, args ...any) {
	t.Helper()
	want, errOld := readAll(ctx, old, query, args...)
	got, errCur := readAll(ctx, cur, query, args...)
	switch {
	case errOld != nil && errCur != nil:
		t.Errorf("%s fails on both engines:\n18.16:   %v\ncurrent: %v\n%s", what, errOld, errCur, query)
	case errOld != nil:
		t.Errorf("%s fails on 18.16 only: %v\n%s", what, errOld, query)
	case errCur != nil:
		t.Errorf("%s fails on the current engine only: %v\n%s", what, errCur, query)
	default:
		if d := diff(want, got); d != "" {
			t.Errorf("%s differs:\n%s%s", what, d, query)
		}
	}
}

// lines is text as a result of sorted lines, for diff.
func lines(text string) *result {
	rows := strings.Split(text, "\n")
	sort.Strings(rows)
	return &result{Rows: rows}
}

// rollupStatement reports whether s is one of the rollup writer's statements (sql/rollup/*.sql),
// recognised by its first line.
func rollupStatement(s string) bool {
	for _, name := range sql.RollupNames() {
		first, _, _ := strings.Cut(sql.Rollup(name), "\n")
		if strings.HasPrefix(strings.TrimSpace(s), first) {
			return true
		}
	}
	return false
}
