package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/testkit/bench"
)

// newBenchPipelineCmd is `mcpulse bench pipeline`.
func newBenchPipelineCmd() *cobra.Command {
	var (
		cfg                 bench.Config
		inProcess, jsonOnly bool
		cpuProfile, memProf string
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "End-to-end throughput, memory and latency of the consumer, against ClickHouse's Kafka engine and a bare reader",
		Long: `Starts the embedded stack (in-process Kafka, redis-server and clickhouse-server children),
generates --events tool-call events with the demo's generator (fixed seed and end hour, spread
over --hours: the same events every time; the corpus's duplicate lines included) in the
--shape chosen, and publishes them to topic mcp_tool_calls before any consumer starts. A bare
reader then reads the topic once, untimed: the in-process Kafka builds each fetch response in
fresh memory, and the first reads after the publish would fault it in on the first timed
consumer's clock. Then, --runs times, three consumers read the whole topic one after the
other, each alone on the machine and each in a new consumer group:

 1. mcpulse: "mcpulse consume --until-drained" of this executable as a child process, on
    empty stores (database mcpulse re-created, Redis flushed). events/s = events ÷ (consumer
    started → the group's committed offsets reach the end of every partition). The consumer
    commits only after Redis and ClickHouse hold a batch, so a committed event is queryable.
 2. ClickHouse's Kafka table engine: a Kafka table in JSONEachRow format (the properties
    read as dotted columns) and a materialized view filling a copy of mcpulse's tool_calls
    table (CREATE TABLE ... AS mcpulse.tool_calls: the same columns and engine), each
    column computed as mcpulse's consumer does as far as a SELECT can; events/s = events ÷
    (view created → count() reaches the events). No deduplication, no Redis, no rollups.
 3. A bare kafka-go consumer-group Reader that reads and discards (the ceiling).

The summary gives each figure as the median over the runs (min–max), a table of every run's
rates and ratios with their medians, the ratio of mcpulse's rate to each peer's from the same run, and the CPU µs per event each process spent during a
phase: the consumer, clickhouse-server (and the part of it its background merge threads spent),
redis-server, and this process (the in-process Kafka and the harness: commit polling, or the
bare reader). On a shared machine that shows which stage bounds a rate, whatever else runs;
each run's load average is printed beside it.

Memory: the consumer's peak RSS (VmHWM from /proc/PID/status, polled every 100 ms), Redis's
used_memory growth during mcpulse's phase per million tool calls, and the storage of each
rollup table (active parts in system.parts: rows and bytes as the run left them, and after
OPTIMIZE FINAL; every closed hour is sealed first, as the scheduler's seal job does: kept
without the Kafka partition, its per-partition rows deleted), and the raw tool_calls table's
storage. Bytes per event: the corpus's Kafka message bytes per tool call and per event name
(the bytes every consumer reads), each raw table's bytes on disk per row, and tool_calls'
largest columns (system.columns). Compare "--events 1000000"
with "--events 10000000" at the same --hours to see whether rollup storage grows with the
events or with hours × dimensions.

--kafka-store says where the in-process Kafka keeps the messages. "memory" holds every
message in this process: about 2.4 KB of RSS per demo-shaped event (7 GB for 3,000,000).
"disk" writes them to segment files under the stack's data directory (--data-dir, or a
temporary directory removed at the end): about 0.75 KB of disk per demo-shaped event (7.5 GB
for 10,000,000) and an index in memory of about 100 bytes per produced batch; reads come from
the page cache or the disk. "auto" (the default) keeps up to 2,000,000 events in memory and
more on disk. The corpus is generated and published in chunks (1,000,000 demo-shaped tool
calls, 250,000 SDK-shaped ones), so nothing else in this process grows with --events; only
--live holds the whole corpus in memory, to publish it at the timed moment.

--live publishes while mcpulse consumes instead (its consumer joins first; the peers do not
run) and reports publish-to-queryable latency: every k-th event (2,000 samples) carries a
header, and the time Kafka acknowledged it is compared with the first poll (every 50 ms) of
the group's committed offsets past it. Find the maximum rate with the default mode, then
measure the latency at half of it with "--live --rate N". Each live run after the first
empties the topics first and publishes events of its own, so its consumer has no earlier
run's messages to rebuild its dedup windows from.

--shape sdk writes tool calls as the @posthog/mcp SDK sends them (arguments and result in
$mcp_parameters and $mcp_response, about 1 KB; $mcp_tools_list events with the served
schemas first). Events of a kind this build's consumer does not route are left out and
named in a note.

--cpuprofile FILE profiles the consumer child of each run (its consume --cpuprofile): run 1
to FILE, run N to FILE.runN; with --in-process it profiles this whole process instead (the
consumer, the in-process Kafka, the generator). --memprofile needs --in-process (the consumer
then runs inside this process, so its heap can be taken; no RSS is reported).`,
		Example: "  mcpulse bench pipeline\n  mcpulse bench pipeline --events 100000 --runs 1 --json\n  mcpulse bench pipeline --shape sdk --runs 3\n  mcpulse bench pipeline --live --rate 50000 --runs 1\n  mcpulse bench pipeline --events 10000000 --runs 1 --skip-peers\n  mcpulse bench pipeline --shape sdk --events 250000 --runs 1 --cpuprofile consumer.pprof",
		RunE: func(cmd *cobra.Command, args []string) error {
			if cfg.Events < 1 {
				return fmt.Errorf("--events must be at least 1, got %d", cfg.Events)
			}
			if cfg.Runs < 1 {
				return fmt.Errorf("--runs must be at least 1, got %d", cfg.Runs)
			}
			if cfg.ConsumerMembers < 1 {
				return fmt.Errorf("--members must be at least 1, got %d", cfg.ConsumerMembers)
			}
			if cfg.ConsumerMembers > 1 && inProcess {
				return errors.New("--members above 1 needs child consumers: leave out --in-process")
			}
			if cfg.ConsumerBatchSize < 0 {
				return fmt.Errorf("--batch-size must not be negative, got %d", cfg.ConsumerBatchSize)
			}
			if cfg.ConsumerBatchMaxAge < 0 {
				return fmt.Errorf("--batch-max-age must not be negative, got %v", cfg.ConsumerBatchMaxAge)
			}
			if memProf != "" && !inProcess {
				return fmt.Errorf("--memprofile needs --in-process")
			}
			if cmd.Flags().Changed("batch-max-age") && cfg.ConsumerBatchMaxAge == 0 {
				cfg.ConsumerBatchMaxAge = consumers.NoBatchMaxAge
			}
			if !inProcess {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.ConsumerArgv = []string{exe, "consume", "--until-drained", "--log-format", "json"}
				cfg.ConsumerCPUProfile = cpuProfile
			}
			cfg.Progress = cmd.ErrOrStderr()
			if cpuProfile != "" && inProcess {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			var heapErr error
			if memProf != "" {
				cfg.Midway = func() { heapErr = writeHeapProfile(memProf) }
			}
			res, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if heapErr != nil {
				return heapErr
			}
			return printBenchResult(cmd.OutOrStdout(), res, jsonOnly)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Events, "events", 1_000_000, "tool-call events each consumer reads")
	f.IntVar(&cfg.Runs, "runs", 3, "how many times the consumers read the events (figures: median, min, max)")
	f.StringVar(&cfg.Shape, "shape", bench.ShapeDemo, `tool-call shape: "demo" (mcpulse's event contract) or "sdk" (as @posthog/mcp sends them)`)
	f.IntVar(&cfg.Hours, "hours", 24, "span of the events' timestamps, in hours")
	f.Int64Var(&cfg.Seed, "seed", 1, "generator seed")
	f.BoolVar(&cfg.Live, "live", false, "publish while mcpulse consumes and report publish-to-queryable latency (no peers)")
	f.IntVar(&cfg.Rate, "rate", 0, "with --live: publish at most this many events/s (0: as fast as Kafka acknowledges)")
	f.BoolVar(&cfg.SkipPeers, "skip-peers", false, "measure mcpulse only (no Kafka-engine or bare-reader phase, no ratios)")
	f.BoolVar(&inProcess, "in-process", false, "run the consumer inside this process instead of as a child (for profiles; no RSS)")
	f.IntVar(&cfg.ConsumerMembers, "members", 1, "consumers of mcpulse's group reading each run at once, each a child process with its share of the partitions (their CPU summed, the largest peak RSS), to see how the rate grows with members")
	f.IntVar(&cfg.ConsumerBatchSize, "batch-size", 0, fmt.Sprintf("the consumer's batch size (default: the consumer's own, %d)", consumers.DefaultBatchSize))
	f.DurationVar(&cfg.ConsumerBatchMaxAge, "batch-max-age", 0, fmt.Sprintf("the consumer's --batch-max-age, to weigh latency (--live) against throughput (default: the consumer's own, %v; 0: no bound)", consumers.DefaultBatchMaxAge))
	f.StringVar(&cfg.DataDir, "data-dir", "", "keep the stack's data here (default: a temporary directory)")
	f.StringVar(&cfg.KafkaStore, "kafka-store", bench.KafkaAuto, `where the in-process Kafka keeps the messages: "memory", "disk" or "auto" (disk above 2,000,000 events)`)
	f.BoolVar(&jsonOnly, "json", false, "print only the JSON object (the table is printed before it otherwise)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of each run's consumer child here (run N > 1: FILE.runN); with --in-process, of this whole process")
	f.StringVar(&memProf, "memprofile", "", "write a heap profile here when the first run's consumer is half-way (with --in-process)")
	return cmd
}

// writeHeapProfile writes the heap profile (in-use and allocated since start) to path.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return pprof.Lookup("heap").WriteTo(f, 0)
}
