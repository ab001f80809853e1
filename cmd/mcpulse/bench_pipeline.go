package main

import (
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/mcpulse/mcpulse/testkit/bench"
)

// newBenchPipelineCmd is `mcpulse bench pipeline` (issue 7).
func newBenchPipelineCmd() *cobra.Command {
	var (
		cfg                 bench.Config
		inProcess, jsonOnly bool
		cpuProfile, memProf string
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "End-to-end throughput, latency and memory of the consumer, against ClickHouse's Kafka engine and a bare reader",
		Long: `Starts the embedded stack (in-process Kafka, redis-server and clickhouse-server children),
migrates ClickHouse, generates --events tool-call events with the demo's generator (fixed seed
and dates: the same events every run; the corpus's duplicate lines included) and runs three
consumers of topic mcp_tool_calls one after the other, each alone on the machine:

 1. mcpulse: "mcpulse consume --until-drained" of this executable as a child process, while
    the events are published (kafka-go Writer, murmur2, acks=all, 1000-message batches).
    events/s = events ÷ (first publish → the group's committed offsets reach the end of every
    partition). The consumer commits only after Redis and ClickHouse hold a batch (inserts are
    synchronous), so a committed event is queryable.
 2. ClickHouse's Kafka table engine: a Kafka table (one String column, TabSeparated) and a
    materialized view picking the raw tool-call fields with visitParamExtract* into a plain
    MergeTree table; events/s = events ÷ (view created → count() reaches the events). No
    deduplication, no Redis. Its group's offsets are set to the start first (18.16 starts a
    new group at the end of each partition).
 3. A bare kafka-go consumer-group Reader that reads and discards (the ceiling).

Latency: every k-th event (2,000 samples) carries a header; the time Kafka acknowledged it
(the Writer's completion callback, which knows its partition and offset) is compared with
the first poll (every 50 ms) of the group's committed offsets that is past it. So a latency
is publish-acknowledged → queryable, overstated by at most 50 ms; when the publisher outruns
the consumer it includes the wait in the backlog (use --rate to publish at a fixed pace).

Peak RSS is the child's VmHWM (/proc/PID/status, polled every 100 ms; getrusage's ru_maxrss
of a child started by Go also counts the parent's memory). Dedup memory is MEMORY USAGE of the
dedup hashes after mcpulse's phase, scaled to a million claims. CPU µs/event is what each
process (the consumer, clickhouse-server, redis-server, and this process: the in-process Kafka
and the publisher or reader) spent during a phase, per event: on a shared machine it shows
which stage bounds the rate, whatever else runs.

--cpuprofile and --memprofile need --in-process (the consumer then runs inside this process,
so its profile can be taken; no RSS is reported).`,
		Example: "  mcpulse bench pipeline\n  mcpulse bench pipeline --events 200000 --json\n  mcpulse bench pipeline --events 300000 --in-process --skip-peers --cpuprofile cpu.out",
		RunE: func(cmd *cobra.Command, args []string) error {
			if (cpuProfile != "" || memProf != "") && !inProcess {
				return fmt.Errorf("--cpuprofile and --memprofile need --in-process")
			}
			if !inProcess {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				cfg.ConsumerArgv = []string{exe, "consume", "--until-drained", "--log-format", "json"}
				if cfg.ConsumerBatchSize > 0 {
					cfg.ConsumerArgv = append(cfg.ConsumerArgv, "--batch-size", strconv.Itoa(cfg.ConsumerBatchSize))
				}
			}
			cfg.Progress = cmd.ErrOrStderr()
			if cpuProfile != "" {
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
				cfg.Published = func() { heapErr = writeHeapProfile(memProf) }
			}
			res, err := bench.Run(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if heapErr != nil {
				return heapErr
			}
			out := cmd.OutOrStdout()
			if !jsonOnly {
				res.Print(out)
				fmt.Fprintln(out)
			}
			enc := newJSONEncoder(out)
			enc.SetIndent("", "  ")
			return enc.Encode(res)
		},
	}
	f := cmd.Flags()
	f.IntVar(&cfg.Events, "events", 1_000_000, "tool-call events to publish")
	f.Int64Var(&cfg.Seed, "seed", 1, "generator seed")
	f.IntVar(&cfg.Rate, "rate", 0, "publish at most this many events/s (0: as fast as Kafka acknowledges)")
	f.BoolVar(&cfg.SkipPeers, "skip-peers", false, "measure mcpulse only (no Kafka-engine or bare-reader phase, no ratios)")
	f.BoolVar(&inProcess, "in-process", false, "run the consumer inside this process instead of as a child (for profiles; no RSS)")
	f.IntVar(&cfg.ConsumerBatchSize, "batch-size", 0, "the consumer's batch size (default: the consumer's own default)")
	f.StringVar(&cfg.DataDir, "data-dir", "", "keep the stack's data here (default: a temporary directory)")
	f.BoolVar(&jsonOnly, "json", false, "print only the JSON object (the table is printed before it otherwise)")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run here (with --in-process)")
	f.StringVar(&memProf, "memprofile", "", "write a heap profile here when publishing ends, the consumer draining (with --in-process)")
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
