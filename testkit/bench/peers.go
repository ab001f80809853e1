package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

// BenchDatabase holds the Kafka-engine peer's tables (dropped and re-created by each run).
const BenchDatabase = "mcpulse_bench"

// kafkaEngineDDL returns the statements that set the Kafka-engine peer up, in order; the
// materialized view comes last, since the Kafka engine starts consuming when a view is
// attached. Each Kafka message becomes one TabSeparated row of one String column (the whole
// envelope: a JSON line holds no raw tab or newline), and the view picks the tool-call fields
// out with visitParamExtract*, which ClickHouse 18.16 and current releases both have; 18.16's
// JSONEachRow cannot read the nested "properties" object into a column. 18.16 only knows the
// positional engine arguments (broker_list, topic_list, group_name, format, row_delimiter);
// current releases take the SETTINGS form.
func kafkaEngineDDL(major int, brokers []string, group string) []string {
	db := BenchDatabase
	engine := fmt.Sprintf(`Kafka(%s, %s, %s, 'TabSeparated', '\n')`,
		sqlString(strings.Join(brokers, ",")), sqlString(ingest.TopicToolCalls), sqlString(group))
	if major >= 19 {
		engine = fmt.Sprintf(`Kafka SETTINGS kafka_broker_list = %s, kafka_topic_list = %s, kafka_group_name = %s, kafka_format = 'TabSeparated'`,
			sqlString(strings.Join(brokers, ",")), sqlString(ingest.TopicToolCalls), sqlString(group))
	}
	return []string{
		`DROP TABLE IF EXISTS ` + db + `.tool_calls_mv`,
		`DROP TABLE IF EXISTS ` + db + `.tool_calls_kafka`,
		`DROP TABLE IF EXISTS ` + db + `.tool_calls`,
		`CREATE DATABASE IF NOT EXISTS ` + db,
		`CREATE TABLE ` + db + `.tool_calls_kafka (raw String) ENGINE = ` + engine,
		`CREATE TABLE ` + db + `.tool_calls (
    uuid String, timestamp DateTime('UTC'), distinct_id String, tool_name String,
    exec_verb String, exec_target_tool String, client_name String, client_version String,
    is_error UInt8, error_type String, duration_ms Float64, ignored_keys String,
    recruitment_reason String, campaign_id String, session_id String, properties String
) ENGINE = MergeTree() PARTITION BY toYYYYMM(timestamp) ORDER BY (tool_name, timestamp, uuid)`,
		`CREATE MATERIALIZED VIEW ` + db + `.tool_calls_mv TO ` + db + `.tool_calls AS SELECT
    visitParamExtractString(raw, 'uuid') AS uuid,
    parseDateTimeBestEffort(visitParamExtractString(raw, 'timestamp')) AS timestamp,
    visitParamExtractString(raw, 'distinct_id') AS distinct_id,
    visitParamExtractString(raw, '$mcp_tool_name') AS tool_name,
    visitParamExtractString(raw, '$mcp_exec_verb') AS exec_verb,
    visitParamExtractString(raw, '$mcp_exec_target_tool') AS exec_target_tool,
    visitParamExtractString(raw, '$mcp_client_name') AS client_name,
    visitParamExtractString(raw, '$mcp_client_version') AS client_version,
    visitParamExtractBool(raw, '$mcp_is_error') AS is_error,
    visitParamExtractString(raw, '$mcp_error_type') AS error_type,
    visitParamExtractFloat(raw, '$mcp_duration_ms') AS duration_ms,
    visitParamExtractRaw(raw, '$mcp_ignored_keys') AS ignored_keys,
    visitParamExtractString(raw, 'interview_recruitment_reason') AS recruitment_reason,
    visitParamExtractString(raw, 'interview_recruitment_campaign_id') AS campaign_id,
    visitParamExtractString(raw, '$session_id') AS session_id,
    visitParamExtractRaw(raw, 'properties') AS properties
FROM ` + db + `.tool_calls_kafka`,
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

// runKafkaEngine sets the Kafka table, the MergeTree table and the view up and waits until the
// table holds n rows. The time runs from the view's creation (when consumption starts) to the
// poll that sees n rows, the same "queryable" end as mcpulse's phase.
func runKafkaEngine(ctx context.Context, ch driver.Conn, brokers []string, n int) (Phase, error) {
	major, version, err := serverMajor(ctx, ch)
	if err != nil {
		return Phase{}, err
	}
	// 18.16's Kafka engine starts a new group at the end of each partition (librdkafka's
	// auto.offset.reset default, "largest"); committing the start for its group makes it read
	// the topic from the beginning, as a user migrating a backlog would.
	if err := commitStart(ctx, brokers, KafkaEngineGroup, ingest.TopicToolCalls); err != nil {
		return Phase{}, err
	}
	stmts := kafkaEngineDDL(major, brokers, KafkaEngineGroup)
	for _, q := range stmts[:len(stmts)-1] {
		if err := ch.Exec(ctx, q); err != nil {
			return Phase{}, fmt.Errorf("ClickHouse %s: %w", version, err)
		}
	}
	meter := newCPUMeter()
	cpu0 := meter.read()
	start := time.Now()
	if err := ch.Exec(ctx, stmts[len(stmts)-1]); err != nil {
		return Phase{}, fmt.Errorf("ClickHouse %s: %w", version, err)
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
			return Phase{}, fmt.Errorf("%d of %d rows arrived: %w", last, n, ctx.Err())
		case <-tick.C:
		}
		var rows uint64
		if err := ch.QueryRow(ctx, `SELECT count() FROM `+BenchDatabase+`.tool_calls`).Scan(&rows); err != nil {
			return Phase{}, err
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
			return p, nil
		}
	}
}

// engineStall is how long the Kafka engine's row count may stay still before its phase ends
// short of all events; its default stream_flush_interval_ms is 7.5 s.
const engineStall = 20 * time.Second

// runBareReader reads n messages of mcp_tool_calls in its own consumer group with kafka-go's
// Reader (the configuration mcpulse's consumer uses, commits every second) and discards them.
// The time runs from creating the reader, so it includes joining the group, as mcpulse's does.
func runBareReader(ctx context.Context, brokers []string, n int) (Phase, error) {
	meter := newCPUMeter()
	cpu0 := meter.read()
	start := time.Now()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:        brokers,
		GroupID:        BareReaderGroup,
		GroupTopics:    []string{ingest.TopicToolCalls},
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

// commitStart commits offset 0 of every partition of topic for group (a standalone commit:
// generation -1, no member), so a consumer of the group starts at the beginning.
func commitStart(ctx context.Context, brokers []string, group, topic string) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: []string{topic}})
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	var commits []kafka.OffsetCommit
	for _, t := range meta.Topics {
		for _, p := range t.Partitions {
			commits = append(commits, kafka.OffsetCommit{Partition: p.ID, Offset: 0})
		}
	}
	resp, err := client.OffsetCommit(ctx, &kafka.OffsetCommitRequest{
		GroupID: group, GenerationID: -1, Topics: map[string][]kafka.OffsetCommit{topic: commits},
	})
	if err != nil {
		return fmt.Errorf("commit the start of %s for group %s: %w", topic, group, err)
	}
	for _, ps := range resp.Topics {
		for _, p := range ps {
			if p.Error != nil {
				return fmt.Errorf("commit the start of %s/%d for group %s: %w", topic, p.Partition, group, p.Error)
			}
		}
	}
	return nil
}
