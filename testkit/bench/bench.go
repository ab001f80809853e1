// Package bench runs the pipeline benchmark behind `mcpulse bench pipeline`: on the embedded
// stack it generates tool-call events (the demo's shape or the shape the @posthog/mcp SDK
// sends), publishes them, and lets three consumers read the same topic, one after the other,
// each alone on the machine and each in a consumer group of its own:
//
//  1. mcpulse's consumer (decode, validate, deduplicate, Redis state, ClickHouse raw rows and
//     rollups, offsets committed after the stores hold a batch);
//  2. ClickHouse's own Kafka table engine (JSONEachRow) feeding a copy of mcpulse's tool_calls
//     table through a materialized view (no dedup, no Redis, no rollups);
//  3. a bare kafka-go consumer-group reader that reads and discards (the ceiling).
//
// By default the topic is filled before any consumer starts, so no consumer pays for the
// publisher; each run starts mcpulse on empty stores. Live mode instead publishes while
// mcpulse consumes (optionally at a capped rate) and measures publish-to-queryable latency.
// Every figure is reported per run and as the median (min, max) over the runs.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// Config configures Run. Zero fields take the documented defaults.
type Config struct {
	// Events is how many tool-call events each consumer reads (the corpus's duplicate lines
	// included). Default: 1,000,000.
	Events int
	// Runs is how many times the consumers read the corpus; figures are reported per run and
	// as the median over runs. Default: 1.
	Runs int
	// Shape is how tool calls look: "demo" (mcpulse's own event contract, as the demo sends)
	// or "sdk" (as @posthog/mcp 0.16.3 sends them, about 1 KB of parameters and response,
	// preceded by $mcp_tools_list events). Default: "demo".
	Shape string
	// Hours is the span of the events' timestamps, ending at a fixed hour. Default: 24.
	Hours int
	// Seed drives the generator (same seed, same events). Default: 1.
	Seed int64
	// Live publishes the corpus while mcpulse's consumer reads it (the consumer starts first,
	// on an empty stretch of the topic), and reports publish-to-queryable latency. The peers
	// do not run: their rates need the pre-published topic. Default: false, every consumer
	// reads a topic filled before it starts.
	Live bool
	// Rate caps the live publish rate in events/s; 0 publishes as fast as Kafka acknowledges.
	// Only with Live.
	Rate int
	// SampleEvery makes every SampleEvery-th message a latency sample (Live). Default:
	// messages/2000, at least 1.
	SampleEvery int
	// ConsumerArgv, when set, is the command that runs mcpulse's consumer as a child process
	// until it has drained the topics (e.g. the mcpulse executable with "consume",
	// "--until-drained"); Run appends "--group" and the run's consumer group, and
	// "--batch-size" and "--batch-max-age" when ConsumerBatchSize and ConsumerBatchMaxAge are
	// set. It gets the stack's MCPULSE_* variables in its environment, and its peak RSS is
	// reported. When empty the consumer runs in this process (tests, CPU profiles) and no RSS
	// is reported.
	ConsumerArgv []string
	// ConsumerBatchSize is the consumer's BatchSize (--batch-size for a child). Default: 0,
	// the consumers package's default.
	ConsumerBatchSize int
	// ConsumerBatchMaxAge is the consumer's BatchMaxAge (--batch-max-age for a child;
	// consumers.NoBatchMaxAge for none). Default: 0, the consumers package's default.
	ConsumerBatchMaxAge time.Duration
	// ConsumerMembers is how many consumers of mcpulse's group read each run at once, each
	// its share of the partitions (the group's assignment): child processes with
	// ConsumerArgv, each with its own --cpuprofile path (".memberN" appended for N > 1), their
	// CPU summed and the largest peak RSS reported. Default: 0, one.
	ConsumerMembers int
	// ConsumerCPUProfile, when set with ConsumerArgv, is where the child consumer writes a CPU
	// profile of each run (its --cpuprofile): run 1 to this path, run N > 1 to the path with
	// ".runN" appended. Default: "", none.
	ConsumerCPUProfile string
	// SkipPeers leaves out the Kafka-engine and bare-reader phases (and the ratios).
	SkipPeers bool
	// Stack, when set, is used instead of starting one. Run drops and re-creates its mcpulse
	// database and flushes its Redis before each run; messages already on its topics are
	// left unread (every consumer group starts where the corpus starts).
	Stack *stack.Stack
	// DataDir keeps the started stack's data; "" uses a temporary directory.
	DataDir string
	// KafkaStore says where the started stack's in-process Kafka keeps the messages:
	// KafkaInMemory (every message in this process's memory, about 2.4 KB of RSS per
	// demo-shaped event), KafkaOnDisk (segment files under the stack's data directory, about
	// 0.75 KB of disk per demo-shaped event; memory keeps an index of about 100 bytes per
	// produced batch of up to 100 messages), or KafkaAuto (on disk when Events exceeds
	// AutoDiskEvents). Ignored with Stack. Default: KafkaAuto.
	KafkaStore string
	// Progress receives one line per phase; nil discards it.
	Progress io.Writer
	// Logger receives the services' logs. Default: discard.
	Logger *slog.Logger
	// Midway, when set, is called once, in the first run, while mcpulse's consumer is about
	// half-way through the events (the command takes its heap profile then). Optional.
	Midway func()
	// PhaseTimeout bounds each consuming phase. Default: 30 minutes.
	PhaseTimeout time.Duration
}

// Where the in-process Kafka keeps the messages (Config.KafkaStore).
const (
	KafkaAuto     = "auto"
	KafkaInMemory = "memory"
	KafkaOnDisk   = "disk"
)

// AutoDiskEvents is the largest Events that KafkaAuto keeps in memory: 2,000,000 demo-shaped
// events take about 5 GB of this process's RSS in memory (a shared machine's budget), while
// on disk they take about 1.5 GB of segment files and almost no memory.
const AutoDiskEvents = 2_000_000

// kafkaOnDisk reports whether the started stack's Kafka keeps its messages on disk.
func (c *Config) kafkaOnDisk() bool {
	return c.KafkaStore == KafkaOnDisk || (c.KafkaStore == KafkaAuto && c.Events > AutoDiskEvents)
}

// Shapes of the generated tool calls (Config.Shape).
const (
	ShapeDemo = string(gen.ShapeDemo)
	ShapeSDK  = string(gen.ShapeSDK)
)

func (c *Config) setDefaults() {
	if c.Events == 0 {
		c.Events = 1_000_000
	}
	if c.Runs == 0 {
		c.Runs = 1
	}
	if c.Shape == "" {
		c.Shape = ShapeDemo
	}
	if c.Hours == 0 {
		c.Hours = 24
	}
	if c.KafkaStore == "" {
		c.KafkaStore = KafkaAuto
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.Progress == nil {
		c.Progress = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = 30 * time.Minute
	}
}

// Validate lists every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if c.Events < 1 {
		errs = append(errs, fmt.Errorf("bench: Events must be positive, got %d", c.Events))
	}
	if c.Runs < 1 {
		errs = append(errs, fmt.Errorf("bench: Runs must be positive, got %d", c.Runs))
	}
	if c.Shape != ShapeDemo && c.Shape != ShapeSDK {
		errs = append(errs, fmt.Errorf("bench: Shape must be %q or %q, got %q", ShapeDemo, ShapeSDK, c.Shape))
	}
	if c.Hours < 1 {
		errs = append(errs, fmt.Errorf("bench: Hours must be positive, got %d", c.Hours))
	}
	if c.KafkaStore != KafkaAuto && c.KafkaStore != KafkaInMemory && c.KafkaStore != KafkaOnDisk {
		errs = append(errs, fmt.Errorf("bench: KafkaStore must be %q, %q or %q, got %q", KafkaAuto, KafkaInMemory, KafkaOnDisk, c.KafkaStore))
	}
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("bench: Rate must not be negative, got %d", c.Rate))
	}
	if c.Rate > 0 && !c.Live {
		errs = append(errs, errors.New("bench: Rate needs Live (a pre-published topic is filled before any consumer starts)"))
	}
	if c.SampleEvery < 0 {
		errs = append(errs, fmt.Errorf("bench: SampleEvery must not be negative, got %d", c.SampleEvery))
	}
	if c.ConsumerMembers < 0 {
		errs = append(errs, fmt.Errorf("bench: ConsumerMembers must not be negative, got %d", c.ConsumerMembers))
	}
	if c.ConsumerBatchSize < 0 || c.ConsumerBatchMaxAge < 0 {
		errs = append(errs, fmt.Errorf("bench: ConsumerBatchSize and ConsumerBatchMaxAge must not be negative, got %d and %v", c.ConsumerBatchSize, c.ConsumerBatchMaxAge))
	}
	return errors.Join(errs...)
}

// Consumer group names; each run's groups end in "-run" and the run number, so every run
// reads the topic from its start (a live run from where the topic ended).
const (
	// McpulseGroup is the prefix of mcpulse's consumer groups.
	McpulseGroup = "mcpulse-bench-mcpulse"
	// KafkaEngineGroup is the prefix of the ClickHouse Kafka table's consumer groups.
	KafkaEngineGroup = "mcpulse-bench-kafka-engine"
	// BareReaderGroup is the prefix of the bare kafka-go reader's consumer groups.
	BareReaderGroup = "mcpulse-bench-bare-reader"
	// WarmUpGroup is the consumer group of the untimed read of a pre-published topic before
	// the first run.
	WarmUpGroup = "mcpulse-bench-warm-up"
)

func runGroup(prefix string, run int) string { return fmt.Sprintf("%s-run%d", prefix, run) }

// env is what every phase of a run needs.
type env struct {
	cfg   Config
	st    *stack.Stack
	ch    driver.Conn
	rdb   redis.UniversalClient
	step  func(format string, args ...any)
	stats *corpusStats
	// starts are where the corpus begins (topic → partition → offset): the topics' ends
	// before it was published. Every group starts there, so a stack's earlier messages are
	// not read.
	starts map[string]map[int]int64
	ends   map[topicPartition]int64 // the pre-published corpus's end offsets
	live   []kafka.Message          // the corpus, held for live runs
}

// Run starts (or uses) the stack, generates the corpus and runs the consumers cfg.Runs times.
// An error means the benchmark could not complete; the figures are only returned complete.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &env{cfg: cfg, step: func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "▸ "+format+"\n", args...) }}

	e.st = cfg.Stack
	if e.st == nil {
		onDisk := cfg.kafkaOnDisk()
		where := "in memory"
		if onDisk {
			where = "on disk"
		}
		e.step("starting the embedded stack (kfake with its messages %s, redis-server, clickhouse-server)", where)
		dir := cfg.DataDir
		if dir != "" {
			dir = filepath.Join(dir, "stack")
		}
		s, err := stack.Start(ctx, stack.Config{DataDir: dir, PersistKafka: onDisk, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		e.st = s
	}
	var err error
	if e.ch, err = stores.OpenClickHouse(ctx, e.st.ClickHouseDSN); err != nil {
		return nil, err
	}
	defer e.ch.Close()
	if e.rdb, err = stores.OpenRedis(ctx, e.st.RedisURL); err != nil {
		return nil, err
	}
	defer e.rdb.Close()
	peers := !cfg.SkipPeers && !cfg.Live
	if peers {
		if err := checkPeerSettings(ctx, e.ch); err != nil {
			return nil, err
		}
	}

	res := &Result{Shape: cfg.Shape, Hours: cfg.Hours, Live: cfg.Live, Rate: cfg.Rate, ConsumerBatchSize: cfg.ConsumerBatchSize}
	res.ConsumerMembers = max(cfg.ConsumerMembers, 1)
	res.ConsumerBatchMaxAge = maxAgeText(cfg.ConsumerBatchMaxAge)
	if cfg.Stack == nil {
		res.KafkaStore = KafkaInMemory
		if cfg.kafkaOnDisk() {
			res.KafkaStore = KafkaOnDisk
		}
	}
	if e.starts, err = topicEnds(ctx, e.st.KafkaBrokers); err != nil {
		return nil, err
	}
	if cfg.Live {
		e.step("generating %d %s-shaped tool calls (seed %d, %d hours)", cfg.Events, cfg.Shape, cfg.Seed, cfg.Hours)
		e.stats, err = generate(ctx, cfg, func(m []kafka.Message) error { e.live = append(e.live, m...); return nil })
	} else {
		e.step("generating %d %s-shaped tool calls (seed %d, %d hours) and publishing them before any consumer starts", cfg.Events, cfg.Shape, cfg.Seed, cfg.Hours)
		res.Publish, e.ends, e.stats, err = prepublish(ctx, e)
	}
	if err != nil {
		return nil, err
	}
	res.Events, res.Messages, res.Bytes = e.stats.ToolCalls, e.stats.total(), e.stats.Bytes
	if note := e.stats.unroutedNote(); note != "" {
		res.Notes = append(res.Notes, note)
	}
	if !cfg.Live {
		// The in-process Kafka builds each fetch response in fresh memory, which the first
		// reads after the publish fault in from the OS: the first timed consumer paid 3 to 8
		// CPU seconds more of the broker's per million events than any later one. One
		// untimed read of the topic first gives every run the same broker.
		e.step("warming the in-process Kafka up: a bare reader reads the topic once, untimed (group %s)", WarmUpGroup)
		if _, err := runBareReader(ctx, e.st.KafkaBrokers, WarmUpGroup, e.starts, e.stats.Messages[topicToolCalls]); err != nil {
			return nil, fmt.Errorf("warm-up read: %w", err)
		}
	}

	for run := 1; run <= cfg.Runs; run++ {
		r := RunResult{Run: run}
		if cfg.Live && run > 1 {
			// Each live run starts on emptied topics: with the earlier runs' messages still
			// there, its member would first rebuild its dedup windows from them (up to a
			// window of offsets before where the run starts) and then chase that backlog,
			// so every run after the first measured the catch-up, not the publish-to-queryable
			// latency. It also publishes events of its own (seed + run − 1).
			e.step("run %d: emptying the topics the earlier runs published to", run)
			if err := emptyTopics(ctx, e.st.KafkaBrokers, publishedTopics(e.stats)); err != nil {
				return nil, err
			}
			runCfg := cfg
			runCfg.Seed = cfg.Seed + int64(run) - 1
			e.step("run %d: generating its %d events (seed %d)", run, cfg.Events, runCfg.Seed)
			e.live = nil
			if e.stats, err = generate(ctx, runCfg, func(m []kafka.Message) error { e.live = append(e.live, m...); return nil }); err != nil {
				return nil, err
			}
		}
		e.step("run %d of %d: resetting mcpulse's stores (database %s re-created, Redis flushed)", run, cfg.Runs, migrations.Database)
		if err := resetStores(ctx, e); err != nil {
			return nil, err
		}
		redisBefore, err := usedMemory(ctx, e.rdb)
		if err != nil {
			return nil, err
		}
		if cfg.Live {
			e.step("run %d: mcpulse's consumer (group %s) while the events are published%s", run, runGroup(McpulseGroup, run), rateNote(cfg.Rate))
		} else {
			e.step("run %d: mcpulse's consumer (group %s)", run, runGroup(McpulseGroup, run))
		}
		if err := runMcpulse(ctx, e, run, &r); err != nil {
			return nil, err
		}
		if err := redisGrowth(ctx, e.rdb, redisBefore, e.stats.ToolCalls, &r.Redis); err != nil {
			return nil, err
		}
		if cfg.Shape == ShapeSDK && run == 1 {
			if note, err := derivationNote(ctx, e.ch); err != nil {
				return nil, err
			} else if note != "" {
				res.Notes = append(res.Notes, note)
			}
		}
		sealStart := time.Now()
		sealed, err := rollup.SealClosedHours(ctx, e.ch, time.Now())
		if err != nil {
			return nil, err
		}
		r.Seal = SealPhase{Hours: len(sealed.Hours), Seconds: time.Since(sealStart).Seconds()}
		if r.Rollups, err = rollupStorage(ctx, e.ch); err != nil {
			return nil, err
		}
		if r.RawToolCalls, err = tableStorage(ctx, e.ch, "tool_calls"); err != nil {
			return nil, err
		}
		if r.RawTables, err = rawStorage(ctx, e.ch); err != nil {
			return nil, err
		}
		if r.ToolCallColumns, err = largestColumns(ctx, e.ch, "tool_calls", r.RawToolCalls.Rows); err != nil {
			return nil, err
		}
		if peers {
			group := runGroup(KafkaEngineGroup, run)
			e.step("run %d: ClickHouse Kafka table engine (JSONEachRow) → materialized view → copy of tool_calls (group %s)", run, group)
			pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
			r.KafkaEngine, r.PeerDefaults, err = runKafkaEngine(pctx, e.ch, e.st.KafkaBrokers, group, e.starts, e.stats.ToolCalls)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("kafka engine peer: %w", err)
			}
			group = runGroup(BareReaderGroup, run)
			e.step("run %d: bare kafka-go reader that reads and discards (group %s)", run, group)
			pctx, cancel = context.WithTimeout(ctx, cfg.PhaseTimeout)
			r.BareReader, err = runBareReader(pctx, e.st.KafkaBrokers, group, e.starts, e.stats.Messages[topicToolCalls])
			cancel()
			if err != nil {
				return nil, fmt.Errorf("bare reader peer: %w", err)
			}
			r.VsKafkaEngine = ratio(r.Mcpulse.EventsPerSecond, r.KafkaEngine.EventsPerSecond)
			r.VsBareReader = ratio(r.Mcpulse.EventsPerSecond, r.BareReader.EventsPerSecond)
		}
		r.LoadAvg = loadAvg()
		res.Runs = append(res.Runs, r)
	}
	res.Machine = machine()
	res.summarize()
	res.Summary.setCorpus(e.stats)
	return res, nil
}

func rateNote(rate int) string {
	if rate == 0 {
		return ""
	}
	return fmt.Sprintf(" at %d events/s", rate)
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// derivationNote says when mcpulse's consumer stored no derived ignored keys for the SDK's
// tool calls (a build that does not derive them yet): its figures then leave that work out.
func derivationNote(ctx context.Context, ch driver.Conn) (string, error) {
	cols, err := describe(ctx, ch, migrations.Database+".tool_calls")
	if err != nil {
		return "", err
	}
	if slices.ContainsFunc(cols, func(c tableColumn) bool { return c.Name == "ignored_keys_source" }) {
		var derived uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM "+migrations.Database+".tool_calls WHERE ignored_keys_source IN ('response', 'schema', 'not_measurable')").Scan(&derived); err != nil {
			return "", err
		}
		if derived > 0 {
			return "", nil
		}
	}
	return "PENDING: mcpulse's consumer derived no ignored keys from the SDK's tool calls (none stored with source response, schema or not_measurable): its sdk figures leave that work out", nil
}

// topicEnds returns the end offsets of every topic of mcpulse (mcpulse's consumer reads them all).
func topicEnds(ctx context.Context, brokers []string) (map[string]map[int]int64, error) {
	out := map[string]map[int]int64{}
	for _, topic := range ingest.AllTopics {
		ends, err := endOffsets(ctx, brokers, topic)
		if err != nil {
			return nil, err
		}
		out[topic] = ends
	}
	return out, nil
}

// emptyTopics deletes topics and creates them again with as many partitions each, empty.
func emptyTopics(ctx context.Context, brokers []string, topics []string) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	parts, err := partitionsOf(ctx, client, topics)
	if err != nil {
		return err
	}
	del, err := client.DeleteTopics(ctx, &kafka.DeleteTopicsRequest{Topics: topics})
	if err != nil {
		return fmt.Errorf("delete topics %v: %w", topics, err)
	}
	create := &kafka.CreateTopicsRequest{}
	for _, t := range topics {
		if err := del.Errors[t]; err != nil {
			return fmt.Errorf("delete topic %s: %w", t, err)
		}
		create.Topics = append(create.Topics, kafka.TopicConfig{Topic: t, NumPartitions: len(parts[t]), ReplicationFactor: 1})
	}
	created, err := client.CreateTopics(ctx, create)
	if err != nil {
		return fmt.Errorf("create topics %v: %w", topics, err)
	}
	for _, t := range topics {
		if err := created.Errors[t]; err != nil {
			return fmt.Errorf("create topic %s: %w", t, err)
		}
	}
	return nil
}

// resetStores gives mcpulse empty stores: its ClickHouse database dropped and migrated again,
// Redis database flushed (the bench's stack serves nothing else).
func resetStores(ctx context.Context, e *env) error {
	if err := e.ch.Exec(ctx, "DROP DATABASE IF EXISTS "+migrations.Database); err != nil {
		return fmt.Errorf("drop database %s: %w", migrations.Database, err)
	}
	if _, err := migrations.Up(ctx, e.ch, e.cfg.Logger); err != nil {
		return err
	}
	if err := e.rdb.FlushDB(ctx).Err(); err != nil {
		return fmt.Errorf("redis FLUSHDB: %w", err)
	}
	return nil
}
