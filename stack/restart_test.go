package stack

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

// Each service stops for real (its process exits, or the broker's listener closes) and comes
// back on the same address with what it held: a Redis key written just before the stop (AOF),
// a ClickHouse row, and Kafka records and a group's committed offset.
func TestStoppedServicesComeBackOnTheSameAddressWithTheirData(t *testing.T) {
	s := startStack(t, Config{PersistKafka: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	redisURL, dsn, brokers := s.RedisURL, s.ClickHouseDSN, s.KafkaBrokers[0]

	// Redis: written without waiting for the once-a-second AOF fsync; SIGTERM flushes it.
	ropts, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	if err := rdb.Set(ctx, "devstack:persisted", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	redisPID := s.redis.pid()
	if err := s.StopRedis(); err != nil {
		t.Fatalf("StopRedis: %v", err)
	}
	if alive(redisPID) {
		t.Errorf("redis pid %d alive after StopRedis", redisPID)
	}
	if err := rdb.Ping(ctx).Err(); err == nil {
		t.Error("PING answered while redis was stopped")
	}
	if err := s.StopRedis(); err == nil {
		t.Error("second StopRedis succeeded")
	}
	if err := s.StartRedis(ctx); err != nil {
		t.Fatalf("StartRedis: %v", err)
	}
	if s.RedisURL != redisURL {
		t.Errorf("RedisURL changed from %s to %s", redisURL, s.RedisURL)
	}
	if got, err := rdb.Get(ctx, "devstack:persisted").Result(); err != nil || got != "v" {
		t.Errorf("GET after restart = %q, %v; want \"v\"", got, err)
	}
	if err := s.StartRedis(ctx); err == nil {
		t.Error("StartRedis on a running redis succeeded")
	}

	// ClickHouse.
	chOpts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(chOpts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Exec(ctx, "CREATE TABLE restart_t (id UInt64) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatal(err)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO restart_t (id)")
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := batch.Append(uint64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatal(err)
	}
	chPID := s.ch.pid()
	if err := s.StopClickHouse(); err != nil {
		t.Fatalf("StopClickHouse: %v", err)
	}
	if alive(chPID) {
		t.Errorf("clickhouse pid %d alive after StopClickHouse", chPID)
	}
	if err := s.StartClickHouse(ctx); err != nil {
		t.Fatalf("StartClickHouse: %v", err)
	}
	if s.ClickHouseDSN != dsn {
		t.Errorf("ClickHouseDSN changed from %s to %s", dsn, s.ClickHouseDSN)
	}
	var n uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM restart_t").Scan(&n); err != nil || n != 10 {
		t.Errorf("count() after restart = %d, %v; want 10", n, err)
	}

	// Kafka: 20 records, a group commits 12, the broker restarts; the records and the commit
	// survive, and the group resumes at record 12.
	topic := ingest.TopicToolCalls
	w := &kafka.Writer{Addr: kafka.TCP(brokers), Topic: topic, Balancer: &kafka.LeastBytes{}, RequiredAcks: kafka.RequireAll}
	defer w.Close()
	var msgs []kafka.Message
	for i := range 20 {
		msgs = append(msgs, kafka.Message{Value: []byte{byte(i)}})
	}
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	readGroup := func(n int) []kafka.Message {
		t.Helper()
		r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{brokers}, GroupID: "restart", GroupTopics: []string{topic}, MaxWait: 100 * time.Millisecond})
		defer r.Close()
		var got []kafka.Message
		for range n {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("FetchMessage after %d: %v", len(got), err)
			}
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("CommitMessages: %v", err)
			}
			got = append(got, m)
		}
		return got
	}
	first := readGroup(12)
	if err := s.RestartKafka(100 * time.Millisecond); err != nil {
		t.Fatalf("RestartKafka: %v", err)
	}
	if s.KafkaBrokers[0] != brokers {
		t.Errorf("broker address changed from %s to %s", brokers, s.KafkaBrokers[0])
	}
	rest := readGroup(8)
	seen := map[byte]bool{}
	for _, m := range append(first, rest...) {
		if seen[m.Value[0]] {
			t.Errorf("record %d read twice across the restart", m.Value[0])
		}
		seen[m.Value[0]] = true
	}
	if len(seen) != 20 {
		t.Errorf("read %d distinct records, want 20", len(seen))
	}
}

func TestRestartKafkaRefusesAnInMemoryBroker(t *testing.T) {
	s := startStack(t, Config{})
	if err := s.RestartKafka(0); err == nil {
		t.Fatal("RestartKafka on an in-memory broker succeeded")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StopRedis(); !errors.Is(err, ErrClosed) {
		t.Errorf("StopRedis after Close = %v, want ErrClosed", err)
	}
}
