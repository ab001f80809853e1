// Package demo runs the whole pipeline once on the embedded stack: start the stack, migrate,
// generate a corpus, publish it, consume until drained, and compare every figure the stores
// hold with the corpus's expected outcome; then it leaves the history the dashboards show and
// the corpus cannot hold (schema check runs, suppression resets: see history.go).
// `mcpulse demo`, `mcpulse bench dashboards` and the end-to-end tests use it.
package demo

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/live"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/demo/report"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/ingest/gateway"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// EmbeddedDDLTimeout bounds each ON CLUSTER statement's wait for every host of an embedded
// cluster (migrations.Options.DDLTimeout). Its hosts share this machine's cores with the
// consumer and, in the tests, with other test packages: a statement of the 2×2 cluster's
// migration waited more than the production default of 30 s there under load.
const EmbeddedDDLTimeout = 2 * time.Minute

// Config configures Run.
type Config struct {
	// Events is how many events to generate. Default: 200000.
	Events int
	// Seed drives the generator. Default: 1.
	Seed int64
	// Shape is how the tool calls are written (gen.ShapeDemo or gen.ShapeSDK). Default:
	// gen.ShapeDemo.
	Shape gen.Shape
	// DataDir keeps the stack's data and the corpus; "" uses a temporary directory removed at
	// the end. A directory that already holds a run's data is refused (the comparison assumes
	// empty stores).
	DataDir string
	// Progress receives one line per step and periodic progress; nil discards it.
	Progress io.Writer
	// Logger receives the services' logs. Default: discard.
	Logger *slog.Logger
	// Stack, when set, is used instead of starting one (its stores must be empty).
	Stack *stack.Stack
	// KafkaBrokers is the broker count of the embedded Kafka the demo starts when Stack is nil
	// (stack.Config.Brokers: topics replicated on min(3, KafkaBrokers) brokers). Default: 1.
	KafkaBrokers int
	// Shards and Replicas, when either is above 1 and Stack is nil, run ClickHouse as a
	// cluster of Shards × Replicas servers and a ZooKeeper (stack.Config.Shards, Replicas),
	// migrated ON CLUSTER, with the sharded layout when Shards is above 1 (Distributed tables
	// over mcpulse_local: migrations.Options.Sharded); the consumer and every comparison use
	// its first host. Default: 1 and 1, one server.
	Shards, Replicas int
	// NoHistory skips what the demo leaves after its comparison for the dashboards: schema
	// check runs of the scheduler's ratchet job over the generator's MCP servers (served on
	// loopback) and two suppression resets through the ops reset path. Default: false (left).
	NoHistory bool
	// NoLive skips the live servers (demo/live): real MCP servers and clients on loopback whose
	// PostHog events and OpenTelemetry spans go through an in-process gateway, and whose
	// figures are checked like the corpus's. Default: false (run).
	NoLive bool
}

// Run executes the demo and returns its summary, whose Mismatches list every figure that
// differs from the expected outcome (empty when all agree). An error means the demo could not
// run at all.
func Run(ctx context.Context, cfg Config) (*report.Summary, error) {
	if cfg.Events == 0 {
		cfg.Events = 200000
	}
	if cfg.Seed == 0 {
		cfg.Seed = 1
	}
	if cfg.Progress == nil {
		cfg.Progress = io.Discard
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	step := func(format string, args ...any) {
		fmt.Fprintf(cfg.Progress, "▸ "+format+"\n", args...)
	}

	dir := cfg.DataDir
	if dir == "" {
		tmp, err := os.MkdirTemp("", "mcpulse-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if _, err := os.Stat(filepath.Join(dir, "events.jsonl")); err == nil {
		return nil, fmt.Errorf("%s already holds a demo run; choose an empty --data-dir", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}

	st := cfg.Stack
	if st == nil {
		step("starting the embedded stack (kfake, redis-server, clickhouse-server) in %s", dir)
		start := time.Now()
		s, err := stack.Start(ctx, stack.Config{DataDir: filepath.Join(dir, "stack"), Brokers: cfg.KafkaBrokers,
			Shards: cfg.Shards, Replicas: cfg.Replicas, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		st = s
		step("stack ready in %.1fs", time.Since(start).Seconds())
	}

	ch, err := stores.OpenClickHouse(ctx, st.ClickHouseDSN)
	if err != nil {
		return nil, err
	}
	defer ch.Close()
	rdb, err := stores.OpenRedis(ctx, st.RedisURL)
	if err != nil {
		return nil, err
	}
	defer rdb.Close()

	var opts migrations.Options
	if cc := st.ClickHouseCluster; cc != nil { // every host on this machine: EmbeddedDDLTimeout
		opts = migrations.Options{Cluster: cc.Name, Sharded: cc.Shards > 1, DDLTimeout: EmbeddedDDLTimeout}
		step("migrating ClickHouse cluster %s (%d shards × %d replicas) ON CLUSTER, sharded: %t", cc.Name, cc.Shards, cc.Replicas, opts.Sharded)
	} else {
		step("migrating ClickHouse")
	}
	migrateStart := time.Now()
	if _, err := migrations.UpWith(ctx, ch, cfg.Logger, opts); err != nil {
		return nil, err
	}
	step("migrated in %.1fs", time.Since(migrateStart).Seconds())

	corpus := filepath.Join(dir, "events.jsonl")
	step("generating %d events (seed %d) into %s", cfg.Events, cfg.Seed, corpus)
	genCfg := gen.Config{Events: cfg.Events, Seed: cfg.Seed, End: time.Now().UTC().Truncate(time.Hour), Shape: cfg.Shape, Reports: true}
	if cfg.Shape != gen.ShapeSDK {
		genCfg.ContactViolations = ContactViolations
	}
	if _, err := gen.WriteFiles(genCfg, corpus); err != nil {
		return nil, err
	}
	expected, err := outcome.Read(corpus + ".expected.json")
	if err != nil {
		return nil, err
	}

	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: st.KafkaBrokers, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	defer pub.Close()
	consumer, err := consumers.New(consumers.Config{
		Brokers: st.KafkaBrokers, Redis: rdb, ClickHouse: ch, DeadLetters: pub, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	defer consumer.Close()

	// Publish and consume at the same time, as in production; the run ends when the group
	// has committed every partition to its end after the last event was published.
	began := time.Now()
	consumeCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	consumed := make(chan error, 1)
	go func() { consumed <- consumer.Run(consumeCtx) }()

	step("publishing %s and consuming in consumer group %q", filepath.Base(corpus), consumers.DefaultGroupID)
	f, err := os.Open(corpus)
	if err != nil {
		return nil, err
	}
	lastReport := time.Now()
	pubStats, err := ingest.PublishFile(ctx, pub, f, filepath.Base(corpus), func(p ingest.Progress) {
		if time.Since(lastReport) >= time.Second {
			fmt.Fprintf(cfg.Progress, "  published %d lines (%d dead-lettered), %d events stored so far\n", p.Published+p.DeadLettered, p.DeadLettered, storedSoFar(consumer))
			lastReport = time.Now()
		}
	})
	f.Close()
	if err != nil {
		return nil, fmt.Errorf("publish: %w", err)
	}
	step("published %d events, %d lines dead-lettered; waiting for the consumers to drain", pubStats.Published, pubStats.DeadLettered)
	if err := waitDrained(ctx, consumer, cfg.Progress); err != nil {
		return nil, err
	}
	elapsed := time.Since(began)

	step("comparing the stores with %s", filepath.Base(corpus)+".expected.json")
	observed, err := report.Observe(ctx, ch, rdb)
	if err != nil {
		return nil, err
	}
	summary, err := report.BuildSummary(ctx, ch, observed, 10)
	if err != nil {
		return nil, err
	}
	stats := consumer.Stats()
	summary.DuplicatesDropped = stats.Duplicates
	summary.Throughput = report.Throughput{
		Events: int64(pubStats.Lines), Seconds: elapsed.Seconds(), EventsPerSecond: float64(pubStats.Lines) / elapsed.Seconds(),
	}
	summary.Mismatches = outcome.Compare(expected, observed, time.Now())
	if stats.Duplicates != int64(expected.Corpus.Duplicates) {
		summary.Mismatches = append(summary.Mismatches, fmt.Sprintf("duplicates dropped: want %d, got %d", expected.Corpus.Duplicates, stats.Duplicates))
	}
	step("auditing the contact policy (violations stored for the dashboards)")
	contactMismatches, err := auditContactPolicy(ctx, ch, corpus, expected.ContactPolicy, time.Now())
	if err != nil {
		return nil, err
	}
	summary.Mismatches = append(summary.Mismatches, contactMismatches...)

	if !cfg.NoLive {
		step("running live MCP servers (official Go SDK): per-session tool sets, a paginated tools/list, a tool removed at run time; one reports PostHog events, one OpenTelemetry spans")
		mismatches, calls, got, err := runLive(ctx, st.KafkaBrokers, pub, ch, cfg.Logger, func() error { return waitDrained(ctx, consumer, cfg.Progress) })
		if err != nil {
			return nil, err
		}
		summary.Live = got
		step("live servers: %d calls through the gateway (capture API and /v1/traces), %d figures differ", calls, len(mismatches))
		summary.Mismatches = append(summary.Mismatches, mismatches...)
	}
	if cc := st.ClickHouseCluster; cc != nil && cc.Shards > 1 {
		perShard, err := toolCallsPerShard(ctx, cc)
		if err != nil {
			return nil, err
		}
		summary.ToolCallsPerShard = perShard
		for i, n := range perShard {
			if n == 0 {
				summary.Mismatches = append(summary.Mismatches, fmt.Sprintf("tool_calls: shard %d holds no row; want rows on every shard", i+1))
			}
		}
	}
	if summary.Mismatches == nil {
		summary.Mismatches = []string{}
	}

	// After the comparison, so it is unchanged: history for the dashboards that the corpus
	// does not hold (the consumers are still running to store the resets' audit events).
	if !cfg.NoHistory {
		listings, err := PublishServedSchemas(ctx, pub, genCfg.End)
		if err != nil {
			return nil, err
		}
		if err := waitDrained(ctx, consumer, cfg.Progress); err != nil {
			return nil, err
		}
		step("published %d tools/list events of the demo servers' SDK (schemas seen in traffic)", listings)
		runs, err := RecordSchemaChecks(ctx, ch, genCfg.End)
		if err != nil {
			return nil, err
		}
		prompts, err := RecordIntentPromptVersions(ctx, ch, genCfg.End)
		if err != nil {
			return nil, err
		}
		reset, err := resetSomeIdentities(ctx, ch, rdb, pub, expected, time.Now())
		if err != nil {
			return nil, err
		}
		lintRuns, err := RecordCampaignLint(ctx, ch, genCfg.End)
		if err != nil {
			return nil, err
		}
		step("left history for the dashboards: %d schema check runs, %d intent prompt versions, %d suppression resets, %d campaign flag lint runs", runs, prompts, len(reset), lintRuns)
	}
	stopConsumer()
	if err := <-consumed; err != nil {
		return nil, err
	}
	return summary, nil
}

// runLive serves an in-process gateway on loopback, runs the live servers against it (their
// reports published with pub), waits for the consumers to store them (drained) and compares
// what ClickHouse holds of them with what the script implies. It returns the differences and
// the number of tool calls made, and the figures observed.
func runLive(ctx context.Context, brokers []string, pub *ingest.Publisher, ch driver.Conn, logger *slog.Logger, drained func() error) ([]string, int, []live.Figure, error) {
	const key = "phc_demo_live_servers"
	gw, err := gateway.New(gateway.Config{APIKeys: []string{key}, Brokers: brokers, Logger: logger}, pub)
	if err != nil {
		return nil, 0, nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, nil, err
	}
	hs := &http.Server{Handler: gw.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	defer hs.Close()
	want, err := live.Run(ctx, live.Config{GatewayURL: "http://" + ln.Addr().String(), APIKey: key, Logger: logger})
	if err != nil {
		return nil, 0, nil, err
	}
	if err := drained(); err != nil {
		return nil, 0, nil, err
	}
	got, err := live.Observe(ctx, ch)
	if err != nil {
		return nil, 0, nil, err
	}
	calls := 0
	for _, f := range want {
		calls += int(f.Calls)
	}
	return live.Compare(want, got), calls, got, nil
}

// toolCallsPerShard counts the rows of tool_calls (after FINAL) each shard of cc holds in
// its local table, through the shard's first host, shard 1 first.
func toolCallsPerShard(ctx context.Context, cc *stack.ClickHouseCluster) ([]int64, error) {
	out := make([]int64, cc.Shards)
	for _, h := range cc.Hosts {
		if h.Replica != 1 {
			continue
		}
		conn, err := stores.OpenClickHouse(ctx, h.DSN)
		if err != nil {
			return nil, err
		}
		var n uint64
		err = conn.QueryRow(ctx, "SELECT count() FROM "+migrations.LocalDatabase+".tool_calls FINAL").Scan(&n)
		conn.Close()
		if err != nil {
			return nil, fmt.Errorf("count tool_calls on shard %d: %w", h.Shard, err)
		}
		out[h.Shard-1] = int64(n)
	}
	return out, nil
}

func storedSoFar(c *consumers.Consumer) int64 {
	var n int64
	for _, v := range c.Stats().Stored {
		n += v
	}
	return n
}

// waitDrained polls the group's lag until every partition is committed to its end.
func waitDrained(ctx context.Context, c *consumers.Consumer, progress io.Writer) error {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		lag, err := c.Lag(ctx)
		if err != nil {
			continue
		}
		var total int64
		for _, l := range lag {
			total += l.Lag
		}
		if total == 0 {
			return nil
		}
		if time.Since(last) >= time.Second {
			fmt.Fprintf(progress, "  stored %d events, %d messages still to consume\n", storedSoFar(c), total)
			last = time.Now()
		}
	}
}
