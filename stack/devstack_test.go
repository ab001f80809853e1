package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

func startStack(t *testing.T, cfg Config) *Stack {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	s, err := Start(ctx, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Logf("Start took %s", time.Since(began).Round(time.Millisecond))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStackServesKafkaRedisAndClickHouseAndCloseStopsChildren(t *testing.T) {
	s := startStack(t, Config{})
	if len(s.KafkaBrokers) != 1 || !strings.HasPrefix(s.KafkaBrokers[0], "127.0.0.1:") {
		t.Errorf("KafkaBrokers = %v, want one 127.0.0.1 broker", s.KafkaBrokers)
	}
	if !strings.HasPrefix(s.RedisURL, "redis://127.0.0.1:") || !strings.HasSuffix(s.RedisURL, "/0") {
		t.Errorf("RedisURL = %q", s.RedisURL)
	}
	if !strings.HasPrefix(s.ClickHouseDSN, "clickhouse://default@127.0.0.1:") {
		t.Errorf("ClickHouseDSN = %q", s.ClickHouseDSN)
	}
	env := s.Env()
	want := []string{
		"MCPULSE_KAFKA_BROKERS=" + s.KafkaBrokers[0],
		"MCPULSE_REDIS_URL=" + s.RedisURL,
		"MCPULSE_CLICKHOUSE_DSN=" + s.ClickHouseDSN,
	}
	if strings.Join(env, "\n") != strings.Join(want, "\n") {
		t.Errorf("Env() = %q, want %q", env, want)
	}

	t.Run("kafka consumer group reads every message once across all partitions and commits", func(t *testing.T) {
		testKafkaConsumerGroup(t, s)
	})
	t.Run("redis SET then GET", func(t *testing.T) {
		testRedis(t, s.RedisURL)
	})
	t.Run("clickhouse version, batch insert with column list, count", func(t *testing.T) {
		testClickHouse(t, s.ClickHouseDSN)
	})

	pids := []int{s.redis.pid(), s.ch.pid()}
	dir := s.DataDir
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("pid %d still alive after Close", pid)
		}
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("temporary data dir %s not removed: %v", dir, err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func testKafkaConsumerGroup(t *testing.T, s *Stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topic := ingest.TopicToolCalls
	const n = 400

	w := &kafka.Writer{
		Addr:         kafka.TCP(s.KafkaBrokers...),
		Topic:        topic,
		Balancer:     &kafka.Hash{},
		RequiredAcks: kafka.RequireAll,
		BatchTimeout: 5 * time.Millisecond,
	}
	produce := func(from, to int) {
		t.Helper()
		msgs := make([]kafka.Message, 0, to-from)
		for i := from; i < to; i++ {
			msgs = append(msgs, kafka.Message{Key: []byte("user-" + strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
		}
		if err := w.WriteMessages(ctx, msgs...); err != nil {
			t.Fatalf("WriteMessages: %v", err)
		}
	}
	produce(0, n)

	// consume reads exactly want messages in group "x", committing each, and returns the
	// values seen and the partitions they came from.
	consume := func(want int) (map[string]int, map[int]int) {
		t.Helper()
		r := kafka.NewReader(kafka.ReaderConfig{
			Brokers:     s.KafkaBrokers,
			GroupID:     "x",
			GroupTopics: []string{topic},
			MaxWait:     100 * time.Millisecond,
		})
		defer r.Close()
		values, parts := map[string]int{}, map[int]int{}
		for range want {
			m, err := r.FetchMessage(ctx)
			if err != nil {
				t.Fatalf("FetchMessage after %d messages: %v", len(values), err)
			}
			values[string(m.Value)]++
			parts[m.Partition]++
			if err := r.CommitMessages(ctx, m); err != nil {
				t.Fatalf("CommitMessages: %v", err)
			}
		}
		return values, parts
	}
	values, parts := consume(n)
	if len(values) != n {
		t.Errorf("read %d distinct values, want %d", len(values), n)
	}
	for v, c := range values {
		if c != 1 {
			t.Errorf("value %s read %d times", v, c)
		}
	}
	if len(parts) != 4 {
		t.Errorf("messages came from partitions %v, want all 4", parts)
	}

	committed := func() int64 {
		t.Helper()
		cl := &kafka.Client{Addr: kafka.TCP(s.KafkaBrokers...)}
		resp, err := cl.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: "x", Topics: map[string][]int{topic: {0, 1, 2, 3}}})
		if err != nil {
			t.Fatalf("OffsetFetch: %v", err)
		}
		if resp.Error != nil {
			t.Fatalf("OffsetFetch: %v", resp.Error)
		}
		var sum int64
		for _, p := range resp.Topics[topic] {
			if p.Error != nil {
				t.Fatalf("OffsetFetch partition %d: %v", p.Partition, p.Error)
			}
			sum += max(p.CommittedOffset, 0)
		}
		return sum
	}
	if got := committed(); got != n {
		t.Errorf("committed offsets sum to %d, want %d", got, n)
	}

	// A new member of the same group resumes from the commits: it sees only the new messages.
	produce(n, n+40)
	values, _ = consume(40)
	for v := range values {
		if i, _ := strconv.Atoi(v); i < n {
			t.Errorf("rejoined reader re-read committed message %s", v)
		}
	}
	if got := committed(); got != n+40 {
		t.Errorf("committed offsets sum to %d after rejoin, want %d", got, n+40)
	}
	if err := w.Close(); err != nil {
		t.Errorf("Writer.Close: %v", err)
	}
}

func testRedis(t *testing.T, url string) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Set(ctx, "devstack:k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	got, err := c.Get(ctx, "devstack:k").Result()
	if err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want \"v\"", got, err)
	}
	policy, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil || policy["maxmemory-policy"] != "noeviction" {
		t.Errorf("maxmemory-policy = %v, %v; want noeviction", policy, err)
	}
}

func testClickHouse(t *testing.T, dsn string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts, err := clickhouse.ParseDSN(dsn)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := clickhouse.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var version string
	if err := conn.QueryRow(ctx, "SELECT version()").Scan(&version); err != nil {
		t.Fatalf("SELECT version(): %v", err)
	}
	t.Logf("clickhouse version %s", version)
	var nested string
	if err := conn.QueryRow(ctx, "SELECT value FROM system.settings WHERE name = 'input_format_import_nested_json'").Scan(&nested); err != nil || nested != "1" {
		t.Errorf("input_format_import_nested_json = %q, %v; want 1 from users.d (the Kafka-engine peer of the benchmark needs it)", nested, err)
	}

	if err := conn.Exec(ctx, "DROP TABLE IF EXISTS devstack_t"); err != nil {
		t.Fatal(err)
	}
	if err := conn.Exec(ctx, "CREATE TABLE devstack_t (id UInt64, name String, at DateTime) ENGINE = MergeTree ORDER BY id"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	batch, err := conn.PrepareBatch(ctx, "INSERT INTO devstack_t (id, name, at)")
	if err != nil {
		t.Fatalf("PrepareBatch: %v", err)
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 1000 {
		if err := batch.Append(uint64(i), fmt.Sprintf("n%d", i), at); err != nil {
			t.Fatalf("Append: %v", err)
		}
	}
	if err := batch.Send(); err != nil {
		t.Fatalf("Send: %v", err)
	}
	var count uint64
	if err := conn.QueryRow(ctx, "SELECT count() FROM devstack_t").Scan(&count); err != nil {
		t.Fatalf("SELECT count(): %v", err)
	}
	if count != 1000 {
		t.Errorf("count() = %d, want 1000", count)
	}
	var rendered string
	if err := conn.QueryRow(ctx, "SELECT toString(at) FROM devstack_t LIMIT 1").Scan(&rendered); err != nil {
		t.Fatal(err)
	}
	if rendered != "2026-01-02 03:04:05" {
		t.Errorf("DateTime rendered as %q, want UTC 2026-01-02 03:04:05", rendered)
	}
}

func TestUseEnvReplacesEmbeddedServicesWithExternalOnes(t *testing.T) {
	first := startStack(t, Config{})
	t.Setenv(EnvKafkaBrokers, strings.Join(first.KafkaBrokers, ","))
	t.Setenv(EnvRedisURL, first.RedisURL)
	t.Setenv(EnvClickHouseDSN, first.ClickHouseDSN)

	second := startStack(t, Config{UseEnv: true})
	if second.kafka != nil || second.redis != nil || second.ch != nil {
		t.Errorf("embedded services started despite the environment: kafka %v, redis %v, clickhouse %v",
			second.kafka != nil, second.redis != nil, second.ch != nil)
	}
	if strings.Join(second.KafkaBrokers, ",") != strings.Join(first.KafkaBrokers, ",") ||
		second.RedisURL != first.RedisURL || second.ClickHouseDSN != first.ClickHouseDSN {
		t.Errorf("second stack = %v, want the first stack's addresses %v", second.Env(), first.Env())
	}
	if second.DataDir != "" {
		t.Errorf("second stack made a data dir %s it does not need", second.DataDir)
	}
	if err := second.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	// Closing the stack that borrowed the services leaves them running.
	testRedis(t, first.RedisURL)

	// Without UseEnv the same environment is ignored.
	third := startStack(t, Config{})
	if third.redis == nil || third.RedisURL == first.RedisURL {
		t.Errorf("UseEnv=false stack used the environment's redis %s", third.RedisURL)
	}
}

func TestMissingBinaryNamesTheDebianPackage(t *testing.T) {
	saved := extraBinDirs
	extraBinDirs = nil
	t.Cleanup(func() { extraBinDirs = saved })
	t.Setenv("PATH", t.TempDir())

	_, err := Start(context.Background(), Config{})
	var missing *MissingBinaryError
	if !errors.As(err, &missing) {
		t.Fatalf("Start error = %v, want *MissingBinaryError", err)
	}
	want := "redis-server not found on PATH: install Debian package redis-server (apt-get install redis-server)"
	if err.Error() != want {
		t.Errorf("error = %q, want %q", err, want)
	}

	// With redis external, the next missing binary is ClickHouse's.
	t.Setenv(EnvRedisURL, "redis://127.0.0.1:1/0")
	_, err = Start(context.Background(), Config{UseEnv: true})
	if !errors.As(err, &missing) || missing.Package != "clickhouse-server" {
		t.Fatalf("Start error = %v, want a missing clickhouse-server", err)
	}
}

func TestConfigValidateListsEveryProblem(t *testing.T) {
	err := Config{Partitions: -1, Topics: []string{"a", ""}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "Partitions") || !strings.Contains(err.Error(), "Topics[1]") {
		t.Errorf("Validate() = %v, want both the Partitions and the Topics[1] problems", err)
	}
	if _, err := Start(context.Background(), Config{Partitions: -3}); err == nil {
		t.Error("Start accepted Partitions -3")
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// A server that loses its port to another stack's server must not adopt that server: when
// both answered the start-up ping, two parallel tests once shared one ClickHouse and ran
// their migrations into each other. Starting on the first stack's ports fails instead.
func TestServerStartedOnAnotherStacksPortFailsInsteadOfAdoptingIt(t *testing.T) {
	a := startStack(t, Config{})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := &Stack{DataDir: t.TempDir(), log: slog.New(slog.DiscardHandler)}
	t.Cleanup(func() { _ = b.Close() })

	if err := b.startRedis(ctx, a.redisBin, a.redisPort); err == nil {
		t.Errorf("redis on the other stack's port %d: started, want an error", a.redisPort)
	} else if !strings.Contains(err.Error(), "already in use") {
		t.Errorf("redis on the other stack's port: %v, want the server's address-in-use log", err)
	}
	if err := b.startClickHouse(ctx, a.chArgv, a.chPorts); err == nil {
		t.Errorf("clickhouse on the other stack's ports %v: started, want an error", a.chPorts)
	} else if !strings.Contains(err.Error(), "in use") {
		t.Errorf("clickhouse on the other stack's ports: %v, want the server's address-in-use log", err)
	}
	if b.redis != nil || b.ch != nil {
		t.Fatalf("the second stack holds servers it did not start: redis %v, clickhouse %v", b.redis, b.ch)
	}
}
