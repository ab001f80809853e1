package consumers

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/consumers/dedup"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// Defaults of Config, named once: Config.setDefaults applies them to zero fields and the
// `mcpulse consume` flags show them, so the two cannot drift apart.
const (
	// DefaultGroupID is the Kafka consumer group of the mcpulse consumers (DESIGN.md §1).
	DefaultGroupID = "mcpulse-consumers"
	// DefaultBatchSize is Config.BatchSize's default, in messages: ClickHouse stores a row of
	// a 50,000-row insert for about a third of the CPU a row of a 5,000-row one costs (fewer,
	// larger parts to write and merge), and 100,000-message batches cut its CPU per event by a
	// further 15-20% (`mcpulse bench pipeline`: 13.8 → 11-12 µs per demo event, 48-49 → 37-43
	// per SDK-shaped one). A batch's raw rows are streamed in chunks (Config.BatchBytes), so
	// its size does not follow the consumer's memory; a consumer that keeps up closes a batch
	// per chunk anyway (Config.BatchWait).
	DefaultBatchSize = 100_000
	// DefaultBatchBytes is Config.BatchBytes's default: the bytes a chunk of a batch may
	// hold, each message counted as its key and value plus MessageOverhead. A chunk's memory
	// follows those bytes, not its count (the values, their decoded events and rows, the
	// insert's column buffers), and two chunks are in flight (one prepared while one is
	// stored), so this bound keeps both near the same size whatever the events' size:
	// 2,400-byte SDK tool calls close a chunk at about 4,000 messages, 835-byte demo events
	// at about 7,000.
	DefaultBatchBytes = 16 << 20
	// DefaultBatchWait is Config.BatchWait's default. A consumer that keeps up closes a batch
	// after this long, so it bounds the time from publish to queryable (plus one store).
	DefaultBatchWait = 500 * time.Millisecond
	// DefaultBatchMaxAge is Config.BatchMaxAge's default: the batch wait, so a consumer that
	// keeps up closes a batch about every half second whether or not its chunks fill before
	// the wait. Measured with `mcpulse bench pipeline --live --rate 40000 --runs 3` on 2
	// cores, the publisher on the same cores (medians of three runs, eight series each): p99
	// from publish to committed 1.4-1.8 s, against 1.7-2.8 s at 1 s, for about a fifth more
	// ClickHouse CPU per event while live (docs/pipeline.md, "Streamed batches"). While the
	// partitions hold the rest of a batch it does not apply (BatchMaxAge), so a backlog is
	// still read in full batches.
	DefaultBatchMaxAge = DefaultBatchWait
	// NoBatchMaxAge is a Config.BatchMaxAge that never closes a batch (`mcpulse consume
	// --batch-max-age 0`).
	NoBatchMaxAge = time.Duration(math.MaxInt64)
	// DefaultMemoryLimit is the soft memory limit (bytes) `mcpulse consume` gives the Go
	// runtime (runtime/debug.SetMemoryLimit). The dedup windows (Config.DedupWindow × 25 bytes
	// per partition read, once full) and the batches in flight share it: as the windows fill,
	// a batch's byte bound is lowered below BatchBytes (budget.go), so the process stays under
	// about 300 MiB with four partitions at the default window. A member reading more
	// partitions needs a higher limit, or a smaller window.
	DefaultMemoryLimit = 256 << 20
	// DefaultInstanceURL is Config.DefaultInstanceURL's default: PostHog US cloud, the same
	// instance the publisher and gateway assume (ingest.DefaultInstanceURL).
	DefaultInstanceURL = ingest.DefaultInstanceURL
	// DefaultDedupWindow is Config.DedupWindow's default, in offsets per partition: about
	// 24 MiB of dedup state per busy partition.
	DefaultDedupWindow = 1 << 20
	// DefaultRollupCacheCells is Config.RollupCacheCells's default.
	DefaultRollupCacheCells = 100_000
	// DefaultVerdictsAtStart is Config.VerdictsAtStart's default: a read of about 1 MB.
	DefaultVerdictsAtStart = 10_000
	// DefaultRetryBackoff is Config.RetryBackoff's default.
	DefaultRetryBackoff = 250 * time.Millisecond
	// DefaultMaxRetryBackoff is Config.MaxRetryBackoff's default.
	DefaultMaxRetryBackoff = 5 * time.Second
	// DefaultSessionTimeout is Config.SessionTimeout's default.
	DefaultSessionTimeout = 10 * time.Second
	// DefaultIdleToDrain is Config.IdleToDrain's default.
	DefaultIdleToDrain = 2 * time.Second
	// DefaultDrainUnreachableTimeout is Config.DrainUnreachableTimeout's default.
	DefaultDrainUnreachableTimeout = time.Minute
)

// Config configures a Consumer. Zero fields take the documented defaults.
type Config struct {
	// Brokers are the Kafka bootstrap addresses. Required.
	Brokers []string
	// GroupID is the consumer group. Default: DefaultGroupID.
	GroupID string
	// Topics are read by the group: the event topics, the dead-letter topic (recorded in table
	// dead_letters) and the audit topic (recorded in table suppression_audit). Default:
	// mcp_tool_calls, mcp_recruitment, mcpulse_dlq, mcpulse_audit.
	Topics []string
	// Redis holds the suppression state. Required.
	Redis redis.UniversalClient
	// ClickHouse holds the raw tables and rollups (migrated). Required.
	ClickHouse driver.Conn
	// DeadLetters publishes malformed events to the dead-letter topic. Required.
	DeadLetters *ingest.Publisher
	// BatchSize is how many messages a batch (stored, then committed, together) reaches before
	// it closes; it closes earlier when nothing more is waiting (BatchWait). Its raw rows are
	// streamed to ClickHouse chunk by chunk, into one INSERT per table (stream.go). Default:
	// DefaultBatchSize.
	BatchSize int
	// BatchBytes bounds a chunk's bytes, what the consumer holds of a batch at once: each
	// message counts its key and value plus MessageOverhead, and a chunk closes at the message
	// that reaches the bound, or at BatchSize messages, whichever comes first. While the dedup
	// windows take much of the process's soft memory limit, chunks close earlier (at no less
	// than 1 MiB; see DefaultMemoryLimit). Default: DefaultBatchBytes.
	BatchBytes int
	// BatchWait is how long a batch waits to fill before it is processed. Default:
	// DefaultBatchWait.
	BatchWait time.Duration
	// BatchMaxAge bounds how long a batch stays open while the consumer keeps up: the chunk being
	// filled when the batch is this old (counted from when its first message was read) ends then,
	// and the batch closes after it, whatever its size, unless the partitions it read hold the
	// rest of a batch (BatchSize less the messages it has) beyond it, as their high watermarks
	// stood when its messages were fetched: a consumer catching up a backlog keeps filling batches
	// to BatchSize, which costs ClickHouse least. Without it, messages that come steadily faster
	// than a chunk fills in BatchWait (about 45,000 events/s of 750 bytes) make batches of
	// BatchSize, so an event waits up to BatchSize ÷ rate before its batch is stored. The bound
	// trades ClickHouse CPU for that wait: smaller batches write more parts and rollup rows
	// (DefaultBatchMaxAge). The age counts from when fill received the first message, so it
	// includes any wait behind the batch before. Default: DefaultBatchMaxAge; NoBatchMaxAge for
	// none.
	BatchMaxAge time.Duration
	// DefaultInstanceURL is used for the identity hash when an event lacks instance_url.
	// Default: DefaultInstanceURL.
	DefaultInstanceURL string
	// ClientInjectedKeys are dotted-path patterns of ignored keys that MCP clients add on their
	// own; they stay in the raw rows but not in the ignored-key rollups.
	// Default: ingest.DefaultClientInjectedKeys.
	ClientInjectedKeys []string
	// DedupWindow is the dedup window, in offsets of a partition (rounded up to a power of
	// two): an event is dropped as a duplicate when a valid event with its uuid is at most
	// this many offsets before it in its partition (package consumers/dedup). Each partition
	// read holds about 24 bytes per offset of it. Default: DefaultDedupWindow.
	DedupWindow int
	// RollupCacheCells bounds the rollup cells whose totals the consumer keeps in memory (about
	// 130 bytes each with one value, 390 with tool_call_stats_hourly's 29: 15 measures and 14
	// duration buckets); a batch touching others loads them from ClickHouse. Default:
	// DefaultRollupCacheCells.
	RollupCacheCells int
	// Listings bounds the listing state misuse is judged by (sessions kept, listings per
	// session and per server version, their window; misuse.ListingsConfig, whose zero fields
	// take its defaults: 200,000 sessions, 8 listings each, 24 hours; its Schemas bound the
	// input schemas compiled, their sizes and the time one compilation may take, see
	// misuse.SchemaLimits). Its Logger, when nil, is Logger.
	Listings misuse.ListingsConfig
	// VerdictsAtStart is how many of the most recently decided schema verdicts (table
	// schema_verdicts) the consumer reads when it first runs, so that a schema it sees again
	// is not checked, nor compiled when it was over a limit (default DefaultVerdictsAtStart;
	// at most Listings.MaxVerdicts are kept). Other schemas' verdicts are read as batches
	// bring them.
	VerdictsAtStart int
	// Caps bound the distinct tool names, client names and counted ignored-key paths of the
	// tool calls per Kafka partition, MCP server name and hour; values past a cap are stored
	// folded into an overflow bucket (package consumers/cardinality, whose zero fields take
	// its defaults: 1,000 tools, 100 clients, 1,000 key paths, 32 MiB of windows).
	Caps cardinality.Limits
	// RetryBackoff is the first wait after a store error; it doubles up to MaxRetryBackoff
	// while the store stays down (consumption pauses; nothing is committed). Default:
	// DefaultRetryBackoff.
	RetryBackoff time.Duration
	// MaxRetryBackoff caps RetryBackoff. It bounds how long consumption can stay paused after
	// a store returns (resume within 10 s). Default: DefaultMaxRetryBackoff.
	MaxRetryBackoff time.Duration
	// SessionTimeout is the consumer-group session timeout: a member that stops heartbeating
	// (killed) keeps its partitions this long before they move. Heartbeats go every third of
	// it (at most 3s); a rebalance waits this long for members to rejoin. The broker must
	// admit it (Kafka's group.min.session.timeout.ms, 6s by default). Default:
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// IdleToDrain is, for RunUntilDrained, how long nothing may arrive before the consumer
	// checks that every partition is consumed to its end. Default: DefaultIdleToDrain.
	IdleToDrain time.Duration
	// DrainUnreachableTimeout is, for RunUntilDrained, how long joining the consumer group may
	// keep failing (Kafka unreachable) before RunUntilDrained gives up with an error wrapping
	// ingest.ErrKafkaUnreachable; Run retries for ever. Default: DefaultDrainUnreachableTimeout.
	DrainUnreachableTimeout time.Duration
	// Now, when set, is the receiving clock the consumer judges event dates and cooldown ends
	// by (tests pin it). Default: Redis's clock (TIME), sampled before each batch is prepared,
	// the clock the reset script stamps resets with (clock.go).
	Now func() time.Time
	// Logger receives structured logs. Default: discard.
	Logger *slog.Logger
	// Registerer, when set, gets the consumer's Prometheus metrics (see Metrics); New fails
	// when they are already registered there. Default: nil, no metrics.
	Registerer prometheus.Registerer
	// AuditStored, when set, receives a batch's audit events once their suppression_audit
	// rows are stored (before the batch's offsets are committed, so a replayed batch calls it
	// again with the same events: the receiver deduplicates by uuid). It must not block for
	// long. Optional.
	AuditStored func(events []*ingest.AuditEvent)
}

func (c *Config) setDefaults() {
	if c.GroupID == "" {
		c.GroupID = DefaultGroupID
	}
	if len(c.Topics) == 0 {
		c.Topics = []string{ingest.TopicToolCalls, ingest.TopicRecruitment, ingest.TopicDeadLetters, ingest.TopicAudit}
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultBatchSize
	}
	if c.BatchBytes == 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	if c.BatchWait == 0 {
		c.BatchWait = DefaultBatchWait
	}
	if c.BatchMaxAge == 0 {
		c.BatchMaxAge = DefaultBatchMaxAge
	}
	if c.DefaultInstanceURL == "" {
		c.DefaultInstanceURL = DefaultInstanceURL
	}
	if c.ClientInjectedKeys == nil {
		c.ClientInjectedKeys = ingest.DefaultClientInjectedKeys
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = DefaultDedupWindow
	}
	if c.VerdictsAtStart == 0 {
		c.VerdictsAtStart = DefaultVerdictsAtStart
	}
	if c.RollupCacheCells == 0 {
		c.RollupCacheCells = DefaultRollupCacheCells
	}
	if c.RetryBackoff == 0 {
		c.RetryBackoff = DefaultRetryBackoff
	}
	if c.MaxRetryBackoff == 0 {
		c.MaxRetryBackoff = DefaultMaxRetryBackoff
	}
	if c.SessionTimeout == 0 {
		c.SessionTimeout = DefaultSessionTimeout
	}
	if c.DrainUnreachableTimeout == 0 {
		c.DrainUnreachableTimeout = DefaultDrainUnreachableTimeout
	}
	if c.IdleToDrain == 0 {
		c.IdleToDrain = DefaultIdleToDrain
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate lists every problem with the configuration.
func (c *Config) Validate() error {
	var errs []error
	if len(c.Brokers) == 0 {
		errs = append(errs, errors.New("consumer: no Kafka brokers"))
	}
	if c.Redis == nil {
		errs = append(errs, errors.New("consumer: no Redis client"))
	}
	if c.ClickHouse == nil {
		errs = append(errs, errors.New("consumer: no ClickHouse connection"))
	}
	if c.DeadLetters == nil {
		errs = append(errs, errors.New("consumer: no dead-letter publisher"))
	}
	if c.SessionTimeout < time.Second {
		errs = append(errs, errors.New("consumer: SessionTimeout must be at least 1s"))
	}
	if c.BatchSize < 0 {
		errs = append(errs, errors.New("consumer: BatchSize must not be negative (0: the default)"))
	}
	if c.BatchBytes < 0 {
		errs = append(errs, errors.New("consumer: BatchBytes must not be negative (0: the default)"))
	}
	if c.BatchMaxAge < 0 {
		errs = append(errs, errors.New("consumer: BatchMaxAge must not be negative (0: the default; NoBatchMaxAge: none)"))
	}
	if c.DedupWindow < 1 || c.DedupWindow > dedup.MaxSize {
		errs = append(errs, fmt.Errorf("consumer: DedupWindow must be between 1 and %d offsets", dedup.MaxSize))
	}
	if c.VerdictsAtStart < 0 {
		errs = append(errs, errors.New("consumer: VerdictsAtStart must not be negative (0: the default)"))
	}
	if c.Caps.Tools < 0 || c.Caps.Clients < 0 || c.Caps.KeyPaths < 0 || c.Caps.Budget < 0 {
		errs = append(errs, fmt.Errorf("consumer: Caps must not be negative (0: the default), got %d tools, %d clients, %d key paths, %d bytes",
			c.Caps.Tools, c.Caps.Clients, c.Caps.KeyPaths, c.Caps.Budget))
	}
	if c.RollupCacheCells < 1 {
		errs = append(errs, errors.New("consumer: RollupCacheCells must be positive"))
	}
	if _, err := ingest.NewKeyFilter(c.ClientInjectedKeys); err != nil {
		errs = append(errs, err)
	}
	if err := c.Listings.Schemas.Validate(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
