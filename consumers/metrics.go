package consumers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// Store label values of the store metrics.
const (
	storeRedis      = "redis"
	storeClickHouse = "clickhouse"
)

// lagTimeout bounds the Kafka requests one scrape makes for mcpulse_consumer_lag.
const lagTimeout = 3 * time.Second

// Metrics are a consumer's Prometheus metrics, registered on
// Config.Registerer by New:
//
//	mcpulse_consumer_messages_total                       counter    messages read from Kafka
//	mcpulse_consumer_events_stored_total{kind}            counter    events stored, by kind (tool_call, ...)
//	mcpulse_consumer_duplicates_total{kind}               counter    events dropped as duplicates of an earlier uuid
//	mcpulse_consumer_dead_lettered_total{class}           counter    malformed events sent to the dead-letter topic
//	mcpulse_consumer_dead_letters_recorded_total{class}   counter    dead-letter topic messages stored in dead_letters
//	mcpulse_consumer_audits_recorded_total                counter    audit events stored in suppression_audit
//	mcpulse_consumer_suppression_outcomes_total{outcome}  counter    suppression script results (written, older, ...)
//	mcpulse_consumer_batches_committed_total              counter    batches stored and committed
//	mcpulse_consumer_store_retries_total                  counter    batch attempts that failed on a store and were retried
//	mcpulse_consumer_store_write_seconds{store}           histogram  one batched write: a Redis pipeline, a ClickHouse insert
//	mcpulse_consumer_store_errors_total{store}            counter    failed Redis pipelines and ClickHouse calls
//	mcpulse_consumer_fetch_retries_total                  counter    Kafka fetches that failed (group not joined) and were retried
//	mcpulse_consumer_rows_left_out_total                  counter    rows not stored because their optional table does not exist yet
//	mcpulse_consumer_store_refused_total                  counter    valid events ClickHouse refused for good, dead-lettered (store_refused)
//	mcpulse_consumer_insert_splits_total                  counter    permanently refused inserts split in halves to find the refused rows
//	mcpulse_consumer_rebalances_total                     counter    consumer group generations this member joined
//	mcpulse_consumer_lag{topic,partition}                 gauge      messages the group has not committed, asked on scrape
//	mcpulse_consumer_lag_errors_total                     counter    scrapes whose lag request to Kafka failed
//	mcpulse_consumer_dedup_window_bytes                   gauge      memory of the dedup windows (package consumers/dedup)
//	mcpulse_consumer_rollup_cached_cells                  gauge      rollup cells cached in memory (package consumers/rollup)
//	mcpulse_misuse_sessions                               gauge      sessions whose listings are kept (misuse.Listings)
//	mcpulse_misuse_server_versions                        gauge      server versions whose listings are kept
//	mcpulse_misuse_listings                               gauge      distinct listings held (once by content hash)
//	mcpulse_misuse_schemas                                gauge      distinct input schema texts held
//	mcpulse_misuse_bytes                                  gauge      estimated heap of the listing state (counted by the memory budget)
//	mcpulse_misuse_session_evictions_total                counter    sessions evicted at the session cap (least recently used)
//	mcpulse_misuse_server_version_evictions_total         counter    server versions evicted at the version cap
//	mcpulse_misuse_listings_dropped_total                 counter    listings a session or version let go at its cap or window
//	mcpulse_misuse_schema_compiles_total                  counter    input schemas compiled (on first use; again after leaving the compiled cache)
//	mcpulse_misuse_schemas_over_limit_total{limit}        counter    input schemas not compiled for passing a misuse.SchemaLimits bound (time: stopped at the budget; tools: listings cut)
//	mcpulse_misuse_schema_checks_total                    counter    input schemas checked against the limits (no verdict held on them)
//	mcpulse_misuse_schema_verdicts_reused_total           counter    input schemas a held or stored verdict spared the check (and, over a limit, the compile)
//	mcpulse_misuse_schema_verdicts_unstored_total         counter    verdicts let go before they were stored (more pending than the verdict cap)
//	mcpulse_cardinality_overflow_total{dimension}         counter    values folded into an overflow bucket by a cardinality cap (tool, client, key_path)
//	mcpulse_cardinality_bytes                             gauge      estimated heap of the cardinality windows (counted by the memory budget)
//
// The class label of dead letters is their ingest.DeadLetterClass: a small fixed set, never
// the reason's free text (which quotes caller-chosen values).
type Metrics struct {
	c *Consumer

	duplicates        *prometheus.CounterVec
	deadLettered      *prometheus.CounterVec
	deadLettersStored *prometheus.CounterVec
	storeWrite        *prometheus.HistogramVec
	storeErrors       *prometheus.CounterVec
	overflow          *prometheus.CounterVec

	lagErrors atomic.Int64
	lagMu     sync.Mutex // one lag request at a time, however many scrapes run

	messages, stored, audits, suppression, batches, retries, fetchRetries, rowsLeftOut, storeRefused, insertSplits, rebalancesDesc, lag, lagErrorsDesc *prometheus.Desc
	dedupBytes, rollupCells, capsBytes                                                                                                                 *prometheus.Desc
	// The listing state's (misuse.Listings).
	listingSessions, listingVersions, listingListings, listingSchemas, listingBytes, listingSessionEvictions, listingVersionEvictions, listingsDropped, listingCompiles, listingOverLimit *prometheus.Desc
	schemaChecks, verdictsReused, verdictsUnstored                                                                                                                                        *prometheus.Desc
}

// newMetrics wraps c's stores to feed the store metrics (instrumentStores) and registers
// c's metrics on reg; a nil reg means none (nil Metrics, whose methods do nothing). c must
// be complete: a scrape may come at once.
func newMetrics(reg prometheus.Registerer, c *Consumer) (*Metrics, error) {
	if reg == nil {
		return nil, nil
	}
	m := &Metrics{
		c: c,
		duplicates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_consumer_duplicates_total", Help: "Events dropped because their uuid was already claimed, by kind.",
		}, []string{"kind"}),
		deadLettered: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_consumer_dead_lettered_total", Help: "Malformed events this consumer sent to the dead-letter topic, by reason class.",
		}, []string{"class"}),
		deadLettersStored: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_consumer_dead_letters_recorded_total", Help: "Dead-letter topic messages stored in table dead_letters, by reason class.",
		}, []string{"class"}),
		storeWrite: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "mcpulse_consumer_store_write_seconds",
			Help:    "Latency of one batched store write: a Redis pipeline round trip, or a ClickHouse batch insert from prepare to send.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16), // 0.5ms .. ~16s
		}, []string{"store"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_consumer_store_errors_total", Help: "Failed Redis pipelines and ClickHouse calls made by the consumer, by store.",
		}, []string{"store"}),
		overflow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "mcpulse_cardinality_overflow_total", Help: "Values of tool calls folded into an overflow bucket because their partition, server and hour held as many distinct values of the dimension as its cap (tool, client, key_path).",
		}, []string{"dimension"}),
		capsBytes:      prometheus.NewDesc("mcpulse_cardinality_bytes", "Estimated heap held by the cardinality caps' windows (cardinality.Folder.Bytes), counted by the memory budget.", nil, nil),
		messages:       prometheus.NewDesc("mcpulse_consumer_messages_total", "Messages read from Kafka.", nil, nil),
		stored:         prometheus.NewDesc("mcpulse_consumer_events_stored_total", "Events stored in ClickHouse, by kind.", []string{"kind"}, nil),
		audits:         prometheus.NewDesc("mcpulse_consumer_audits_recorded_total", "Audit events stored in suppression_audit.", nil, nil),
		suppression:    prometheus.NewDesc("mcpulse_consumer_suppression_outcomes_total", "Results of the Redis suppression script, by outcome.", []string{"outcome"}, nil),
		batches:        prometheus.NewDesc("mcpulse_consumer_batches_committed_total", "Batches stored and committed.", nil, nil),
		retries:        prometheus.NewDesc("mcpulse_consumer_store_retries_total", "Batch attempts that failed on a store and were retried.", nil, nil),
		fetchRetries:   prometheus.NewDesc("mcpulse_consumer_fetch_retries_total", "Kafka fetches that failed (the group could not be joined or synced) and were retried.", nil, nil),
		storeRefused:   prometheus.NewDesc("mcpulse_consumer_store_refused_total", "Valid events ClickHouse refused for good (their rows were split out of the insert), dead-lettered with class store_refused.", nil, nil),
		insertSplits:   prometheus.NewDesc("mcpulse_consumer_insert_splits_total", "Permanently refused inserts split in halves to find the rows ClickHouse refuses.", nil, nil),
		rowsLeftOut:    prometheus.NewDesc("mcpulse_consumer_rows_left_out_total", "Rows not stored because their optional table does not exist yet (run mcpulse migrate up).", nil, nil),
		rebalancesDesc: prometheus.NewDesc("mcpulse_consumer_rebalances_total", "Consumer group generations this member joined (one per rebalance it took part in).", nil, nil),
		lag:            prometheus.NewDesc("mcpulse_consumer_lag", "Messages of a partition the consumer group has not committed yet (asked of Kafka on each scrape).", []string{"topic", "partition"}, nil),
		lagErrorsDesc:  prometheus.NewDesc("mcpulse_consumer_lag_errors_total", "Scrapes whose consumer lag request to Kafka failed.", nil, nil),
		dedupBytes:     prometheus.NewDesc("mcpulse_consumer_dedup_window_bytes", "Memory held by the dedup windows of the partitions this member has read.", nil, nil),
		rollupCells:    prometheus.NewDesc("mcpulse_consumer_rollup_cached_cells", "Rollup cells whose totals this member keeps in memory.", nil, nil),

		listingSessions:         prometheus.NewDesc("mcpulse_misuse_sessions", "MCP sessions whose tool listings this member keeps to judge their calls.", nil, nil),
		listingVersions:         prometheus.NewDesc("mcpulse_misuse_server_versions", "MCP server versions whose tool listings this member keeps.", nil, nil),
		listingListings:         prometheus.NewDesc("mcpulse_misuse_listings", "Distinct tool listings held (stored once by content hash, however many sessions share one).", nil, nil),
		listingSchemas:          prometheus.NewDesc("mcpulse_misuse_schemas", "Distinct tool input schema texts held (once by content hash; compiled on use, the most recently used kept compiled).", nil, nil),
		listingBytes:            prometheus.NewDesc("mcpulse_misuse_bytes", "Estimated heap held by the listing state (misuse.Listings.Bytes), counted by the memory budget.", nil, nil),
		listingSessionEvictions: prometheus.NewDesc("mcpulse_misuse_session_evictions_total", "Sessions evicted, least recently used first, at the session cap; their later calls are judged by their server version's listings.", nil, nil),
		listingVersionEvictions: prometheus.NewDesc("mcpulse_misuse_server_version_evictions_total", "Server versions evicted, least recently used first, at the version cap.", nil, nil),
		listingCompiles:         prometheus.NewDesc("mcpulse_misuse_schema_compiles_total", "Input schemas compiled (on first use, and again after leaving the cache of the 4,096 most recently used).", nil, nil),
		listingsDropped:         prometheus.NewDesc("mcpulse_misuse_listings_dropped_total", "Listings a session or server version let go at its cap or window.", nil, nil),
		schemaChecks:            prometheus.NewDesc("mcpulse_misuse_schema_checks_total", "Input schemas checked against the schema limits because no verdict on them was held or stored (each once per verdict).", nil, nil),
		verdictsReused:          prometheus.NewDesc("mcpulse_misuse_schema_verdicts_reused_total", "Input schemas a verdict held or read back from schema_verdicts spared the limit check; one over a limit is never compiled.", nil, nil),
		verdictsUnstored:        prometheus.NewDesc("mcpulse_misuse_schema_verdicts_unstored_total", "Schema verdicts let go before they were stored in schema_verdicts (more pending than the verdict cap).", nil, nil),
		listingOverLimit:        prometheus.NewDesc("mcpulse_misuse_schemas_over_limit_total", "Input schemas never compiled because they pass a limit (bytes, properties of one object, members, depth; time: their compilation stopped at the time budget), each counted once; for limit=tools, listings cut at the tools-per-listing limit. Their calls are not measured (schema_over_limit).", []string{"limit"}, nil),
	}
	for _, k := range ingest.Kinds() {
		m.duplicates.WithLabelValues(k.Name) // export zeros, so rate() sees the first one
	}
	for _, d := range cardinality.Dimensions {
		m.overflow.WithLabelValues(string(d))
	}
	c.cfg.Redis, c.cfg.ClickHouse = m.instrumentStores(c.cfg.Redis, c.cfg.ClickHouse)
	var registered []prometheus.Collector
	for _, col := range []prometheus.Collector{m.duplicates, m.deadLettered, m.deadLettersStored, m.storeWrite, m.storeErrors, m.overflow, m} {
		if err := reg.Register(col); err != nil {
			for _, r := range registered {
				reg.Unregister(r)
			}
			return nil, fmt.Errorf("consumer metrics: %w", err)
		}
		registered = append(registered, col)
	}
	return m, nil
}

// Describe implements prometheus.Collector for the metrics read from Stats, the reader and
// Kafka at scrape time.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.messages, m.stored, m.audits, m.suppression, m.batches, m.retries, m.fetchRetries, m.rowsLeftOut, m.storeRefused, m.insertSplits, m.rebalancesDesc, m.lag, m.lagErrorsDesc, m.dedupBytes, m.rollupCells, m.capsBytes,
		m.listingSessions, m.listingVersions, m.listingListings, m.listingSchemas, m.listingBytes, m.listingSessionEvictions, m.listingVersionEvictions, m.listingsDropped, m.listingCompiles, m.listingOverLimit,
		m.schemaChecks, m.verdictsReused, m.verdictsUnstored} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. It asks Kafka for the group's lag (at most
// lagTimeout); when that fails, the lag series are left out and the error is counted.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	s := m.c.Stats()
	counter := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	counter(m.messages, s.Messages)
	for kind, n := range s.Stored {
		counter(m.stored, n, kind)
	}
	counter(m.audits, s.Audits)
	for outcome, n := range s.Suppression {
		counter(m.suppression, n, outcome)
	}
	counter(m.batches, s.Batches)
	counter(m.retries, s.StoreRetries)
	counter(m.fetchRetries, s.FetchRetries)
	counter(m.rowsLeftOut, s.RowsLeftOut)
	counter(m.storeRefused, s.StoreRefused)
	counter(m.insertSplits, s.InsertSplits)
	// kafka-go's Reader.Stats reports counts since its previous call: keep the running total.
	counter(m.rebalancesDesc, m.c.stats.generations.Load())
	ch <- prometheus.MustNewConstMetric(m.dedupBytes, prometheus.GaugeValue, float64(m.c.windows.Bytes()))
	ch <- prometheus.MustNewConstMetric(m.rollupCells, prometheus.GaugeValue, float64(m.c.rollups.CachedCells()))
	ch <- prometheus.MustNewConstMetric(m.capsBytes, prometheus.GaugeValue, float64(m.c.caps.Bytes()))
	ls := m.c.listings.Stats()
	for d, v := range map[*prometheus.Desc]int{m.listingSessions: ls.Sessions, m.listingVersions: ls.Versions, m.listingListings: ls.Listings, m.listingSchemas: ls.Schemas, m.listingBytes: m.c.listings.Bytes()} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v))
	}
	for d, v := range map[*prometheus.Desc]uint64{m.listingSessionEvictions: ls.SessionEvictions, m.listingVersionEvictions: ls.VersionEvictions, m.listingsDropped: ls.ListingsDropped, m.listingCompiles: ls.Compiles,
		m.schemaChecks: ls.Checks, m.verdictsReused: ls.VerdictsReused, m.verdictsUnstored: ls.VerdictsUnstored} {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v))
	}
	for _, limit := range misuse.Limits { // every label, zeros too, so rate() sees the first one
		ch <- prometheus.MustNewConstMetric(m.listingOverLimit, prometheus.CounterValue, float64(ls.OverLimit[limit]), string(limit))
	}

	m.lagMu.Lock()
	ctx, cancel := context.WithTimeout(context.Background(), lagTimeout)
	lag, err := m.c.Lag(ctx)
	cancel()
	m.lagMu.Unlock()
	if err != nil {
		m.c.cfg.Logger.Warn("consumer lag for metrics failed", "err", err)
		m.lagErrors.Add(1)
	}
	for _, l := range lag {
		ch <- prometheus.MustNewConstMetric(m.lag, prometheus.GaugeValue, float64(l.Lag), l.Topic, strconv.Itoa(l.Partition))
	}
	counter(m.lagErrorsDesc, m.lagErrors.Load())
}

// batchMetrics is what a stored batch adds to the labelled counters; batchResult embeds it.
type batchMetrics struct {
	duplicatesByKind    map[*ingest.Kind]int64
	deadLetteredByClass map[string]int64 // sent to the dead-letter topic
	recordedByClass     map[string]int64 // dead-letter topic messages stored
}

// duplicate counts one event of kind k dropped as a duplicate.
func (r *batchResult) duplicate(k *ingest.Kind) {
	r.duplicates++
	if r.duplicatesByKind == nil {
		r.duplicatesByKind = map[*ingest.Kind]int64{}
	}
	r.duplicatesByKind[k]++
}

// classifyDeadLetters counts the batch's dead letters by class: bad (sent to the dead-letter
// topic by this batch) and the dead-letter topic messages among msgs (stored in dead_letters,
// by their HeaderErrorClass; ClassOther for one without).
func (r *batchResult) classifyDeadLetters(bad []ingest.DeadLetter, msgs []kafka.Message) {
	for _, d := range bad {
		if r.deadLetteredByClass == nil {
			r.deadLetteredByClass = map[string]int64{}
		}
		r.deadLetteredByClass[string(cmp.Or(d.Class, ingest.ClassOther))]++
	}
	for i := range msgs {
		if msgs[i].Topic != ingest.TopicDeadLetters {
			continue
		}
		class := ingest.ClassOther
		for _, h := range msgs[i].Headers {
			if h.Key == ingest.HeaderErrorClass {
				class = cmp.Or(ingest.ParseDeadLetterClass(string(h.Value)), ingest.ClassOther)
			}
		}
		if r.recordedByClass == nil {
			r.recordedByClass = map[string]int64{}
		}
		r.recordedByClass[string(class)]++
	}
}

// account adds a stored batch's labelled counts.
func (m *Metrics) account(r *batchResult) {
	if m == nil {
		return
	}
	for k, n := range r.duplicatesByKind {
		m.duplicates.WithLabelValues(k.Name).Add(float64(n))
	}
	for class, n := range r.deadLetteredByClass {
		m.deadLettered.WithLabelValues(class).Add(float64(n))
	}
	for class, n := range r.recordedByClass {
		m.deadLettersStored.WithLabelValues(class).Add(float64(n))
	}
}

// instrumentStores returns cfg's Redis client and ClickHouse connection wrapped to feed the
// store metrics (unchanged when m is nil). The wrappers see the consumer's batched writes:
// Redis pipelines (Pipeline, Pipelined, TxPipeline, TxPipelined) and ClickHouse batches,
// queries and statements; the callers' clients are not modified.
func (m *Metrics) instrumentStores(rdb redis.UniversalClient, ch driver.Conn) (redis.UniversalClient, driver.Conn) {
	if m == nil {
		return rdb, ch
	}
	return &metricsRedis{UniversalClient: rdb, m: m}, &metricsClickHouse{Conn: ch, m: m}
}

func (m *Metrics) observe(store string, start time.Time, err error) {
	m.storeWrite.WithLabelValues(store).Observe(time.Since(start).Seconds())
	m.failed(store, err)
}

func (m *Metrics) failed(store string, err error) {
	// NOSCRIPT is how runScripts learns to send EVAL: the store is fine.
	if err != nil && !isNoScript(err) && !errors.Is(err, redis.Nil) {
		m.storeErrors.WithLabelValues(store).Inc()
	}
}

type metricsRedis struct {
	redis.UniversalClient
	m *Metrics
}

func (r *metricsRedis) Pipeline() redis.Pipeliner {
	return &metricsPipe{Pipeliner: r.UniversalClient.Pipeline(), m: r.m}
}

func (r *metricsRedis) TxPipeline() redis.Pipeliner {
	return &metricsPipe{Pipeliner: r.UniversalClient.TxPipeline(), m: r.m}
}

func (r *metricsRedis) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return r.Pipeline().Pipelined(ctx, fn)
}

func (r *metricsRedis) TxPipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	return r.TxPipeline().Pipelined(ctx, fn)
}

type metricsPipe struct {
	redis.Pipeliner
	m *Metrics
}

func (p *metricsPipe) Exec(ctx context.Context) ([]redis.Cmder, error) {
	start := time.Now()
	cmds, err := p.Pipeliner.Exec(ctx)
	p.m.observe(storeRedis, start, err)
	return cmds, err
}

func (p *metricsPipe) Pipelined(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	if err := fn(p); err != nil {
		return nil, err
	}
	return p.Exec(ctx)
}

type metricsClickHouse struct {
	driver.Conn
	m *Metrics
}

func (c *metricsClickHouse) PrepareBatch(ctx context.Context, query string, opts ...driver.PrepareBatchOption) (driver.Batch, error) {
	start := time.Now()
	b, err := c.Conn.PrepareBatch(ctx, query, opts...)
	if err != nil {
		c.m.failed(storeClickHouse, err)
		return nil, err
	}
	return &metricsBatch{Batch: b, m: c.m, start: start}, nil
}

func (c *metricsClickHouse) Query(ctx context.Context, query string, args ...any) (driver.Rows, error) {
	rows, err := c.Conn.Query(ctx, query, args...)
	c.m.failed(storeClickHouse, err)
	return rows, err
}

func (c *metricsClickHouse) Exec(ctx context.Context, query string, args ...any) error {
	err := c.Conn.Exec(ctx, query, args...)
	c.m.failed(storeClickHouse, err)
	return err
}

func (c *metricsClickHouse) Select(ctx context.Context, dest any, query string, args ...any) error {
	err := c.Conn.Select(ctx, dest, query, args...)
	c.m.failed(storeClickHouse, err)
	return err
}

type metricsBatch struct {
	driver.Batch
	m     *Metrics
	start time.Time
}

func (b *metricsBatch) Send() error {
	err := b.Batch.Send()
	b.m.observe(storeClickHouse, b.start, err)
	return err
}
