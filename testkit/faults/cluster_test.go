//go:build linux

package faults

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"

	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// zooKeeperOutage is how long the cluster's ZooKeeper stays stopped.
const zooKeeperOutage = 20 * time.Second

// On a replicated ClickHouse cluster (one shard, two replicas, ZooKeeper; migrated with
// --cluster), a consumer process reaching both replicas through one DSN, as docker-compose.yml's
// services do, loses and doubles nothing through three faults in sequence, each once the
// stored rows pass a seeded threshold inside the part of the corpus being consumed:
//
//  1. the replica the consumer writes through is SIGKILLed (the consumer's next connections go
//     to the other one), a part is published while it is down, and it is started again on its
//     data directory and must catch up;
//  2. ZooKeeper is stopped for 20 s (inserts into the replicated tables fail meanwhile; reads
//     go on) and started again, with a part published just before it stopped;
//  3. the consumer dies while a streamed batch's INSERTs are open, then its replacement dies
//     between two inserts of a batch (the fault hook, partial_test.go: the process exits at
//     that point, flushing and sending nothing more), then a third member is SIGKILLed once
//     the stored rows pass a threshold in the last part, and a fourth finishes the corpus.
//
// After each fault, once the group has committed everything published and both replicas have
// synced, each replica's raw tables read with FINAL hold exactly the distinct events published
// so far, per table, and every rollup equals its recomputation from the raw tables; at the end
// every figure in ClickHouse and Redis equals the corpus's expected outcome (verify, through
// the first replica; then through the second, once the closed hours are sealed). Raw rows
// stored twice (visible without FINAL: rawDuplicatesWithoutFinal) are measured on both
// replicas after each fault; in the raw tables deduplicated at insert they must be none after
// the first fault, and after the second unless a streamed batch failed meanwhile
// (streamsFailed says why those store rows twice); after the third they are logged
// (docs/scaling.md has the measured counts).
func TestClusterReplicaKilledZooKeeperStoppedAndConsumerCrashedMidInsertLoseAndDoubleNothing(t *testing.T) {
	began := time.Now()
	p := newPipeline(t, 30000, 29, 6, func(c *stack.Config) { c.Replicas = 2 })
	cc := p.stack.ClickHouseCluster
	t.Logf("cluster %s of %d replicas ready and migrated after %s; members reach it through %s", cc.Name, len(cc.Hosts), time.Since(began).Round(time.Millisecond), p.dsn)
	prefixes := p.rawRowsByPrefix()
	var dups []map[string]int64 // per host, at the last check
	rng := rand.New(rand.NewPCG(29, 3))
	// failures counts the members' records of a failed store, each followed by a retry.
	failures := func() int {
		return len(p.records("storing a batch failed; consumption paused, retrying",
			"storing a chunk of a streamed batch failed; the chunks before it are stored and committed, and it is retried on its own",
			"storing a streamed batch failed; rejoining the group to read it again one chunk per batch"))
	}
	// streamsFailed is checkReplicas' lenient for a fault that stores raw rows twice only
	// through a streamed batch that failed (since it was last called): "" when none did. Such a
	// batch is read again one chunk per batch (other parts than its first attempt's INSERTs
	// stored), a chunk that failed mid-batch is stored on its own, and a response stored
	// before its invitation in the first attempt finds it in the replay (docs/scaling.md).
	streamsSeen := 0
	streamsFailed := func() string {
		n := len(p.records("storing a chunk of a streamed batch failed; the chunks before it are stored and committed, and it is retried on its own",
			"storing a streamed batch failed; rejoining the group to read it again one chunk per batch"))
		added := n - streamsSeen
		streamsSeen = n
		if added == 0 {
			return ""
		}
		return fmt.Sprintf("after %d streamed batches failed (docs/scaling.md)", added)
	}
	step := func(i int, what string) {
		t.Helper()
		at := p.threshold(rng, i)
		n := p.waitRows(what, func(n int64) bool { return n >= at })
		t.Logf("%s at %d stored rows (threshold %d)", what, n, at)
	}

	// 1. The replica the consumer writes through is killed and comes back.
	p.publishNext()
	m := p.start()
	step(0, "replica "+cc.Hosts[0].Name()+" is SIGKILLed")
	if err := cc.KillHost(0); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	p.publishNext() // consumed while the replica is down
	failover := p.resumed(killed)
	t.Logf("with %s down, the consumer stored again through %s %s after the kill", cc.Hosts[0].Name(), cc.Hosts[1].Name(), failover.Round(time.Millisecond))
	restarted := time.Now()
	if err := cc.StartHost(p.ctx, 0); err != nil {
		t.Fatal(err)
	}
	up := time.Since(restarted)
	caughtUp := p.settle()
	t.Logf("fault 1: %s answered %s after its start; the group drained and both replicas were in sync %s after it; %d failed stores retried", cc.Hosts[0].Name(),
		up.Round(time.Millisecond), caughtUp.Sub(restarted).Round(time.Millisecond), failures())
	before := failures()
	p.checkReplicas("after a replica was killed and restarted", prefixes[p.published-1], &dups, streamsFailed())

	// 2. ZooKeeper stops for zooKeeperOutage.
	p.publishNext()
	step(2, "ZooKeeper stops")
	p.publishNext() // consumed once ZooKeeper is back
	if err := cc.StopZooKeeper(); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(zooKeeperOutage)
	if err := cc.StartZooKeeper(p.ctx); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	resumed := p.resumed(back)
	caughtUp = p.settle()
	t.Logf("fault 2: ZooKeeper down %s; the consumer stored again %s after it was back, the group drained and both replicas were in sync %s after it; %d failed stores retried",
		back.Sub(stopped).Round(time.Millisecond), resumed.Round(time.Millisecond), caughtUp.Sub(back).Round(time.Millisecond), failures()-before)
	p.checkReplicas("after ZooKeeper was stopped for "+zooKeeperOutage.String(), prefixes[p.published-1], &dups, streamsFailed())

	// 3. The consumer dies mid-insert, twice, then is SIGKILLed mid-batch, and is replaced.
	p.stop(m)
	p.publishNext()
	p.crashAt(1, "MCPULSE_FAULT_EXIT_AFTER_FLUSHES", "block", 3+rng.IntN(30), "--batch-size", "2000", "--batch-bytes", "65536")
	p.crashAt(2, "MCPULSE_FAULT_EXIT_AFTER_INSERTS", "insert", 2+rng.IntN(8), "--batch-size", "700")
	p.publishNext()
	m = p.start()
	step(5, m.name+" is SIGKILLed")
	p.kill(m)
	restarted = time.Now()
	p.start()
	p.settle()
	t.Logf("fault 3: the replacement member drained the group and both replicas were in sync %s after its start", time.Since(restarted).Round(time.Millisecond))
	// Measured after the crashes, not held to none: a batch stored from a partition's committed
	// offset and not committed is at times followed by the replay of another record beginning
	// there, likely one whose member died before its INSERTs ended, and the rest is read as it
	// comes (2 to 362 tool calls, 0 to 33 recruitment events in three runs: docs/scaling.md).
	_ = streamsFailed()
	p.checkReplicas("after the consumer died mid-insert twice and was SIGKILLed mid-batch", prefixes[p.published-1], &dups,
		"after the crashes (a replay that followed a stale record: docs/scaling.md)")

	p.drain()
	p.verify()
	host := p.ch
	p.ch = p.hostConn(1)
	p.compare("through " + cc.Hosts[1].Name())
	p.ch = host
	t.Logf("the whole test took %s", time.Since(began).Round(time.Millisecond))
}

// hostConn opens a connection to host i of the cluster alone, closed with the test.
func (p *pipeline) hostConn(i int) driver.Conn {
	p.t.Helper()
	conn, err := stores.OpenClickHouse(p.ctx, p.stack.ClickHouseCluster.Hosts[i].DSN)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { conn.Close() })
	return conn
}

// eventTables are the raw tables holding one row per distinct event, with the ingest.Rows
// field counting them.
var eventTables = []struct {
	name string
	rows func(*ingest.Rows) int
}{
	{"tool_calls", func(r *ingest.Rows) int { return len(r.ToolCalls) }},
	{"recruitment_events", func(r *ingest.Rows) int { return len(r.Recruitment) }},
	{"mcp_initialize_events", func(r *ingest.Rows) int { return len(r.Initialize) }},
	{"mcp_exceptions", func(r *ingest.Rows) int { return len(r.Exceptions) }},
	{"other_events", func(r *ingest.Rows) int { return len(r.OtherEvents) }},
	{"mcp_feedback", func(r *ingest.Rows) int { return len(r.Feedback) }},
	{"mcp_resource_prompt_events", func(r *ingest.Rows) int { return len(r.Resources) }},
	{"mcp_identify_events", func(r *ingest.Rows) int { return len(r.Identify) }},
	{"tools_list_events", func(r *ingest.Rows) int { return len(r.ToolsLists) }},
}

// rawRowsByPrefix returns, for each i, the rows each of eventTables must hold once parts[0..i]
// are consumed: the raw rows of the distinct valid events (by uuid) in those parts, as the
// consumer builds them (ingest.Rows.Append). The whole corpus's tool_calls and
// recruitment_events counts must equal the expected outcome's, or the test fails.
func (p *pipeline) rawRowsByPrefix() []map[string]int64 {
	p.t.Helper()
	seen := map[uuid.UUID]bool{}
	counts := map[string]int64{}
	var out []map[string]int64
	for _, part := range p.parts {
		for line := range bytes.SplitSeq(part, []byte("\n")) {
			ev, err := ingest.Parse(bytes.TrimSpace(line))
			if err != nil || seen[ev.UUID] {
				continue
			}
			seen[ev.UUID] = true
			var rows ingest.Rows
			rows.Append(ev, ingest.RowContext{})
			for _, t := range eventTables {
				counts[t.name] += int64(t.rows(&rows))
			}
		}
		out = append(out, maps.Clone(counts))
	}
	for _, table := range []string{"tool_calls", "recruitment_events"} {
		if got, want := counts[table], p.expected.Tables[table]; got != want {
			p.t.Fatalf("the corpus's distinct events give %d %s rows, the expected outcome %d", got, table, want)
		}
	}
	return out
}

// settle waits until the group has committed every partition to its end (its members keep
// running) and every replicated table of every host has synced with ZooKeeper's log
// (SYSTEM SYNC REPLICA), retrying a host that refuses (down, read-only, or ZooKeeper not yet
// back) until stepTimeout; it returns when that was.
func (p *pipeline) settle() time.Time {
	p.t.Helper()
	deadline := time.Now().Add(stepTimeout)
	p.waitCommitted(deadline, "commit what was published")
	for i, h := range p.stack.ClickHouseCluster.Hosts {
		for {
			err := p.syncReplica(i)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				p.t.Fatalf("%s did not sync within %s: %v", h.Name(), stepTimeout, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return time.Now()
}

// syncReplica runs SYSTEM SYNC REPLICA for every replicated table of host i, on a connection
// of its own.
func (p *pipeline) syncReplica(i int) error {
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	conn, err := stores.OpenClickHouse(ctx, p.stack.ClickHouseCluster.Hosts[i].DSN)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows, err := conn.Query(ctx, "SELECT database, table FROM system.replicas ORDER BY database, table")
	if err != nil {
		return err
	}
	var tables []string
	for rows.Next() {
		var db, table string
		if err := rows.Scan(&db, &table); err != nil {
			rows.Close()
			return err
		}
		tables = append(tables, db+"."+table)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(tables) == 0 {
		return fmt.Errorf("no replicated table")
	}
	for _, table := range tables {
		if err := conn.Exec(ctx, "SYSTEM SYNC REPLICA "+table); err != nil {
			return fmt.Errorf("SYSTEM SYNC REPLICA %s: %w", table, err)
		}
	}
	return nil
}

// checkReplicas requires, on each host, every event table read with FINAL to hold exactly
// want's rows and every rollup to equal its recomputation from the raw tables, and measures
// the raw duplicate rows each holds without FINAL (rawDuplicatesWithoutFinal), with how many
// more than *seen (the previous check's, per host; updated), and the parts holding them. The
// raw tables the consumer dedups at insert (migrations.RawTables) must have none more, unless
// lenient says why this fault may leave some (then they are logged); dead_letters is only
// logged: a chunk's dead letters are inserted as it comes, before its batch is recorded, so a
// member that died before its commit leaves them to be inserted again in the chunks its
// successor reads, other blocks that no server drops (docs/scaling.md).
func (p *pipeline) checkReplicas(when string, want map[string]int64, seen *[]map[string]int64, lenient string) {
	p.t.Helper()
	saved := p.ch
	defer func() { p.ch = saved }()
	for i, h := range p.stack.ClickHouseCluster.Hosts {
		p.ch = p.hostConn(i)
		where := when + ", through " + h.Name()
		for _, t := range eventTables {
			var n uint64
			if err := p.ch.QueryRow(p.ctx, "SELECT count() FROM mcpulse."+t.name+" FINAL").Scan(&n); err != nil {
				p.t.Fatal(err)
			}
			if int64(n) != want[t.name] {
				p.t.Errorf("%s: %s holds %d events (FINAL), want %d", where, t.name, n, want[t.name])
			}
		}
		mismatches, err := report.RollupMismatches(p.ctx, p.ch)
		if err != nil {
			p.t.Fatal(err)
		}
		for _, m := range mismatches {
			p.t.Errorf("%s: %s", where, m)
		}
		dups, err := rawDuplicatesWithoutFinal(p.ctx, p.ch)
		if err != nil {
			p.t.Fatal(err)
		}
		if len(*seen) <= i {
			*seen = append(*seen, map[string]int64{})
		}
		added := map[string]int64{}
		for table, n := range dups {
			if d := n - (*seen)[i][table]; d != 0 {
				added[table] = d
			}
		}
		(*seen)[i] = dups
		p.t.Logf("%s: raw duplicate rows without FINAL: %s (this fault: %s)", where, formatCounts(dups), formatCounts(added))
		for table := range added {
			p.t.Logf("%s: %s's parts holding rows stored twice: %s", where, table, duplicateParts(p.ctx, p.ch, table))
		}
		deduped := map[string]int64{}
		for table, n := range added {
			if slices.Contains(migrations.RawTables, table) {
				deduped[table] = n
			}
		}
		switch {
		case len(deduped) > 0 && lenient == "":
			p.t.Errorf("%s: raw rows stored twice, visible without FINAL: %s", where, formatCounts(deduped))
		case len(deduped) > 0:
			p.t.Logf("%s: raw rows stored twice, visible without FINAL: %s, %s", where, formatCounts(deduped), lenient)
		}
	}
}

// rawTables are the tables the consumer inserts raw rows into, each with the column its
// ReplacingMergeTree collapses redelivered rows by (served_tool_schemas_in is a Null table).
var rawTables = []struct{ name, key string }{
	{"tool_calls", "uuid"},
	{"recruitment_events", "uuid"},
	{"mcp_initialize_events", "uuid"},
	{"mcp_exceptions", "uuid"},
	{"other_events", "uuid"},
	{"mcp_feedback", "uuid"},
	{"mcp_resource_prompt_events", "uuid"},
	{"mcp_identify_events", "uuid"},
	{"tools_list_events", "uuid"},
	{"dead_letters", "dead_letter_id"},
}

// rawDuplicatesWithoutFinal returns, per raw table (rawTables, in database mcpulse), how many
// of its stored rows repeat an earlier row's key: count() - uniqExact(key), read without
// FINAL, so rows a fault made the consumer insert twice count until a merge collapses them.
// Tables with none are left out. Errors are the query's. Read on one server: a cluster's
// replicas are asked one by one.
func rawDuplicatesWithoutFinal(ctx context.Context, conn driver.Conn) (map[string]int64, error) {
	dups := map[string]int64{}
	for _, t := range rawTables {
		var rows, distinct uint64
		if err := conn.QueryRow(ctx, fmt.Sprintf("SELECT count(), uniqExact(%s) FROM %s.%s", t.key, migrations.Database, t.name)).Scan(&rows, &distinct); err != nil {
			return nil, fmt.Errorf("duplicates in %s: %w", t.name, err)
		}
		if rows > distinct {
			dups[t.name] = int64(rows - distinct)
		}
	}
	return dups, nil
}

// duplicateParts describes the parts of raw table table (in database mcpulse) holding rows whose
// key another row repeats, one line per part: its name, Kafka partition, offsets and rows of
// those, and its rows in all; and how many more distinct rows than keys the repeated keys
// have (0: every copy is identical). Read on one server; an error is described in the result.
func duplicateParts(ctx context.Context, conn driver.Conn, table string) string {
	key := "uuid"
	cols := "any(kafka_partition), min(kafka_offset), max(kafka_offset)"
	if table == "dead_letters" {
		key, cols = "dead_letter_id", "toInt32(-1), toInt64(min(dlq_offset)), toInt64(max(dlq_offset))"
	}
	q := fmt.Sprintf(`SELECT _part, %s, count(), any(total) FROM %s.%s
ANY INNER JOIN (SELECT _part, count() AS total FROM %[2]s.%[3]s GROUP BY _part) AS parts USING _part
WHERE %[4]s IN (SELECT %[4]s FROM %[2]s.%[3]s GROUP BY %[4]s HAVING count() > 1)
GROUP BY _part ORDER BY _part`, cols, migrations.Database, table, key)
	rows, err := conn.Query(ctx, q)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var (
			part          string
			partition     int32
			first, last   int64
			dups, inTotal uint64
		)
		if err := rows.Scan(&part, &partition, &first, &last, &dups, &inTotal); err != nil {
			return "(" + err.Error() + ")"
		}
		out = append(out, fmt.Sprintf("%s (partition %d, offsets %d-%d): %d of its %d rows", part, partition, first, last, dups, inTotal))
	}
	var differing int64
	repeated := fmt.Sprintf("SELECT %s FROM %s.%s GROUP BY %[1]s HAVING count() > 1", key, migrations.Database, table)
	if err := conn.QueryRow(ctx, fmt.Sprintf(`SELECT toInt64((SELECT count() FROM (SELECT DISTINCT * FROM %s.%s WHERE %s IN (%s))))
    - toInt64((SELECT count() FROM (%[4]s)))`, migrations.Database, table, key, repeated)).Scan(&differing); err != nil {
		out = append(out, "("+err.Error()+")")
	} else {
		out = append(out, fmt.Sprintf("%d more distinct rows than repeated keys", differing))
	}
	return strings.Join(out, "; ")
}

// formatCounts renders counts as "a=1 b=2" in key order, or "none".
func formatCounts(counts map[string]int64) string {
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for k, v := range counts {
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
