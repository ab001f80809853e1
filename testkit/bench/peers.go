package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/migrations"
)

// BenchDatabase holds the Kafka-engine peer's tables (dropped and re-created by each run).
const BenchDatabase = "mcpulse_bench"

// kafkaEngineDDL returns the statements that set the Kafka-engine peer up, in order; the
// materialized view comes last, since the Kafka engine starts consuming when a view is
// attached. Each Kafka message is one JSONEachRow row: the envelope's fields and, as dotted
// columns ("properties.$mcp_tool_name"), the properties the view reads, which needs
// input_format_import_nested_json (checkPeerSettings). The stored table is created AS
// mcpulse.tool_calls, and the view keeps only $mcp_tool_call events.
//
// 18.16 only knows the positional engine arguments (broker_list, topic_list, group_name,
// format) and takes format settings from the server's default profile; current releases take
// the SETTINGS form, format settings included.
func kafkaEngineDDL(major int, brokers []string, topic, group string, plan *peerPlan) []string {
	db := BenchDatabase
	engine := fmt.Sprintf(`Kafka(%s, %s, %s, 'JSONEachRow')`,
		sqlString(strings.Join(brokers, ",")), sqlString(topic), sqlString(group))
	if major >= 19 {
		engine = fmt.Sprintf(`Kafka SETTINGS kafka_broker_list = %s, kafka_topic_list = %s, kafka_group_name = %s, kafka_format = 'JSONEachRow', input_format_import_nested_json = 1, input_format_skip_unknown_fields = 1`,
			sqlString(strings.Join(brokers, ",")), sqlString(topic), sqlString(group))
	}
	cols := make([]string, len(plan.input))
	for i, c := range plan.input {
		cols[i] = "`" + c[0] + "` " + c[1]
	}
	return []string{
		`DROP TABLE IF EXISTS ` + db + `.tool_calls_mv`,
		`DROP TABLE IF EXISTS ` + db + `.tool_calls_kafka`,
		`DROP TABLE IF EXISTS ` + db + `.tool_calls`,
		`CREATE DATABASE IF NOT EXISTS ` + db,
		`CREATE TABLE ` + db + `.tool_calls_kafka (` + strings.Join(cols, ", ") + `) ENGINE = ` + engine,
		`CREATE TABLE ` + db + `.tool_calls AS ` + migrations.Database + `.tool_calls`,
		`CREATE MATERIALIZED VIEW ` + db + `.tool_calls_mv TO ` + db + `.tool_calls AS SELECT
    ` + strings.Join(plan.selects, ",\n    ") + `
FROM ` + db + `.tool_calls_kafka
WHERE event = '$mcp_tool_call'`,
	}
}

// sqlString quotes s as a ClickHouse string literal.
func sqlString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

// serverMajor returns the ClickHouse server's major version (18 for 18.16.1).
func serverMajor(ctx context.Context, ch driver.Conn) (int, string, error) {
	var v string
	if err := ch.QueryRow(ctx, "SELECT version()").Scan(&v); err != nil {
		return 0, "", err
	}
	major, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0])
	if err != nil {
		return 0, v, fmt.Errorf("ClickHouse version %q: %w", v, err)
	}
	return major, v, nil
}

// checkPeerSettings fails when an 18.x server's default profile lacks
// input_format_import_nested_json=1: its Kafka tables take format settings from there only, and
// without it the peer would store every property empty. The embedded stack sets it.
func checkPeerSettings(ctx context.Context, ch driver.Conn) error {
	major, version, err := serverMajor(ctx, ch)
	if err != nil || major >= 19 {
		return err
	}
	var v string
	if err := ch.QueryRow(ctx, "SELECT value FROM system.settings WHERE name = 'input_format_import_nested_json'").Scan(&v); err != nil {
		return fmt.Errorf("ClickHouse %s: read input_format_import_nested_json: %w", version, err)
	}
	if v != "1" {
		return fmt.Errorf("ClickHouse %s: the Kafka-engine peer needs input_format_import_nested_json=1 in the server's default profile "+
			"(a users.d file: <yandex><profiles><default><input_format_import_nested_json>1</...></default></profiles></yandex>; the embedded stack writes one), "+
			"or run with --skip-peers", version)
	}
	return nil
}

// describe lists a table's columns in order.
func describe(ctx context.Context, ch driver.Conn, table string) ([]tableColumn, error) {
	rows, err := ch.Query(ctx, "DESCRIBE TABLE "+table)
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", table, err)
	}
	defer rows.Close()
	var out []tableColumn
	for rows.Next() {
		var c tableColumn
		// name, type, default_type, default_expression, and in newer releases more.
		vals := make([]any, len(rows.Columns()))
		var skip string
		for i := range vals {
			vals[i] = &skip
		}
		vals[0], vals[1], vals[2] = &c.Name, &c.Type, &c.DefaultKind
		if err := rows.Scan(vals...); err != nil {
			return nil, fmt.Errorf("describe %s: %w", table, err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// runKafkaEngine sets the Kafka table, the copy of tool_calls and the view up, with group
// starting at starts, and waits until the copy holds n rows. The time runs from the view's creation (when consumption starts) to
// the poll that sees n rows, the same "queryable" end as mcpulse's phase. It returns the
// columns the peer left at their default.
func runKafkaEngine(ctx context.Context, ch driver.Conn, brokers []string, group string, starts map[string]map[int]int64, n int) (Phase, []string, error) {
	major, version, err := serverMajor(ctx, ch)
	if err != nil {
		return Phase{}, nil, err
	}
	columns, err := describe(ctx, ch, migrations.Database+".tool_calls")
	if err != nil {
		return Phase{}, nil, err
	}
	plan, err := planPeer(columns)
	if err != nil {
		return Phase{}, nil, err
	}
	if len(plan.unmapped) > 0 {
		return Phase{}, nil, fmt.Errorf("tool_calls columns %s have no rule in the Kafka-engine peer: add them to peerColumns or peerDerived in testkit/bench/peercolumns.go",
			strings.Join(plan.unmapped, ", "))
	}
	// 18.16's Kafka engine starts a new group at the end of each partition (librdkafka's
	// auto.offset.reset default, "largest"); committing where the corpus starts makes it read
	// the corpus as a backlog, as a user migrating one would.
	if err := startGroup(ctx, brokers, group, map[string]map[int]int64{topicToolCalls: starts[topicToolCalls]}); err != nil {
		return Phase{}, nil, err
	}
	stmts := kafkaEngineDDL(major, brokers, topicToolCalls, group, plan)
	for _, q := range stmts[:len(stmts)-1] {
		if err := ch.Exec(ctx, q); err != nil {
			return Phase{}, nil, fmt.Errorf("ClickHouse %s: %w\n%s", version, err, q)
		}
	}
	meter := newCPUMeter()
	cpu0 := meter.read()
	start := time.Now()
	if err := ch.Exec(ctx, stmts[len(stmts)-1]); err != nil {
		return Phase{}, nil, fmt.Errorf("ClickHouse %s: %w\n%s", version, err, stmts[len(stmts)-1])
	}
	defer func() {
		// Stop the engine consuming; a cancelled ctx still needs the drop.
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = ch.Exec(dctx, `DROP TABLE IF EXISTS `+BenchDatabase+`.tool_calls_mv`)
		_ = ch.Exec(dctx, `DROP TABLE IF EXISTS `+BenchDatabase+`.tool_calls_kafka`)
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var (
		last     uint64
		lastSeen = start
	)
	for {
		select {
		case <-ctx.Done():
			return Phase{}, nil, fmt.Errorf("%d of %d rows arrived: %w", last, n, ctx.Err())
		case <-tick.C:
		}
		var rows uint64
		if err := ch.QueryRow(ctx, `SELECT count() FROM `+BenchDatabase+`.tool_calls`).Scan(&rows); err != nil {
			return Phase{}, nil, err
		}
		now := time.Now()
		if rows != last {
			last, lastSeen = rows, now
		}
		// 18.16's engine has been seen to stop a few messages short of the end for good; the
		// phase then ends engineStall after the last row arrived, and the rate counts the rows
		// it stored up to then.
		if rows >= uint64(n) || (rows > 0 && now.Sub(lastSeen) >= engineStall) {
			p := Phase{Seconds: lastSeen.Sub(start).Seconds(), Missing: int64(n) - int64(rows)}
			p.finish(int(rows), meter.read().sub(cpu0))
			return p, plan.defaults, nil
		}
	}
}

// engineStall is how long the Kafka engine's row count may stay still before its phase ends
// short of all events; its default stream_flush_interval_ms is 7.5 s.
const engineStall = 20 * time.Second

// runBareReader reads n messages of mcp_tool_calls in group, from starts, with kafka-go's
// Reader (the configuration mcpulse's consumer uses, commits every second) and discards them.
// The time runs from creating the reader, so it includes joining the group, as mcpulse's does.
func runBareReader(ctx context.Context, brokers []string, group string, starts map[string]map[int]int64, n int) (Phase, error) {
	if err := startGroup(ctx, brokers, group, map[string]map[int]int64{topicToolCalls: starts[topicToolCalls]}); err != nil {
		return Phase{}, err
	}
	meter := newCPUMeter()
	cpu0 := meter.read()
	start := time.Now()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        brokers,
		GroupID:        group,
		GroupTopics:    []string{topicToolCalls},
		MinBytes:       1,
		MaxBytes:       16 << 20,
		MaxWait:        500 * time.Millisecond,
		StartOffset:    kafka.FirstOffset,
		CommitInterval: time.Second,
	})
	defer r.Close()
	for i := 0; i < n; i++ {
		if _, err := r.ReadMessage(ctx); err != nil {
			return Phase{}, fmt.Errorf("after %d messages: %w", i, err)
		}
	}
	p := Phase{Seconds: time.Since(start).Seconds()}
	p.finish(n, meter.read().sub(cpu0))
	return p, nil
}

// endOffsets returns the end offset (the next offset to be written) of every partition of topic.
func endOffsets(ctx context.Context, brokers []string, topic string) (map[int]int64, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	parts, err := partitionsOf(ctx, client, []string{topic})
	if err != nil {
		return nil, err
	}
	req := &kafka.ListOffsetsRequest{Topics: map[string][]kafka.OffsetRequest{}}
	for _, p := range parts[topic] {
		req.Topics[topic] = append(req.Topics[topic], kafka.LastOffsetOf(p))
	}
	resp, err := client.ListOffsets(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("list the end offsets of %s: %w", topic, err)
	}
	out := map[int]int64{}
	for _, p := range resp.Topics[topic] {
		if p.Error != nil {
			return nil, fmt.Errorf("end offset of %s/%d: %w", topic, p.Partition, p.Error)
		}
		out[p.Partition] = p.LastOffset
	}
	return out, nil
}

// commitOffsets commits offsets (partition → offset) of topic for group (a standalone commit:
// generation -1, no member), so a consumer of the group starts there.
func commitOffsets(ctx context.Context, brokers []string, group, topic string, offsets map[int]int64) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	var commits []kafka.OffsetCommit
	for p, o := range offsets {
		commits = append(commits, kafka.OffsetCommit{Partition: p, Offset: o})
	}
	resp, err := client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID: group, GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{topic: commits},
	})
	if err != nil {
		return fmt.Errorf("commit offsets of %s for group %s: %w", topic, group, err)
	}
	for _, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return fmt.Errorf("commit offsets of %s/%d for group %s: %w", topic, p.Partition, group, p.Error)
			}
		}
	}
	return nil
}

// startGroup makes group start at starts (topic → partition → offset).
func startGroup(ctx context.Context, brokers []string, group string, starts map[string]map[int]int64) error {
	for topic, offsets := range starts {
		if err := commitOffsets(ctx, brokers, group, topic, offsets); err != nil {
			return err
		}
	}
	return nil
}
