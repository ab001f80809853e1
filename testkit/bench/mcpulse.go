package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
)

const topicToolCalls = ingest.TopicToolCalls

// topicPartition names one partition of one topic.
type topicPartition struct {
	topic     string
	partition int
}

// newWriter returns the publisher the benchmark uses: kafka-go's Writer configured as
// ingest.Publisher is (murmur2 on the key, so an identity stays on one partition; acks=all).
func newWriter(brokers []string, completion func([]kafka.Message, error)) *kafka.Writer {
	return &kafka.Writer{
		Addr:         kafka.TCP(brokers...),
		Balancer:     kafka.Murmur2Balancer{},
		RequiredAcks: kafka.RequireAll,
		BatchSize:    ingest.DefaultBatchSize,
		BatchBytes:   1_000_000, // Kafka's default message.max.bytes (kfake's too), as ingest.Publisher
		BatchTimeout: ingest.DefaultBatchTimeout,
		Completion:   completion,
	}
}

// prepublish generates the corpus and publishes it, returning the publish phase (generation
// included: nothing consumes yet) and every partition's end offset.
func prepublish(ctx context.Context, e *env) (Phase, map[topicPartition]int64, *corpusStats, error) {
	tr := newTracker()
	w := newWriter(e.st.KafkaBrokers, tr.completion)
	defer w.Close()
	meter := newCPUMeter()
	cpu0 := meter.read()
	start := time.Now()
	stats, err := generate(ctx, e.cfg, func(m []kafka.Message) error {
		if err := w.WriteMessages(ctx, m...); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
		return nil
	})
	if err != nil {
		return Phase{}, nil, nil, err
	}
	p := Phase{Seconds: time.Since(start).Seconds()}
	p.finish(stats.total(), meter.read().sub(cpu0))
	return p, tr.endOffsets(), stats, nil
}

// runMcpulse runs mcpulse's consumer in group McpulseGroup-run<run> until its committed
// offsets reach the end of every partition the corpus was published to. Pre-published, the
// phase runs from starting the consumer (its start-up included, as the peers' is) to that
// moment; live, from the first publish, after the consumer has joined its group.
func runMcpulse(ctx context.Context, e *env, run int, r *RunResult) error {
	ctx, cancel := context.WithTimeout(ctx, e.cfg.PhaseTimeout)
	defer cancel()
	group := runGroup(McpulseGroup, run)
	tr := newTracker()
	starts := e.starts
	if e.cfg.Live {
		// Start the group where the topics end now, so it reads only this run's events.
		var err error
		if starts, err = topicEnds(ctx, e.st.KafkaBrokers); err != nil {
			return err
		}
	} else {
		tr.ends, tr.done = e.ends, true
	}
	if err := startGroup(ctx, e.st.KafkaBrokers, group, starts); err != nil {
		return err
	}
	if run == 1 && e.cfg.Midway != nil {
		tr.midway = e.cfg.Midway
	}

	meter := newCPUMeter()
	cpu0 := meter.read()
	began := time.Now()
	c, err := startMembers(ctx, e, group, run)
	if err != nil {
		return err
	}
	defer c.stop()

	pollCtx, stopPolling := context.WithCancel(ctx)
	defer stopPolling()
	drained := make(chan time.Time, 1)
	go func() {
		t, err := tr.pollCommits(pollCtx, e.st.KafkaBrokers, group, publishedTopics(e.stats))
		if err == nil {
			drained <- t
		}
		close(drained)
	}()

	start := began
	if e.cfg.Live {
		if err := waitForMembers(ctx, e.st.KafkaBrokers, group, c.exited); err != nil {
			return err
		}
		start = time.Now()
		if err := publishLive(ctx, e, tr); err != nil {
			return err
		}
		r.Publish = Phase{Seconds: time.Since(start).Seconds()}
		r.Publish.EventsPerSecond = float64(len(e.live)) / r.Publish.Seconds
	}

	var doneAt time.Time
	select {
	case t, ok := <-drained:
		if !ok {
			return fmt.Errorf("mcpulse's consumer did not drain the topics within %s: %w", e.cfg.PhaseTimeout, context.Cause(ctx))
		}
		doneAt = t
	case err := <-c.exited:
		return fmt.Errorf("mcpulse's consumer stopped before draining the topics: %v", err)
	}
	cpu := meter.read().sub(cpu0)
	r.Mcpulse = Phase{Seconds: doneAt.Sub(start).Seconds()}
	if e.cfg.Live {
		r.Latency = tr.latency()
		r.StartupSeconds = start.Sub(began).Seconds()
	}
	consumerCPU, rss, err := c.finish()
	if err != nil {
		return err
	}
	cpu.Consumer = consumerCPU
	r.ConsumerPeakRSSBytes = rss
	r.Mcpulse.finish(e.stats.ToolCalls, cpu)
	return nil
}

// publishedTopics lists the topics the corpus put messages on, in a stable order.
func publishedTopics(s *corpusStats) []string {
	var out []string
	for t := range s.Messages {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// publishLive publishes the held corpus, at most cfg.Rate events/s, every SampleEvery-th
// message carrying a sample header (the consumers ignore headers).
func publishLive(ctx context.Context, e *env, tr *tracker) error {
	every := e.cfg.SampleEvery
	if every == 0 {
		every = max(len(e.live)/2000, 1)
	}
	for i := range e.live {
		e.live[i].Headers = nil
		if i%every == 0 {
			e.live[i].Headers = []kafka.Header{{Key: sampleHeader, Value: strconv.AppendInt(nil, int64(i), 10)}}
		}
	}
	w := newWriter(e.st.KafkaBrokers, tr.completion)
	defer w.Close()
	start := time.Now()
	const chunk = 1000
	for i := 0; i < len(e.live); i += chunk {
		if e.cfg.Rate > 0 {
			due := start.Add(time.Duration(float64(i) / float64(e.cfg.Rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(d):
				}
			}
		}
		if err := w.WriteMessages(ctx, e.live[i:min(i+chunk, len(e.live))]...); err != nil {
			return fmt.Errorf("publish: %w", err)
		}
	}
	tr.published()
	return nil
}

// consumer is mcpulse's consumer for one run: a child process or a goroutine.
type consumer struct {
	done  chan struct{} // closed when the consumer has exited, err set
	err   error         // the consumer's exit
	child *exec.Cmd
	hwm   *atomic.Int64 // the child's peak RSS
	stop  func()        // stops an in-process consumer (no-op for a child, which exits drained)
}

// members are the consumers of mcpulse's group in one run (Config.ConsumerMembers).
type members struct {
	all    []*consumer
	exited chan error // receives the first member's exit
}

// startMembers starts Config.ConsumerMembers consumers (at least one) in group.
func startMembers(ctx context.Context, e *env, group string, run int) (*members, error) {
	m := &members{exited: make(chan error, 1)}
	for member := 1; member <= max(e.cfg.ConsumerMembers, 1); member++ {
		c, err := startConsumer(ctx, e, group, run, member)
		if err != nil {
			m.stop()
			return nil, err
		}
		m.all = append(m.all, c)
		go func() {
			<-c.done
			select {
			case m.exited <- c.err:
			default:
			}
		}()
	}
	return m, nil
}

// stop stops every in-process member (a child exits drained by itself).
func (m *members) stop() {
	for _, c := range m.all {
		c.stop()
	}
}

// finish waits for every member as consumer.finish does: the sum of their CPU seconds, the
// largest peak RSS.
func (m *members) finish() (cpuSeconds float64, peakRSS int64, err error) {
	for _, c := range m.all {
		cpu, rss, ferr := c.finish()
		if ferr != nil {
			return 0, 0, ferr
		}
		cpuSeconds += cpu
		peakRSS = max(peakRSS, rss)
	}
	return cpuSeconds, peakRSS, nil
}

// childArgv is the child consumer's command line for consumer group group: ConsumerArgv,
// the group, and the consumer settings given. member (from 1) names its CPU profile.
func (c *Config) childArgv(group string, run, member int) []string {
	argv := append(slices.Clone(c.ConsumerArgv), "--group", group)
	if c.ConsumerCPUProfile != "" {
		path := consumerProfilePath(c.ConsumerCPUProfile, run)
		if member > 1 {
			path += ".member" + strconv.Itoa(member)
		}
		argv = append(argv, "--cpuprofile", path)
	}
	if n := c.ConsumerBatchSize; n > 0 {
		argv = append(argv, "--batch-size", strconv.Itoa(n))
	}
	if d := maxAgeText(c.ConsumerBatchMaxAge); d != "" {
		argv = append(argv, "--batch-max-age", d)
	}
	return argv
}

// consumerProfilePath is where run's consumer writes its CPU profile (Config.ConsumerCPUProfile).
func consumerProfilePath(path string, run int) string {
	if run <= 1 {
		return path
	}
	return path + ".run" + strconv.Itoa(run)
}

// maxAgeText is a consumer BatchMaxAge as the bench reports it, the value of the consumer's
// --batch-max-age: "" for the consumer's default (0), "0" (no bound) for
// consumers.NoBatchMaxAge, else the Go duration.
func maxAgeText(d time.Duration) string {
	switch d {
	case 0:
		return ""
	case consumers.NoBatchMaxAge:
		return "0"
	}
	return d.String()
}

func startConsumer(ctx context.Context, e *env, group string, run, member int) (*consumer, error) {
	c := &consumer{done: make(chan struct{}), stop: func() {}}
	if len(e.cfg.ConsumerArgv) > 0 {
		argv := e.cfg.childArgv(group, run, member)
		c.child = exec.CommandContext(ctx, argv[0], argv[1:]...)
		c.child.Env = append(os.Environ(), e.st.Env()...)
		var stderr tailBuffer
		c.child.Stderr = &stderr
		if err := c.child.Start(); err != nil {
			return nil, fmt.Errorf("start consumer: %w", err)
		}
		c.hwm = watchPeakRSS(ctx, c.child.Process.Pid)
		go func() {
			err := c.child.Wait()
			if err != nil {
				err = fmt.Errorf("consumer %s: %w; its last output: %s", strings.Join(argv, " "), err, stderr.String())
			}
			c.err = err
			close(c.done)
		}()
		return c, nil
	}
	pub, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: e.st.KafkaBrokers, Logger: e.cfg.Logger})
	if err != nil {
		return nil, err
	}
	cons, err := consumers.New(consumers.Config{
		Brokers: e.st.KafkaBrokers, GroupID: group, Redis: e.rdb, ClickHouse: e.ch, DeadLetters: pub,
		BatchSize: e.cfg.ConsumerBatchSize, BatchMaxAge: e.cfg.ConsumerBatchMaxAge, Logger: e.cfg.Logger,
	})
	if err != nil {
		pub.Close()
		return nil, err
	}
	cctx, cancel := context.WithCancel(ctx)
	var once sync.Once
	c.stop = func() {
		once.Do(func() {
			cancel()
			<-c.done
			cons.Close()
			pub.Close()
		})
	}
	go func() {
		err := cons.Run(cctx)
		if errors.Is(err, context.Canceled) {
			err = nil
		}
		c.err = err
		close(c.done)
	}()
	return c, nil
}

// finish waits for a child to exit after draining and returns its whole-life CPU seconds
// (start-up and the idle wait before it exits are small beside the work) and peak RSS; it
// stops an in-process consumer (CPU counted in this process; no RSS).
func (c *consumer) finish() (cpuSeconds float64, peakRSS int64, err error) {
	if c.child == nil {
		c.stop()
		return 0, 0, nil
	}
	select {
	case <-c.done:
		if c.err != nil {
			return 0, 0, c.err
		}
	case <-time.After(time.Minute):
		_ = c.child.Process.Kill()
		<-c.done
		return 0, 0, errors.New("the consumer child process did not exit within a minute of draining")
	}
	st := c.child.ProcessState
	return st.UserTime().Seconds() + st.SystemTime().Seconds(), c.hwm.Load(), nil
}

// waitForMembers waits until group is stable with at least one member (the consumer has
// joined and holds its partitions), or the consumer exits.
func waitForMembers(ctx context.Context, brokers []string, group string, exited <-chan error) error {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{group}})
		if err == nil && len(resp.Groups) == 1 && resp.Groups[0].GroupState == "Stable" && len(resp.Groups[0].Members) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("mcpulse's consumer did not join group %s: %w", group, ctx.Err())
		case err := <-exited:
			return fmt.Errorf("mcpulse's consumer exited before joining group %s: %v", group, err)
		case <-tick.C:
		}
	}
}

// sampleHeader marks a latency sample; its value is the message's sequence number.
const sampleHeader = "mcpulse-bench-seq"

// tracker records where Kafka put the published messages (each partition's end) and, for the
// sampled ones, when Kafka acknowledged them and when the consumer group's committed offset
// first passed them.
type tracker struct {
	mu      sync.Mutex
	samples []sample
	ends    map[topicPartition]int64 // next offset after the last acknowledged message
	done    bool                     // every message was acknowledged
	midway  func()                   // called once when half the messages are committed
}

type sample struct {
	at        topicPartition
	offset    int64
	acked     time.Time
	committed time.Time
}

func newTracker() *tracker { return &tracker{ends: map[topicPartition]int64{}} }

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
		tp := topicPartition{m.Topic, m.Partition}
		if m.Offset+1 > t.ends[tp] {
			t.ends[tp] = m.Offset + 1
		}
		for _, h := range m.Headers {
			if h.Key == sampleHeader {
				t.samples = append(t.samples, sample{at: tp, offset: m.Offset, acked: now})
			}
		}
	}
}

func (t *tracker) published() {
	t.mu.Lock()
	t.done = true
	t.mu.Unlock()
}

func (t *tracker) endOffsets() map[topicPartition]int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.ends)
}

// commitPoll is how often the group's committed offsets are read; a latency or a phase's end
// is overstated by at most this much.
const commitPoll = 50 * time.Millisecond

// pollCommits reads group's committed offsets of topics every commitPoll, stamps the samples
// they pass, and returns the time at which every partition was committed to its end once
// everything was published.
func (t *tracker) pollCommits(ctx context.Context, brokers []string, group string, topics []string) (time.Time, error) {
	client := &kafka.Client{Addr: kafka.TCP(brokers...), Timeout: 10 * time.Second}
	parts, err := partitionsOf(ctx, client, topics)
	if err != nil {
		return time.Time{}, err
	}
	tick := time.NewTicker(commitPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, ctx.Err()
		case <-tick.C:
		}
		resp, err := client.OffsetFetch(ctx, &kafka.OffsetFetchRequest{GroupID: group, Topics: parts})
		if err != nil || resp.Error != nil {
			continue
		}
		now := time.Now()
		committed := map[topicPartition]int64{}
		for topic, ps := range resp.Topics {
			for _, p := range ps {
				if p.Error == nil {
					committed[topicPartition{topic, p.Partition}] = p.CommittedOffset
				}
			}
		}
		if t.observe(committed, now) {
			return now, nil
		}
	}
}

// partitionsOf lists every partition of topics.
func partitionsOf(ctx context.Context, client *kafka.Client, topics []string) (map[string][]int, error) {
	meta, err := client.Metadata(ctx, &kafka.MetadataRequest{Topics: topics})
	if err != nil {
		return nil, fmt.Errorf("metadata: %w", err)
	}
	out := map[string][]int{}
	for _, t := range meta.Topics {
		if t.Error != nil {
			return nil, fmt.Errorf("metadata of %s: %w", t.Name, t.Error)
		}
		for _, p := range t.Partitions {
			out[t.Name] = append(out[t.Name], p.ID)
		}
	}
	return out, nil
}

// observe stamps the samples below the committed offsets and reports whether every
// partition is committed to its end after the last publish.
func (t *tracker) observe(committed map[topicPartition]int64, now time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range t.samples {
		s := &t.samples[i]
		if s.committed.IsZero() && committed[s.at] > s.offset {
			s.committed = now
		}
	}
	if !t.done {
		return false
	}
	var total, done int64
	for tp, end := range t.ends {
		total += end
		done += min(committed[tp], end)
	}
	if t.midway != nil && 2*done >= total {
		t.midway()
		t.midway = nil
	}
	return done == total
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
