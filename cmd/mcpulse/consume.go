package main

import (
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/forward"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/obs"
	"github.com/mcpulse/mcpulse/internal/safetext"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/misuse"
)

func newConsumeCmd() *cobra.Command {
	var (
		brokers, redisURL, dsn  string
		cfg                     consumers.Config
		clientKeys              []string
		untilDrained            bool
		logFormat               string
		posthogHost, posthogKey string
		metricsListen           string
		pprofListen, cpuProfile string
		memoryLimitMiB          int64
	)
	cmd := &cobra.Command{
		Use:   "consume",
		Short: "Run a member of the consumer group: Kafka → dedup → Redis suppression → ClickHouse",
		Long: `Joins consumer group "mcpulse-consumers" on topics mcp_tool_calls, mcp_recruitment,
mcpulse_dlq and mcpulse_audit. Each batch is decoded and validated (malformed events go to
mcpulse_dlq with their reason), deduplicated by uuid within each partition (--dedup-window),
applied to the Redis suppression and cooldown records, and written to the ClickHouse raw
tables and rollups; only then are the batch's offsets committed. A store outage pauses
consumption and is retried with backoff.

Redis must run with maxmemory-policy noeviction (on every master of a cluster): any other
policy can silently evict suppression and cooldown records. consume checks it at start-up
and refuses to run otherwise, or when CONFIG GET is disabled so the policy cannot be read;
--allow-eviction turns the refusal into a warning.

With --posthog-host, every suppression reset read from the audit topic is sent to that PostHog
project through posthog-go once its suppression_audit row is stored (summary properties only;
the audit event's uuid, so a replayed reset is stored once); the queue is flushed on exit.

Run several processes to scale out: partitions are shared among the group's members.

SIGTERM or Ctrl-C stops it within 10 s, even while a store hangs: a batch not yet stored is
not committed, so the group reads it again; a second signal kills it at once.

A service (no --until-drained) retries an unreachable Kafka for ever, logging each failed join.
With --until-drained, consume exits 1 with "Kafka unreachable" once joining the group has failed
for --unreachable-timeout (1m by default), so a batch job never hangs.

To see where a running consumer spends its time, start it with --pprof-listen and take a
profile with "go tool pprof http://ADDR/debug/pprof/profile?seconds=30"; or give --cpuprofile FILE
to profile the whole run (with --until-drained: start to drained), written when it exits.`,
		Example: "  mcpulse consume\n  mcpulse consume --until-drained --log-format json\n  mcpulse consume --metrics-listen :9100 --pprof-listen 127.0.0.1:6060\n  mcpulse consume --brokers kafka:9092 --redis redis://redis:6379/0 --clickhouse clickhouse://default@clickhouse:9000/default",
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			log, err := newLogger(logFormat)
			if err != nil {
				return err
			}
			if memoryLimitMiB < 0 {
				return fmt.Errorf("--memory-limit-mib must not be negative, got %d", memoryLimitMiB)
			}
			if err := batchBoundsFromFlags(&cfg); err != nil {
				return err
			}
			if cpuProfile != "" {
				stop, err := startCPUProfile(cpuProfile)
				if err != nil {
					return err
				}
				defer stop()
			}
			if cmd.Flags().Changed("memory-limit-mib") || os.Getenv("GOMEMLIMIT") == "" {
				if memoryLimitMiB > 0 {
					debug.SetMemoryLimit(memoryLimitMiB << 20)
				} else {
					debug.SetMemoryLimit(math.MaxInt64)
				}
			}
			if debug.SetMemoryLimit(-1) != math.MaxInt64 && os.Getenv("GOGC") == "" {
				debug.SetGCPercent(consumers.GCPercent) // the limit bounds the heap
			}
			if cfg.Brokers, err = stores.ParseBrokers(brokers); err != nil {
				return err
			}
			if len(cfg.Brokers) == 0 {
				return fmt.Errorf("no Kafka brokers: set %s or pass --brokers", stores.EnvKafkaBrokers)
			}
			rdb, ch, closeStores, err := openStores(ctx, redisURL, dsn)
			if err != nil {
				return err
			}
			closing := &stopBudget{log: log}
			defer closing.close("closing the Redis and ClickHouse clients", func() error { closeStores(); return nil })
			dlq, err := ingest.NewPublisher(ingest.PublisherConfig{Brokers: cfg.Brokers, DefaultInstanceURL: cfg.DefaultInstanceURL, Logger: log})
			if err != nil {
				return err
			}
			defer closing.close("flushing the dead-letter writer", dlq.Close)
			cfg.Redis, cfg.ClickHouse, cfg.DeadLetters, cfg.Logger = rdb, ch, dlq, log
			if posthogHost != "" {
				if posthogKey == "" {
					return fmt.Errorf("--posthog-host needs --posthog-api-key (or $%s)", posthogAPIKeyEnv)
				}
				fw, err := forward.New(posthogHost, posthogKey, log)
				if err != nil {
					return err
				}
				defer func() {
					closing.close("flushing the PostHog queue", fw.Close) // queued resets (after the consumer stopped)
					log.Info("posthog forwarding stopped", "queued", fw.Queued(), "failed", fw.Failed())
				}()
				cfg.AuditStored = func(audits []*ingest.AuditEvent) {
					for _, a := range audits {
						fw.SuppressionReset(a)
					}
				}
			}
			if cmd.Flags().Changed("client-injected-keys") {
				cfg.ClientInjectedKeys = clientKeys
			}
			reg := newProcessRegistry()
			if metricsListen != "" {
				cfg.Registerer = reg
			}
			c, err := consumers.New(cfg)
			if err != nil {
				return err
			}
			defer closing.close("leaving the consumer group", c.Close)
			stopMetrics, err := serveMetrics(ctx, metricsListen, reg, log, obs.RedisCheck(rdb), obs.ClickHouseCheck(ch), obs.KafkaCheck(cfg.Brokers))
			if err != nil {
				return err
			}
			defer stopMetrics()
			stopPprof, err := servePprof(ctx, pprofListen, log)
			if err != nil {
				return err
			}
			defer stopPprof()
			log.Info("consumer started", "brokers", strings.Join(cfg.Brokers, ","), "group", cfg.GroupID, "until_drained", untilDrained)
			if untilDrained {
				err = c.RunUntilDrained(ctx)
			} else {
				err = c.Run(ctx)
			}
			s := c.Stats()
			log.Info("consumer stopped", "messages", s.Messages, storedByKind(s.Stored), "duplicates", s.Duplicates,
				"dead_lettered", s.DeadLettered, "dead_letters_recorded", s.DeadLetters, "batches", s.Batches, "store_retries", s.StoreRetries, "fetch_retries", s.FetchRetries)
			return err
		},
	}
	addAllowEvictionFlag(cmd)
	f := cmd.Flags()
	f.StringVar(&brokers, "brokers", os.Getenv(stores.EnvKafkaBrokers), "Kafka brokers, comma-separated (default $"+stores.EnvKafkaBrokers+")")
	f.StringVar(&redisURL, "redis", os.Getenv(stores.EnvRedisURL), "Redis URL (default $"+stores.EnvRedisURL+")")
	f.StringVar(&dsn, "clickhouse", os.Getenv(stores.EnvClickHouseDSN), "ClickHouse DSN, native protocol (default $"+stores.EnvClickHouseDSN+")")
	f.StringVar(&cfg.GroupID, "group", consumers.DefaultGroupID, "Kafka consumer group")
	f.IntVar(&cfg.BatchSize, "batch-size", consumers.DefaultBatchSize, fmt.Sprintf("messages stored and committed together: a batch closes once it holds this many, or earlier at a chunk that did not fill within the batch wait (a fixed %v a chunk waits for messages) or at --batch-max-age; its raw rows are streamed to ClickHouse chunk by chunk (--batch-bytes), one INSERT per table (0: the default)", consumers.DefaultBatchWait))
	f.DurationVar(&cfg.BatchMaxAge, "batch-max-age", consumers.DefaultBatchMaxAge, fmt.Sprintf("how long a batch may stay open while the consumer keeps up: it closes this long after its first message was read, even below --batch-size, unless the partitions it read hold the rest of a batch beyond it (catching up a backlog, batches still fill to --batch-size). A chunk that does not fill within the batch wait (a fixed %v a chunk waits for messages) closes its batch too, so the bound matters once chunks fill faster: above about 45,000 events/s of 750 bytes. Lower means fresher rows and rollups for more ClickHouse CPU per event (0: no bound)", consumers.DefaultBatchWait))
	f.IntVar(&cfg.BatchBytes, "batch-bytes", consumers.DefaultBatchBytes, "most bytes of a batch held in memory at once, each message counted as its key and value plus 1.5 KiB for its decoded event and row: a batch is read in chunks that close at this many bytes or at --batch-size messages (a chunk's memory follows its bytes; while the dedup windows fill much of --memory-limit-mib, chunks close earlier, at no less than 1 MiB)")
	f.IntVar(&cfg.DedupWindow, "dedup-window", consumers.DefaultDedupWindow, "dedup window in offsets per partition (rounded up to a power of two): an event is a duplicate when its uuid is on a valid event at most this many offsets before it in its partition; about 24 bytes of memory per offset for each busy partition")
	f.IntVar(&cfg.Listings.MaxSessions, "listing-sessions", misuse.DefaultMaxSessions, "MCP sessions whose tool listings stay in memory to judge their calls by (least recently used evicted first; an evicted session's calls are judged by its server version's listings); 100,000 sessions take 60 to 215 MiB (docs/scaling.md)")
	f.IntVar(&cfg.Listings.Schemas.MaxBytes, "schema-max-bytes", misuse.DefaultSchemaMaxBytes, "largest tool input schema, in bytes of JSON, compiled to find the argument keys a tool ignores: a larger one is never compiled, its calls are stored as not measured (reason schema_over_limit), and it is logged once and counted in mcpulse_misuse_schemas_over_limit_total{limit=\"bytes\"}")
	f.IntVar(&cfg.Listings.Schemas.MaxProperties, "schema-max-properties", misuse.DefaultSchemaMaxProperties, "most members of one JSON object in a tool input schema (a properties or $defs map, a schema object); past it the schema is handled as past --schema-max-bytes (limit=\"properties\"). Compile time grows linearly with a schema's size")
	f.IntVar(&cfg.Listings.Schemas.MaxMembers, "schema-max-members", misuse.DefaultSchemaMaxMembers, "most members of all the JSON objects of a tool input schema together; past it the schema is handled as past --schema-max-bytes (limit=\"members\"). At the default the worst schema compiles in tens of milliseconds")
	f.DurationVar(&cfg.Listings.Schemas.MaxCompileTime, "schema-time-budget", misuse.DefaultSchemaMaxCompileTime, "most time one tool input schema's compilation may take: past it the compilation stops and the schema is handled as past --schema-max-bytes (limit=\"time\"), never compiled again")
	f.IntVar(&cfg.Listings.Schemas.MaxDepth, "schema-max-depth", misuse.DefaultSchemaMaxDepth, "deepest nesting of JSON objects and arrays in a tool input schema (the root is 1); past it the schema is handled as past --schema-max-bytes (limit=\"depth\")")
	f.IntVar(&cfg.VerdictsAtStart, "schema-verdicts-at-start", consumers.DefaultVerdictsAtStart, "most recently decided tool input schema verdicts (table schema_verdicts: measured, over a limit, unsupported) read at start, so that a schema seen again is not checked, nor compiled when it was over a limit; the verdicts of other schemas are read as batches bring them")
	f.IntVar(&cfg.Listings.Schemas.MaxToolsPerListing, "listing-max-tools", misuse.DefaultListingMaxTools, "most tools one tools/list listing keeps, its pages together: past it the first tools by name are kept, calls of the others are judged as if unlisted but never reported as unknown tools, and the listing is logged and counted in mcpulse_misuse_schemas_over_limit_total{limit=\"tools\"}")
	f.IntVar(&cfg.Caps.Tools, "cap-tools", cardinality.DefaultTools, "distinct tool names stored per Kafka partition, MCP server name and hour: the calls of further names are stored under \""+cardinality.OtherTools+"\" (the name kept in tool_calls.folded_tool_name), counted in mcpulse_cardinality_overflow_total{dimension=\"tool\"} and cardinality_overflow_hourly, and logged at most once a minute per server")
	f.IntVar(&cfg.Caps.Clients, "cap-clients", cardinality.DefaultClients, "distinct client names stored per Kafka partition, MCP server name and hour; further ones are stored as \""+cardinality.OtherClients+"\", as --cap-tools")
	f.IntVar(&cfg.Caps.KeyPaths, "cap-key-paths", cardinality.DefaultKeyPaths, "distinct counted ignored-key paths stored per Kafka partition, MCP server name and hour; further ones are stored as \""+cardinality.OtherKeys+"\", as --cap-tools")
	f.Int64Var(&cfg.Caps.Budget, "cap-memory-bytes", cardinality.DefaultBudget, "bytes of the caps' windows kept in memory (counted by the memory budget); past it the least recently used committed windows are let go and read back from ClickHouse when needed")
	f.IntVar(&cfg.RollupCacheCells, "rollup-cache-cells", consumers.DefaultRollupCacheCells, "rollup cells whose totals stay in memory (about 130 bytes each with one value, 390 with tool_call_stats_hourly's 29 values); others are read from ClickHouse when a batch touches them")
	f.DurationVar(&cfg.SessionTimeout, "session-timeout", consumers.DefaultSessionTimeout, "consumer-group session timeout: how long a member that died keeps its partitions (the broker must allow it)")
	f.StringVar(&cfg.DefaultInstanceURL, "instance-url", consumers.DefaultInstanceURL, "PostHog instance URL for events that lack instance_url (part of the identity hash)")
	f.StringSliceVar(&clientKeys, "client-injected-keys", ingest.DefaultClientInjectedKeys, "dotted-path patterns of input keys MCP clients add on their own; kept raw, not counted in ignored-key rollups (\"*\" matches one segment)")
	f.BoolVar(&untilDrained, "until-drained", false, "exit 0 once every partition is consumed to its end and nothing arrived for "+consumers.DefaultIdleToDrain.String())
	f.DurationVar(&cfg.DrainUnreachableTimeout, "unreachable-timeout", consumers.DefaultDrainUnreachableTimeout,
		"with --until-drained: exit 1 when joining the consumer group keeps failing (Kafka unreachable) this long; without it the consumer retries for ever")
	f.StringVar(&posthogHost, "posthog-host", "", "send suppression resets to this PostHog instance (e.g. https://us.i.posthog.com)")
	f.StringVar(&posthogKey, "posthog-api-key", os.Getenv(posthogAPIKeyEnv), "PostHog project API key for --posthog-host (default $"+posthogAPIKeyEnv+")")
	f.StringVar(&logFormat, "log-format", "text", "log format: text or json")
	addMetricsListenFlag(f, &metricsListen)
	f.StringVar(&pprofListen, "pprof-listen", "", pprofListenUsage)
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the process from start to exit to this file")
	f.Int64Var(&memoryLimitMiB, "memory-limit-mib", consumers.DefaultMemoryLimit>>20, "soft memory limit of the process, in MiB: under it the garbage collector lets the heap grow to four times what is live ($GOGC, when set, wins) and works harder as the heap nears the limit (0 = none, and Go's default pacing; without the flag, $GOMEMLIMIT wins when set)")
	return cmd
}

// batchBoundsFromFlags turns the batch bounds consume's flags wrote into cfg into the
// consumer's: --batch-max-age 0 (the flag's "no bound") becomes consumers.NoBatchMaxAge, since
// a Config's 0 means consumers.DefaultBatchMaxAge. A negative --batch-size, --batch-bytes or
// --batch-max-age is an error naming the first such flag, and leaves cfg as it was.
func batchBoundsFromFlags(cfg *consumers.Config) error {
	switch {
	case cfg.BatchSize < 0:
		return fmt.Errorf("--batch-size must not be negative, got %d", cfg.BatchSize)
	case cfg.BatchBytes < 0:
		return fmt.Errorf("--batch-bytes must not be negative, got %d", cfg.BatchBytes)
	case cfg.BatchMaxAge < 0:
		return fmt.Errorf("--batch-max-age must not be negative, got %v", cfg.BatchMaxAge)
	}
	if cfg.BatchMaxAge == 0 {
		cfg.BatchMaxAge = consumers.NoBatchMaxAge
	}
	return nil
}

// newLogger returns a slog logger on stderr in the chosen format, "text" or "json"; any other
// format is an error that names the flag, so a typo never silently switches a service's logs.
func newLogger(format string) (*slog.Logger, error) {
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(os.Stderr, nil)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(os.Stderr, nil)), nil
	}
	return nil, fmt.Errorf("--log-format must be \"text\" or \"json\", got %s", safetext.Quote(format))
}

// storedByKind is the "stored" attribute of the consumer's last log line: one count per kind,
// in kind order (stored.tool_call=7880 in text logs, an object in JSON ones), where logging the
// map itself printed Go's map[exception:0 ...] syntax.
func storedByKind(stored map[string]int64) slog.Attr {
	kinds := make([]string, 0, len(stored))
	for k := range stored {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	attrs := make([]any, 0, len(kinds))
	for _, k := range kinds {
		attrs = append(attrs, slog.Int64(k, stored[k]))
	}
	return slog.Group("stored", attrs...)
}

// startCPUProfile starts a CPU profile of the process written to path; stop ends it and
// closes the file.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
