// Package bench runs the pipeline benchmark behind `mcpulse bench pipeline` (issue 7): on the
// embedded stack it publishes N generated tool-call events to topic mcp_tool_calls while
// mcpulse's consumer drains them, then lets two peers consume the same topic in the same run —
// ClickHouse's own Kafka table engine feeding a plain MergeTree table through a materialized
// view, and a bare kafka-go consumer-group reader that only reads and discards (the ceiling) —
// and reports end-to-end events/s, publish-to-queryable latency, the consumer's peak RSS, the
// Redis memory of the dedup claims per million events, and the two ratios.
//
// Each phase runs alone on the machine (the peers start after mcpulse has drained), so the
// rates compare what each consumer does with the same CPU.
package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// Config configures Run. Zero fields take the documented defaults.
type Config struct {
	// Events is how many tool-call events are published to mcp_tool_calls. Default: 1,000,000.
	Events int
	// Seed drives the generator (same seed, same events). Default: 1.
	Seed int64
	// Rate caps the publish rate in events/s; 0 publishes as fast as Kafka acknowledges.
	// Default: 0.
	Rate int
	// SampleEvery makes every SampleEvery-th event a latency sample. Default: Events/2000,
	// at least 1.
	SampleEvery int
	// ConsumerArgv, when set, is the command that runs mcpulse's consumer as a child process
	// (e.g. the mcpulse executable with "consume", "--until-drained"); it gets the stack's
	// MCPULSE_* variables in its environment and its peak RSS is reported. When empty the
	// consumer runs in this process (tests, CPU profiles) and no RSS is reported.
	ConsumerArgv []string
	// ConsumerBatchSize is the in-process consumer's BatchSize (a child gets it from
	// ConsumerArgv). Default: 0, the consumers package's default.
	ConsumerBatchSize int
	// SkipPeers leaves out the Kafka-engine and bare-reader phases (and the ratios).
	SkipPeers bool
	// Stack, when set, is used instead of starting one. Its topic mcp_tool_calls must be
	// empty and its consumer groups unused.
	Stack *stack.Stack
	// DataDir keeps the started stack's data; "" uses a temporary directory.
	DataDir string
	// Progress receives one line per phase; nil discards it.
	Progress io.Writer
	// Logger receives the services' logs. Default: discard.
	Logger *slog.Logger
	// Published, when set, is called once every event is published, while the consumer is
	// still draining (the command takes its heap profile then). Optional.
	Published func()
	// PhaseTimeout bounds each consuming phase. Default: 30 minutes.
	PhaseTimeout time.Duration
}

func (c *Config) setDefaults() {
	if c.Events == 0 {
		c.Events = 1_000_000
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	if c.SampleEvery == 0 {
		c.SampleEvery = max(c.Events/2000, 1)
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
	if c.Rate < 0 {
		errs = append(errs, fmt.Errorf("bench: Rate must not be negative, got %d", c.Rate))
	}
	if c.SampleEvery < 1 {
		errs = append(errs, fmt.Errorf("bench: SampleEvery must be positive, got %d", c.SampleEvery))
	}
	return errors.Join(errs...)
}

// Group names of the three consumers; each reads mcp_tool_calls from its start.
const (
	// KafkaEngineGroup is the consumer group of the ClickHouse Kafka table.
	KafkaEngineGroup = "mcpulse-bench-kafka-engine"
	// BareReaderGroup is the consumer group of the bare kafka-go reader.
	BareReaderGroup = "mcpulse-bench-bare-reader"
)

// Run starts (or uses) the stack, migrates ClickHouse, generates and publishes the events,
// runs the three consumers one after the other and returns their figures. An error means
// the benchmark could not complete; the figures are only returned complete.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	step := func(format string, args ...any) { fmt.Fprintf(cfg.Progress, "▸ "+format+"\n", args...) }

	st := cfg.Stack
	if st == nil {
		step("starting the embedded stack (kfake, redis-server, clickhouse-server)")
		dir := cfg.DataDir
		if dir != "" {
			dir = filepath.Join(dir, "stack")
		}
		s, err := stack.Start(ctx, stack.Config{DataDir: dir, Logger: cfg.Logger})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		st = s
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
	step("migrating ClickHouse")
	if _, err := migrations.Up(ctx, ch, cfg.Logger); err != nil {
		return nil, err
	}

	step("generating %d tool-call events (seed %d)", cfg.Events, cfg.Seed)
	msgs, err := toolCallMessages(cfg.Events, cfg.Seed)
	if err != nil {
		return nil, err
	}
	res := &Result{Events: cfg.Events, Machine: machine()}
	for _, m := range msgs {
		res.Bytes += int64(len(m.Value))
	}

	redisBefore, err := usedMemory(ctx, rdb)
	if err != nil {
		return nil, err
	}
	step("publishing to %s while mcpulse's consumer drains it", ingest.TopicToolCalls)
	if err := runMcpulse(ctx, cfg, st, rdb, ch, msgs, res); err != nil {
		return nil, err
	}
	if err := dedupMemory(ctx, rdb, redisBefore, &res.Dedup); err != nil {
		return nil, err
	}
	if !cfg.SkipPeers {
		step("peer: ClickHouse Kafka table engine → materialized view → MergeTree (group %s)", KafkaEngineGroup)
		pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
		res.KafkaEngine, err = runKafkaEngine(pctx, ch, st.KafkaBrokers, cfg.Events)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("kafka engine peer: %w", err)
		}
		step("peer: bare kafka-go reader that reads and discards (group %s)", BareReaderGroup)
		pctx, cancel = context.WithTimeout(ctx, cfg.PhaseTimeout)
		res.BareReader, err = runBareReader(pctx, st.KafkaBrokers, cfg.Events)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("bare reader peer: %w", err)
		}
		res.VsKafkaEngine = ratio(res.Mcpulse.EventsPerSecond, res.KafkaEngine.EventsPerSecond)
		res.VsBareReader = ratio(res.Mcpulse.EventsPerSecond, res.BareReader.EventsPerSecond)
	}
	return res, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// toolCallMessages generates a corpus with demo/gen and keeps its first n tool-call lines
// (its duplicate lines included, so dedup has work; malformed lines left out, since a peer
// cannot dead-letter them), keyed by distinct_id as the publisher keys them.
func toolCallMessages(n int, seed int64) ([]kafka.Message, error) {
	// Tool calls are gen.ToolCallShare of the valid lines; ask for a little more.
	lines := int(float64(n)/gen.ToolCallShare*1.03) + 100
	for {
		var buf bytes.Buffer
		buf.Grow(lines * 800)
		// A fixed end keeps the corpus the same from run to run (same seed, same bytes).
		end := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		if _, err := gen.Generate(gen.Config{Events: lines, Seed: seed, End: end}, &buf); err != nil {
			return nil, err
		}
		msgs := make([]kafka.Message, 0, n)
		data := buf.Bytes()
		for len(data) > 0 && len(msgs) < n {
			line := data
			if i := bytes.IndexByte(data, '\n'); i >= 0 {
				line, data = data[:i], data[i+1:]
			} else {
				data = nil
			}
			ev, err := ingest.Parse(line)
			if err != nil || ev.Kind != ingest.KindToolCall {
				continue
			}
			msgs = append(msgs, kafka.Message{Topic: ingest.TopicToolCalls, Key: []byte(ev.DistinctID), Value: line})
		}
		if len(msgs) == n {
			return msgs, nil
		}
		lines = lines * 5 / 4
	}
}

// runMcpulse publishes msgs and runs mcpulse's consumer until its group has committed every
// partition of mcp_tool_calls past the last published offset.
func runMcpulse(ctx context.Context, cfg Config, stack *stack.Stack, rdb redis.UniversalClient, ch driver.Conn, msgs []kafka.Message, res *Result) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: stack.KafkaBrokers, Logger: cfg.Logger})
	if err != nil {
		return err
	}
	defer pub.Close()

	// The consumer: a child process (its own RSS), or in this process.
	meter := newCPUMeter()
	cpu0 := meter.read()
	began := time.Now()
	consumerDone := make(chan error, 1)
	var child *exec.Cmd
	var hwm *atomic.Int64 // the child's peak RSS
	var stopInProcess context.CancelFunc
	if len(cfg.ConsumerArgv) > 0 {
		child = exec.CommandContext(ctx, cfg.ConsumerArgv[0], cfg.ConsumerArgv[1:]...)
		child.Env = append(os.Environ(), stack.Env()...)
		var stderr tailBuffer
		child.Stderr = &stderr
		if err := child.Start(); err != nil {
			return fmt.Errorf("start consumer: %w", err)
		}
		hwm = watchPeakRSS(ctx, child.Process.Pid)
		go func() {
			err := child.Wait()
			if err != nil {
				err = fmt.Errorf("consumer %s: %w; its last output: %s", strings.Join(cfg.ConsumerArgv, " "), err, stderr.String())
			}
			consumerDone <- err
		}()
	} else {
		c, err := consumers.New(consumers.Config{
			Brokers: stack.KafkaBrokers, Redis: rdb, ClickHouse: ch, DeadLetters: pub,
			BatchSize: cfg.ConsumerBatchSize, Logger: cfg.Logger,
		})
		if err != nil {
			return err
		}
		defer c.Close()
		var cctx context.Context
		cctx, stopInProcess = context.WithCancel(ctx)
		defer stopInProcess()
		go func() { consumerDone <- c.Run(cctx) }()
	}

	w := &kafka.Writer{
		Addr:         kafka.TCP(stack.KafkaBrokers...),
		Balancer:     kafka.Murmur2Balancer{}, // as ingest.Publisher: an identity stays on one partition
		RequiredAcks: kafka.RequireAll,
		BatchSize:    ingest.DefaultBatchSize,
		BatchBytes:   16 << 20,
		BatchTimeout: ingest.DefaultBatchTimeout,
	}
	tracker := newTracker()
	w.Completion = tracker.completion
	defer w.Close()

	// Sampled events carry a header with their sequence number; the consumers ignore headers.
	for i := 0; i < len(msgs); i += cfg.SampleEvery {
		msgs[i].Headers = []kafka.Header{{Key: sampleHeader, Value: strconv.AppendInt(nil, int64(i), 10)}}
	}

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	drained := make(chan time.Time, 1)
	go func() {
		t, err := tracker.pollCommits(pollCtx, stack.KafkaBrokers, consumers.DefaultGroupID)
		if err == nil {
			drained <- t
		}
		close(drained)
	}()

	pubStart := time.Now()
	const chunk = 10_000
	for i := 0; i < len(msgs); i += chunk {
		part := msgs[i:min(i+chunk, len(msgs))]
		if cfg.Rate > 0 {
			due := pubStart.Add(time.Duration(float64(i) / float64(cfg.Rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		if err := w.WriteMessages(ctx, part...); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	pubEnd := time.Now()
	tracker.published()
	if cfg.Published != nil {
		cfg.Published()
	}
	res.Publish = Phase{Seconds: pubEnd.Sub(pubStart).Seconds(), EventsPerSecond: float64(len(msgs)) / pubEnd.Sub(pubStart).Seconds()}

	var doneAt time.Time
	select {
	case t, ok := <-drained:
		if !ok {
			return fmt.Errorf("mcpulse consumer did not drain %s: %w", ingest.TopicToolCalls, context.Cause(ctx))
		}
		doneAt = t
	case err := <-consumerDone:
		return fmt.Errorf("mcpulse consumer stopped before draining: %v", err)
	}
	cpu := meter.read().sub(cpu0)
	res.Mcpulse = Phase{Seconds: doneAt.Sub(pubStart).Seconds()}
	res.Latency = tracker.latency()
	res.StartupSeconds = pubStart.Sub(began).Seconds()

	if child != nil {
		select {
		case err := <-consumerDone:
			if err != nil {
				return err
			}
		case <-time.After(time.Minute):
			_ = child.Process.Kill()
			<-consumerDone
			return errors.New("the consumer child process did not exit within a minute of draining")
		}
		res.ConsumerPeakRSSBytes = hwm.Load()
		// Its whole life: start-up and the idle wait before it exits are small beside the work.
		cpu.Consumer = child.ProcessState.UserTime().Seconds() + child.ProcessState.SystemTime().Seconds()
		res.Mcpulse.finish(len(msgs), cpu)
	} else {
		res.Mcpulse.finish(len(msgs), cpu)
		stopInProcess()
		if err := <-consumerDone; err != nil {
			return err
		}
	}
	return nil
}

// sampleHeader marks a latency sample; its value is the event's sequence number.
const sampleHeader = "mcpulse-bench-seq"

// tracker records when Kafka acknowledged each sampled event and at which partition and
// offset, and when the consumer group's committed offset first passed it.
type tracker struct {
	mu      sync.Mutex
	samples []sample
	ends    map[int]int64 // partition → next offset after the last acknowledged message
	done    bool          // every message was acknowledged
}

type sample struct {
	partition int
	offset    int64
	acked     time.Time
	committed time.Time
}

func newTracker() *tracker { return &tracker{ends: map[int]int64{}} }

// completion is the kafka-go Writer's Completion callback: the messages carry their partition
// and offset once acknowledged.
func (t *tracker) completion(msgs []kafka.Message, err error) {
	if err != nil {
		return // WriteMessages returns the error
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range msgs {
		m := &msgs[i]
		if m.Offset+1 > t.ends[m.Partition] {
			t.ends[m.Partition] = m.Offset + 1
		}
		for _, h := range m.Headers {
			if h.Key == sampleHeader {
				t.samples = append(t.samples, sample{partition: m.Partition, offset: m.Offset, acked: now})
			}
		}
	}
}

func (t *tracker) published() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

// commitPoll is how often the group's committed offsets are read; a latency is overstated by
// at most this much.
const commitPoll = 50 * time.Millisecond

// pollCommits reads the group's committed offsets of mcp_tool_calls every commitPoll, stamps
// the samples they pass, and returns the time at which every partition was committed to its
// end once everything was published.
func (t *tracker) pollCommits(ctx context.Context, brokers []string, group string) (time.Time, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	tick := time.NewTicker(commitPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
		resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{ingest.TopicToolCalls: t.partitions()}})
		if err != nil || resp.Error != nil {
			continue
		}
		now := time.Now()
		committed := map[int]int64{}
		for _, p := range resp.Topics[ingest.TopicToolCalls] {
			if p.Error == nil {
				committed[p.Partition] = p.CommittedOffset
			}
		}
		if t.observe(committed, now) {
			return now, nil
		}
	}
}

func (t *tracker) partitions() []int {
	t.mu.Lock()
	defer t.mu.Unlock()
	ps := []int{0}
	for p := range t.ends {
		if p != 0 {
			ps = append(ps, p)
		}
	}
	return ps
}

// observe stamps the samples below the committed offsets and reports whether every
// partition is committed to its end after the last publish.
func (t *tracker) observe(committed map[int]int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.samples {
		s := &t.samples[i]
		if s.committed.IsZero() && committed[s.partition] > s.offset {
			s.committed = now
		}
	}
	if !t.done {
		return false
	}
	for p, end := range t.ends {
		if committed[p] < end {
			return false
		}
	}
	return true
}

func (t *tracker) latency() Latency {
	t.mu.Lock()
	defer t.mu.Unlock()
	ds := make([]float64, 0, len(t.samples))
	for _, s := range t.samples {
		if !s.committed.IsZero() {
			ds = append(ds, s.committed.Sub(s.acked).Seconds()*1000)
		}
	}
	slices.Sort(ds)
	l := Latency{Samples: len(ds)}
	if len(ds) > 0 {
		l.P50Ms = quantile(ds, 0.50)
		l.P99Ms = quantile(ds, 0.99)
		l.MaxMs = ds[len(ds)-1]
	}
	return l
}

// quantile is the nearest-rank quantile of sorted values.
func quantile(sorted []float64, q float64) float64 {
	i := int(float64(len(sorted))*q+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// tailBuffer keeps the last 4 KiB written to it (a child's stderr for an error message).
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if len(b.buf) > 4096 {
		b.buf = b.buf[len(b.buf)-4096:]
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(string(b.buf))
}
