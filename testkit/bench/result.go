package bench

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/mcpulse/mcpulse/consumers"
)

// Result holds a benchmark's figures. Its JSON form is what `mcpulse bench pipeline` prints.
type Result struct {
	// Shape is the tool calls' shape ("demo" or "sdk").
	Shape string `json:"shape"`
	// Events is how many tool-call events each consumer read (duplicate lines included).
	Events int `json:"events"`
	// Messages is how many messages were published (tool calls and, for the SDK shape, the
	// events around them); Bytes is their total value size.
	Messages int   `json:"messages"`
	Bytes    int64 `json:"bytes"`
	// Hours is the span of the events' timestamps.
	Hours int `json:"hours"`
	// Live says the events were published while mcpulse consumed them (at most Rate
	// events/s when Rate > 0); otherwise every consumer read a topic filled beforehand.
	Live bool `json:"live"`
	Rate int  `json:"rate,omitempty"`
	// KafkaStore is where the in-process Kafka kept the messages ("memory" or "disk"; "" for
	// a stack given by the caller).
	KafkaStore string `json:"kafka_store,omitempty"`
	// ConsumerBatchSize and ConsumerBatchMaxAge are the consumer settings the run was given
	// (Config.ConsumerBatchSize; Config.ConsumerBatchMaxAge as the consumer's --batch-max-age
	// value, "0" for no bound); 0 and "" for the consumer's defaults (the printed header still
	// names the default --batch-max-age, consumers.DefaultBatchMaxAge).
	ConsumerBatchSize   int    `json:"consumer_batch_size,omitempty"`
	ConsumerBatchMaxAge string `json:"consumer_batch_max_age,omitempty"`
	// ConsumerMembers is how many consumers of mcpulse's group read each run at once
	// (Config.ConsumerMembers): their CPU is summed, the peak RSS is the largest of them.
	ConsumerMembers int `json:"consumer_members"`
	// Publish is the generation and publication of the corpus before any consumer started
	// (zero when Live: see RunResult.Publish).
	Publish Phase `json:"publish"`
	// Runs are the runs' figures in order.
	Runs []RunResult `json:"runs"`
	// Summary is the median, minimum and maximum over the runs.
	Summary Summary `json:"summary"`
	// Notes say what the figures leave out.
	Notes []string `json:"notes,omitempty"`
	// Machine describes where it ran.
	Machine Machine `json:"machine"`
}

// SealPhase is one seal of the closed hours (rollup.SealClosedHours).
type SealPhase struct {
	// Hours is how many hours it sealed; Seconds how long it took.
	Hours   int     `json:"hours"`
	Seconds float64 `json:"seconds"`
}

// RunResult is one run: each consumer read the corpus once, mcpulse on empty stores.
type RunResult struct {
	Run int `json:"run"`
	// Mcpulse is end to end: every event decoded, validated, deduplicated, Redis state applied,
	// stored in ClickHouse (raw rows and rollups) and its offset committed. Pre-published it
	// runs from starting the consumer; live, from the first publish.
	Mcpulse Phase `json:"mcpulse"`
	// KafkaEngine is ClickHouse's Kafka table engine peer (zero when skipped).
	KafkaEngine Phase `json:"kafka_engine"`
	// BareReader is the bare kafka-go reader peer (zero when skipped).
	BareReader Phase `json:"bare_reader"`
	// VsKafkaEngine and VsBareReader are mcpulse's events/s divided by the peer's, this run.
	VsKafkaEngine float64 `json:"mcpulse_vs_kafka_engine"`
	VsBareReader  float64 `json:"mcpulse_vs_bare_reader"`
	// Publish is the live publisher's phase (Live only; concurrent with mcpulse).
	Publish Phase `json:"publish,omitzero"`
	// StartupSeconds is, live, how long the consumer took to join its group before the
	// first publish.
	StartupSeconds float64 `json:"startup_seconds,omitempty"`
	// Latency is, live, from Kafka acknowledging a sampled event to mcpulse committing past
	// it, i.e. to the event being queryable.
	Latency Latency `json:"latency,omitzero"`
	// ConsumerPeakRSSBytes is the consumer child process's peak resident set (VmHWM); 0 when
	// the consumer ran in the benchmark's process.
	ConsumerPeakRSSBytes int64 `json:"consumer_peak_rss_bytes"`
	// Redis is what mcpulse's phase left in Redis.
	Redis RedisGrowth `json:"redis"`
	// Seal is the seal of the closed hours after mcpulse's phase (every hour of the
	// corpus is closed), before Rollups is measured.
	Seal SealPhase `json:"seal"`
	// Rollups is the storage of each rollup table after mcpulse's phase.
	Rollups []RollupStorage `json:"rollups"`
	// RawToolCalls is the raw tool_calls table's storage after mcpulse's phase (active parts,
	// as left): the disk a tool call takes before any TTL.
	RawToolCalls RollupStorage `json:"raw_tool_calls"`
	// RawTables are the raw event tables holding rows after mcpulse's phase (tool_calls and,
	// for the SDK shape, the handshakes, exceptions and served schemas), measured as
	// RawToolCalls is.
	RawTables []RollupStorage `json:"raw_tables"`
	// ToolCallColumns are tool_calls' largest columns by compressed bytes after mcpulse's
	// phase (system.columns): what a stored tool call's bytes are made of.
	ToolCallColumns []ColumnBytes `json:"tool_calls_largest_columns"`
	// PeerDefaults are the tool_calls columns the Kafka-engine peer left at their default
	// (mcpulse derives them beyond what a SELECT can).
	PeerDefaults []string `json:"peer_default_columns,omitempty"`
	// LoadAvg is /proc/loadavg's 1-minute figure when the run ended ("" when unreadable).
	LoadAvg string `json:"load_avg_1m"`
}

// Phase is one consumer's (or the publisher's) pass over the events.
type Phase struct {
	// Seconds is the phase's wall-clock duration (see the fields using it for where each
	// starts and ends).
	Seconds float64 `json:"seconds"`
	// EventsPerSecond is the events the phase handled divided by Seconds.
	EventsPerSecond float64 `json:"events_per_second"`
	// CPU is what each process spent during the phase.
	CPU CPU `json:"cpu_seconds"`
	// CPUMicrosPerEvent is CPU.Total() per event, in microseconds.
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"`
	// Missing is how many events the consumer never stored (the Kafka engine only; its rate
	// counts the events it stored).
	Missing int64 `json:"missing,omitempty"`
	// n is how many events the rate counts.
	n int
}

func (p *Phase) finish(n int, cpu CPU) {
	p.n = n
	p.EventsPerSecond = float64(n) / p.Seconds
	p.CPU = cpu
	p.CPUMicrosPerEvent = cpu.Total() / float64(n) * 1e6
}

// perEvent is the phase's CPU per process in µs per event.
func (p Phase) perEvent() CPU {
	n := float64(p.n)
	if n == 0 {
		return CPU{}
	}
	return CPU{Consumer: p.CPU.Consumer / n * 1e6, ClickHouse: p.CPU.ClickHouse / n * 1e6, ClickHouseMerges: p.CPU.ClickHouseMerges / n * 1e6,
		Redis: p.CPU.Redis / n * 1e6, Bench: p.CPU.Bench / n * 1e6}
}

// Latency summarizes publish-to-queryable latencies in milliseconds.
type Latency struct {
	// Samples is how many sampled events were seen committed.
	Samples int `json:"samples"`
	// P50Ms, P99Ms and MaxMs are nearest-rank quantiles of the samples' latencies.
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// Stat is a figure over the runs.
type Stat struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func statOf(vals []float64) Stat {
	if len(vals) == 0 {
		return Stat{}
	}
	s := slices.Clone(vals)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stat{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// PhaseSummary is one consumer's figures over the runs.
type PhaseSummary struct {
	EventsPerSecond Stat `json:"events_per_second"`
	// CPUMicrosPerEvent is the median, per process, of the CPU µs per event.
	CPUMicrosPerEvent CPU `json:"cpu_us_per_event"`
}

// Summary is the runs' figures as median (min, max).
type Summary struct {
	Mcpulse       PhaseSummary `json:"mcpulse"`
	KafkaEngine   PhaseSummary `json:"kafka_engine"`
	BareReader    PhaseSummary `json:"bare_reader"`
	VsKafkaEngine Stat         `json:"mcpulse_vs_kafka_engine"`
	VsBareReader  Stat         `json:"mcpulse_vs_bare_reader"`
	// LatencyP50Ms and LatencyP99Ms are over the live runs.
	LatencyP50Ms Stat `json:"latency_p50_ms,omitzero"`
	LatencyP99Ms Stat `json:"latency_p99_ms,omitzero"`
	// ConsumerPeakRSSBytes is the largest over the runs.
	ConsumerPeakRSSBytes int64 `json:"consumer_peak_rss_bytes"`
	// RedisBytesPerMillion is the median growth of Redis's used_memory per million tool calls.
	RedisBytesPerMillion Stat `json:"redis_bytes_per_million_events"`
	// PerRun is each run's rates and ratios, in run order: the spread the medians sum up.
	PerRun []RunFigures `json:"per_run"`
	// KafkaBytesPerToolCall is the corpus's message bytes (every event published, values
	// only) per tool call: the bytes a consumer reads per tool call of the shape.
	KafkaBytesPerToolCall float64 `json:"kafka_bytes_per_tool_call"`
	// KafkaBytesByEvent is the corpus's message bytes per event name, the most bytes first.
	KafkaBytesByEvent []EventBytes `json:"kafka_bytes_by_event"`
	// RawBytesPerRow is, per raw table holding rows, its bytes on disk per row over the runs
	// (active parts as mcpulse's phase left them).
	RawBytesPerRow []TableBytesPerRow `json:"raw_bytes_per_row"`
}

// RunFigures are one run's rates (events/s) and mcpulse's rate divided by each peer's; a peer
// that did not run is 0.
type RunFigures struct {
	Run           int     `json:"run"`
	Mcpulse       float64 `json:"mcpulse"`
	KafkaEngine   float64 `json:"kafka_engine"`
	BareReader    float64 `json:"bare_reader"`
	VsKafkaEngine float64 `json:"mcpulse_vs_kafka_engine"`
	VsBareReader  float64 `json:"mcpulse_vs_bare_reader"`
}

// TableBytesPerRow is one raw table's bytes on disk per row, median (min, max) over the runs
// that stored rows in it.
type TableBytesPerRow struct {
	Table       string `json:"table"`
	BytesPerRow Stat   `json:"bytes_per_row"`
}

func (r *Result) summarize() {
	over := func(f func(RunResult) float64) Stat {
		var v []float64
		for _, run := range r.Runs {
			v = append(v, f(run))
		}
		return statOf(v)
	}
	phase := func(f func(RunResult) Phase) PhaseSummary {
		cpu := func(g func(CPU) float64) float64 {
			return over(func(run RunResult) float64 { return g(f(run).perEvent()) }).Median
		}
		return PhaseSummary{
			EventsPerSecond: over(func(run RunResult) float64 { return f(run).EventsPerSecond }),
			CPUMicrosPerEvent: CPU{
				Consumer:         cpu(func(c CPU) float64 { return c.Consumer }),
				ClickHouse:       cpu(func(c CPU) float64 { return c.ClickHouse }),
				ClickHouseMerges: cpu(func(c CPU) float64 { return c.ClickHouseMerges }),
				Redis:            cpu(func(c CPU) float64 { return c.Redis }),
				Bench:            cpu(func(c CPU) float64 { return c.Bench }),
			},
		}
	}
	s := &r.Summary
	s.Mcpulse = phase(func(run RunResult) Phase { return run.Mcpulse })
	s.KafkaEngine = phase(func(run RunResult) Phase { return run.KafkaEngine })
	s.BareReader = phase(func(run RunResult) Phase { return run.BareReader })
	s.VsKafkaEngine = over(func(run RunResult) float64 { return run.VsKafkaEngine })
	s.VsBareReader = over(func(run RunResult) float64 { return run.VsBareReader })
	if r.Live {
		s.LatencyP50Ms = over(func(run RunResult) float64 { return run.Latency.P50Ms })
		s.LatencyP99Ms = over(func(run RunResult) float64 { return run.Latency.P99Ms })
	}
	for _, run := range r.Runs {
		s.ConsumerPeakRSSBytes = max(s.ConsumerPeakRSSBytes, run.ConsumerPeakRSSBytes)
	}
	s.RedisBytesPerMillion = over(func(run RunResult) float64 { return run.Redis.BytesPerMillion })
	s.PerRun = make([]RunFigures, len(r.Runs))
	perRow := map[string][]float64{}
	var tables []string
	for i, run := range r.Runs {
		s.PerRun[i] = RunFigures{Run: run.Run, Mcpulse: run.Mcpulse.EventsPerSecond, KafkaEngine: run.KafkaEngine.EventsPerSecond,
			BareReader: run.BareReader.EventsPerSecond, VsKafkaEngine: run.VsKafkaEngine, VsBareReader: run.VsBareReader}
		for _, t := range run.RawTables {
			if t.Rows == 0 {
				continue
			}
			if _, seen := perRow[t.Table]; !seen {
				tables = append(tables, t.Table)
			}
			perRow[t.Table] = append(perRow[t.Table], float64(t.Bytes)/float64(t.Rows))
		}
	}
	s.RawBytesPerRow = nil
	for _, t := range tables {
		s.RawBytesPerRow = append(s.RawBytesPerRow, TableBytesPerRow{Table: t, BytesPerRow: statOf(perRow[t])})
	}
}

// setCorpus records what the corpus put on Kafka, per tool call and per event name.
func (s *Summary) setCorpus(c *corpusStats) {
	if c.ToolCalls > 0 {
		s.KafkaBytesPerToolCall = float64(c.Bytes) / float64(c.ToolCalls)
	}
	s.KafkaBytesByEvent = c.byEvent()
}

// Machine is what the figures were measured on.
type Machine struct {
	// CPUs is runtime.NumCPU().
	CPUs int `json:"cpus"`
	// GoVersion is the Go release the benchmark was built with.
	GoVersion string `json:"go_version"`
	// LoadAvg is /proc/loadavg's 1-minute figure when the benchmark ended.
	LoadAvg string `json:"load_avg_1m"`
}

func machine() Machine {
	return Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvg: loadAvg()}
}

func loadAvg() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			return f[0]
		}
	}
	return ""
}

// Print writes the figures as tables: the summary over the runs, then each run. The header
// names the consumer's --batch-max-age whether given or not ("500ms (default)", "0 (no bound)"),
// and --batch-size only when given.
func (r *Result) Print(w io.Writer) {
	mode := "pre-published topic (every consumer reads a topic filled before it starts)"
	if r.Live {
		mode = "live (published while mcpulse consumes"
		if r.Rate > 0 {
			mode += fmt.Sprintf(", at most %d events/s", r.Rate)
		}
		mode += ")"
	}
	if r.ConsumerMembers > 1 {
		mode += fmt.Sprintf(", %d consumer-group members", r.ConsumerMembers)
	}
	if r.ConsumerBatchSize > 0 {
		mode += fmt.Sprintf(", consumer --batch-size %d", r.ConsumerBatchSize)
	}
	switch r.ConsumerBatchMaxAge {
	case "":
		mode += ", consumer --batch-max-age " + consumers.DefaultBatchMaxAge.String() + " (default)"
	case "0":
		mode += ", consumer --batch-max-age 0 (no bound)"
	default:
		mode += ", consumer --batch-max-age " + r.ConsumerBatchMaxAge
	}
	if r.KafkaStore != "" {
		mode += ", in-process Kafka's messages " + map[string]string{KafkaInMemory: "in memory", KafkaOnDisk: "on disk"}[r.KafkaStore]
	}
	fmt.Fprintf(w, "pipeline benchmark: %d %s-shaped tool calls (%d messages, %.0f MB) over %d hours, %s\n",
		r.Events, r.Shape, r.Messages, float64(r.Bytes)/1e6, r.Hours, mode)
	fmt.Fprintf(w, "%d run(s), %d CPUs, load %s at the end (per run: %s)\n\n", len(r.Runs), r.Machine.CPUs, r.Machine.LoadAvg, r.loads())

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	stat := func(s Stat, format string) string {
		if s == (Stat{}) {
			return "-"
		}
		if len(r.Runs) == 1 {
			return fmt.Sprintf(format, s.Median)
		}
		return fmt.Sprintf(format+" ("+format+"–"+format+")", s.Median, s.Min, s.Max)
	}
	us := func(p PhaseSummary, ran bool) string {
		if !ran {
			return "\t\t\t\t"
		}
		c := p.CPUMicrosPerEvent
		return fmt.Sprintf("%.1f\t%.1f\t%.1f\t%.1f\t%.1f", c.Consumer, c.ClickHouse, c.ClickHouseMerges, c.Redis, c.Bench)
	}
	peers := len(r.Runs) > 0 && r.Runs[0].KafkaEngine.Seconds > 0
	s := r.Summary
	fmt.Fprintln(tw, "consumer\tevents/s, median (min–max)\tmcpulse ÷ it\tCPU µs/event: consumer\tClickHouse\tof it merges\tRedis\tkfake+harness")
	fmt.Fprintf(tw, "mcpulse end to end (dedup, Redis, raw rows, rollups)\t%s\t\t%s\n", stat(s.Mcpulse.EventsPerSecond, "%.0f"), us(s.Mcpulse, true))
	if peers {
		fmt.Fprintf(tw, "ClickHouse Kafka engine (JSONEachRow) → tool_calls copy\t%s\t%s\t%s\n", stat(s.KafkaEngine.EventsPerSecond, "%.0f"), stat(s.VsKafkaEngine, "%.2f×"), us(s.KafkaEngine, true))
		fmt.Fprintf(tw, "bare kafka-go reader (read, discard)\t%s\t%s\t%s\n", stat(s.BareReader.EventsPerSecond, "%.0f"), stat(s.VsBareReader, "%.2f×"), us(s.BareReader, true))
	}
	tw.Flush()
	if len(s.PerRun) > 0 {
		r.printPerRun(w, peers)
	}
	fmt.Fprintln(w)
	r.printBytes(w)
	if r.Publish.Seconds > 0 {
		fmt.Fprintf(w, "corpus generated and published before the consumers in %.1f s (%.0f messages/s)\n", r.Publish.Seconds, r.Publish.EventsPerSecond)
	}
	if r.Live {
		fmt.Fprintf(w, "latency publish-ack → committed (queryable): p50 %s ms, p99 %s ms\n", stat(s.LatencyP50Ms, "%.0f"), stat(s.LatencyP99Ms, "%.0f"))
	}
	if s.ConsumerPeakRSSBytes > 0 {
		fmt.Fprintf(w, "consumer peak RSS: %.1f MiB (largest over the runs)\n", float64(s.ConsumerPeakRSSBytes)/(1<<20))
	} else {
		fmt.Fprintln(w, "consumer peak RSS: not measured (consumer ran in the benchmark's process)")
	}
	fmt.Fprintf(w, "Redis used_memory growth: %s MiB per million tool calls\n", stat(scaleStat(s.RedisBytesPerMillion, 1.0/(1<<20)), "%.1f"))
	for _, note := range r.Notes {
		fmt.Fprintf(w, "note: %s\n", note)
	}

	for _, run := range r.Runs {
		fmt.Fprintf(w, "\nrun %d (load %s): mcpulse %.0f events/s in %.1f s", run.Run, run.LoadAvg, run.Mcpulse.EventsPerSecond, run.Mcpulse.Seconds)
		if run.KafkaEngine.Seconds > 0 {
			fmt.Fprintf(w, "; Kafka engine %.0f events/s (%.2f×)", run.KafkaEngine.EventsPerSecond, run.VsKafkaEngine)
			if run.KafkaEngine.Missing > 0 {
				fmt.Fprintf(w, " storing %d of %d events (no row for %.0f s; its rate counts the stored ones)", int64(r.Events)-run.KafkaEngine.Missing, r.Events, engineStall.Seconds())
			}
			fmt.Fprintf(w, "; bare reader %.0f events/s (%.2f×)", run.BareReader.EventsPerSecond, run.VsBareReader)
		}
		fmt.Fprintln(w)
		if r.Live {
			fmt.Fprintf(w, "  publisher %.0f events/s; consumer joined in %.1f s; latency %d samples: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
				run.Publish.EventsPerSecond, run.StartupSeconds, run.Latency.Samples, run.Latency.P50Ms, run.Latency.P99Ms, run.Latency.MaxMs)
		}
		fmt.Fprintf(w, "  Redis: used_memory %+.1f MiB, %d keys\n", float64(run.Redis.UsedMemoryDelta)/(1<<20), run.Redis.Keys)
		if raw := run.RawToolCalls; raw.Rows > 0 {
			fmt.Fprintf(w, "  raw tool_calls: %d rows, %.1f MiB on disk (%.0f bytes per row) in %d parts\n",
				raw.Rows, float64(raw.Bytes)/(1<<20), float64(raw.Bytes)/float64(raw.Rows), raw.Parts)
		}
		if len(run.ToolCallColumns) > 0 {
			fmt.Fprint(w, "  tool_calls' largest columns (compressed bytes per row, of uncompressed):")
			for i, c := range run.ToolCallColumns {
				sep := ","
				if i == len(run.ToolCallColumns)-1 {
					sep = "\n"
				}
				fmt.Fprintf(w, " %s %.0f of %.0f%s", c.Column, c.CompressedPerRow, c.UncompressedPerRow, sep)
			}
		}
		if len(run.Rollups) > 0 {
			if run.Seal.Seconds > 0 {
				fmt.Fprintf(w, "  closed hours sealed (ignored key paths, gate-reason calls and people): %d hours in %.1f s\n", run.Seal.Hours, run.Seal.Seconds)
			}
			fmt.Fprint(w, "  rollup storage (active parts as left → after OPTIMIZE FINAL):")
			var total RollupStorage
			for _, t := range run.Rollups {
				fmt.Fprintf(w, " %s %d rows/%.2f MiB → %d rows/%.2f MiB;", t.Table, t.Rows, float64(t.Bytes)/(1<<20), t.RowsOptimized, float64(t.BytesOptimized)/(1<<20))
				total.Rows += t.Rows
				total.Bytes += t.Bytes
				total.RowsOptimized += t.RowsOptimized
				total.BytesOptimized += t.BytesOptimized
			}
			fmt.Fprintf(w, " total %d rows/%.2f MiB → %d rows/%.2f MiB\n", total.Rows, float64(total.Bytes)/(1<<20), total.RowsOptimized, float64(total.BytesOptimized)/(1<<20))
		}
		if len(run.PeerDefaults) > 0 {
			fmt.Fprintf(w, "  the Kafka-engine peer left at their default: %s (mcpulse derives them)\n", strings.Join(run.PeerDefaults, ", "))
		}
	}
}

// printPerRun writes each run's rates and ratios, then their medians.
func (r *Result) printPerRun(w io.Writer, peers bool) {
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	if peers {
		fmt.Fprintln(tw, "run\tmcpulse events/s\tKafka engine events/s\tmcpulse ÷ Kafka engine\tbare reader events/s\tmcpulse ÷ bare reader\t")
	} else {
		fmt.Fprintln(tw, "run\tmcpulse events/s\t")
	}
	row := func(label string, f RunFigures) {
		if peers {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.2f×\t%.0f\t%.2f×\t\n", label, f.Mcpulse, f.KafkaEngine, f.VsKafkaEngine, f.BareReader, f.VsBareReader)
		} else {
			fmt.Fprintf(tw, "%s\t%.0f\t\n", label, f.Mcpulse)
		}
	}
	for _, f := range r.Summary.PerRun {
		row(strconv.Itoa(f.Run), f)
	}
	s := r.Summary
	row("median", RunFigures{Mcpulse: s.Mcpulse.EventsPerSecond.Median, KafkaEngine: s.KafkaEngine.EventsPerSecond.Median,
		BareReader: s.BareReader.EventsPerSecond.Median, VsKafkaEngine: s.VsKafkaEngine.Median, VsBareReader: s.VsBareReader.Median})
	tw.Flush()
}

// printBytes writes the corpus's Kafka bytes per tool call and per event, and the raw tables'
// bytes per row.
func (r *Result) printBytes(w io.Writer) {
	s := r.Summary
	if s.KafkaBytesPerToolCall > 0 {
		fmt.Fprintf(w, "Kafka message bytes: %.0f per tool call (every message published ÷ tool calls); by event:", s.KafkaBytesPerToolCall)
		for i, e := range s.KafkaBytesByEvent {
			sep := ";"
			if i == len(s.KafkaBytesByEvent)-1 {
				sep = ""
			}
			fmt.Fprintf(w, " %s %d × %.0f bytes%s", e.Event, e.Messages, e.BytesPerMessage, sep)
		}
		fmt.Fprintln(w)
	}
	if len(s.RawBytesPerRow) > 0 {
		fmt.Fprint(w, "raw tables' bytes on disk per row (active parts as left), median (min–max):")
		for i, t := range s.RawBytesPerRow {
			sep := ";"
			if i == len(s.RawBytesPerRow)-1 {
				sep = ""
			}
			b := t.BytesPerRow
			if len(r.Runs) == 1 {
				fmt.Fprintf(w, " %s %.0f%s", t.Table, b.Median, sep)
			} else {
				fmt.Fprintf(w, " %s %.0f (%.0f–%.0f)%s", t.Table, b.Median, b.Min, b.Max, sep)
			}
		}
		fmt.Fprintln(w)
	}
}

func (r *Result) loads() string {
	var l []string
	for _, run := range r.Runs {
		l = append(l, run.LoadAvg)
	}
	return strings.Join(l, ", ")
}

func scaleStat(s Stat, k float64) Stat { return Stat{s.Median * k, s.Min * k, s.Max * k} }
