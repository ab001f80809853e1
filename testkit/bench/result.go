package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/redis/go-redis/v9"
)

// Result holds a run's figures. Its JSON form is what `mcpulse bench pipeline` prints.
type Result struct {
	// Events is how many tool-call events were published (duplicate lines included).
	Events int `json:"events"`
	// Bytes is the total size of their message values.
	Bytes int64 `json:"bytes"`
	// Publish is the publishing phase alone (concurrent with mcpulse's consumer).
	Publish Phase `json:"publish"`
	// Mcpulse is end to end: from the first publish to every event committed by mcpulse's
	// consumer group (decoded, validated, deduplicated, Redis state applied, stored in
	// ClickHouse, offsets committed).
	Mcpulse Phase `json:"mcpulse"`
	// StartupSeconds is the consumer's start before publishing began (not in Mcpulse).
	StartupSeconds float64 `json:"startup_seconds"`
	// Latency is from Kafka acknowledging a sampled event to mcpulse committing past it.
	Latency Latency `json:"latency"`
	// ConsumerPeakRSSBytes is the consumer child process's peak resident set (VmHWM); 0 when
	// the consumer ran in the benchmark's process.
	ConsumerPeakRSSBytes int64 `json:"consumer_peak_rss_bytes"`
	// Dedup is the Redis memory the uuid claims take.
	Dedup Dedup `json:"dedup"`
	// KafkaEngine is the ClickHouse Kafka table engine peer (zero when skipped).
	KafkaEngine Phase `json:"kafka_engine"`
	// BareReader is the bare kafka-go reader peer (zero when skipped).
	BareReader Phase `json:"bare_reader"`
	// VsKafkaEngine is Mcpulse.EventsPerSecond ÷ KafkaEngine.EventsPerSecond.
	VsKafkaEngine float64 `json:"mcpulse_vs_kafka_engine"`
	// VsBareReader is Mcpulse.EventsPerSecond ÷ BareReader.EventsPerSecond.
	VsBareReader float64 `json:"mcpulse_vs_bare_reader"`
	// Machine describes where it ran.
	Machine Machine `json:"machine"`
}

// Phase is one consumer's (or the publisher's) run over all events.
type Phase struct {
	// Seconds is the phase's wall-clock duration (see Result's fields for where each starts
	// and ends).
	Seconds float64 `json:"seconds"`
	// EventsPerSecond is the events the phase handled divided by Seconds.
	EventsPerSecond float64 `json:"events_per_second"`
	// CPU is what each process spent during the phase (zero for the publisher, which runs
	// within mcpulse's phase).
	CPU CPU `json:"cpu_seconds"`
	// CPUMicrosPerEvent is CPU.Total() per event, in microseconds.
	CPUMicrosPerEvent float64 `json:"cpu_us_per_event"`
	// Missing is how many events the consumer never stored (the Kafka engine only; its rate
	// counts the events it stored).
	Missing int64 `json:"missing,omitempty"`
}

func (p *Phase) finish(n int, cpu CPU) {
	p.EventsPerSecond = float64(n) / p.Seconds
	p.CPU = cpu
	p.CPUMicrosPerEvent = cpu.Total() / float64(n) * 1e6
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

// Dedup is the Redis memory of the dedup claims after mcpulse's phase.
type Dedup struct {
	// Claims is how many uuids are claimed (HLEN over the dedup hashes).
	Claims int64 `json:"claims"`
	// KeyBytes is MEMORY USAGE (SAMPLES 0, exact) summed over the dedup hashes.
	KeyBytes int64 `json:"key_bytes"`
	// UsedMemoryDelta is INFO memory's used_memory after minus before the phase.
	UsedMemoryDelta int64 `json:"used_memory_delta_bytes"`
	// BytesPerMillion is KeyBytes scaled to a million claims in the window.
	BytesPerMillion float64 `json:"bytes_per_million_events"`
}

// Machine is what the figures were measured on.
type Machine struct {
	// CPUs is runtime.NumCPU().
	CPUs int `json:"cpus"`
	// GoVersion is the Go release the benchmark was built with.
	GoVersion string `json:"go_version"`
	// LoadAvg is /proc/loadavg's 1-minute figure when the run ended ("" when unreadable).
	LoadAvg string `json:"load_avg_1m"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m.LoadAvg = strings.Fields(string(b))[0]
	}
	return m
}

// Print writes the figures as a table.
func (r *Result) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	rate := func(p Phase) string {
		if p.Seconds == 0 {
			return "-\t-"
		}
		return fmt.Sprintf("%.0f\t%.2f", p.EventsPerSecond, p.Seconds)
	}
	cpu := func(p Phase) string {
		if p.Seconds == 0 {
			return "\t\t\t"
		}
		events := float64(r.Events - int(p.Missing))
		us := func(s float64) string { return fmt.Sprintf("%.1f", s/events*1e6) }
		return us(p.CPU.Consumer) + "\t" + us(p.CPU.ClickHouse) + "\t" + us(p.CPU.Redis) + "\t" + us(p.CPU.Bench)
	}
	fmt.Fprintf(tw, "pipeline benchmark: %d tool-call events (%.0f MB), %d CPUs, load %s\n", r.Events, float64(r.Bytes)/1e6, r.Machine.CPUs, r.Machine.LoadAvg)
	fmt.Fprintln(tw, "consumer\tevents/s\tseconds\tvs mcpulse\tCPU µs/event: consumer\tClickHouse\tRedis\tbench (kfake, publisher/reader)")
	fmt.Fprintf(tw, "mcpulse end to end (dedup, Redis, ClickHouse)\t%s\t1.00\t%s\n", rate(r.Mcpulse), cpu(r.Mcpulse))
	fmt.Fprintf(tw, "ClickHouse Kafka engine → MergeTree\t%s\t%s\t%s\n", rate(r.KafkaEngine), inverse(r.VsKafkaEngine), cpu(r.KafkaEngine))
	fmt.Fprintf(tw, "bare kafka-go reader (read, discard)\t%s\t%s\t%s\n", rate(r.BareReader), inverse(r.VsBareReader), cpu(r.BareReader))
	fmt.Fprintf(tw, "publisher (concurrent with mcpulse)\t%s\t\t\n", rate(r.Publish))
	tw.Flush()
	if r.KafkaEngine.Missing > 0 {
		fmt.Fprintf(w, "\nthe Kafka engine stored %d of %d events (no row for %.0f s; its rate counts the stored ones)", int64(r.Events)-r.KafkaEngine.Missing, r.Events, engineStall.Seconds())
	}
	fmt.Fprintf(w, "\nmcpulse ÷ Kafka engine: %s   mcpulse ÷ bare reader: %s\n", times(r.VsKafkaEngine), times(r.VsBareReader))
	fmt.Fprintf(w, "latency publish-ack → committed (queryable), %d samples: p50 %.0f ms, p99 %.0f ms, max %.0f ms\n",
		r.Latency.Samples, r.Latency.P50Ms, r.Latency.P99Ms, r.Latency.MaxMs)
	if r.ConsumerPeakRSSBytes > 0 {
		fmt.Fprintf(w, "consumer peak RSS: %.1f MiB\n", float64(r.ConsumerPeakRSSBytes)/(1<<20))
	} else {
		fmt.Fprintln(w, "consumer peak RSS: not measured (consumer ran in the benchmark's process)")
	}
	fmt.Fprintf(w, "dedup memory in Redis: %d claims in %.1f MiB (used_memory +%.1f MiB): %.1f MiB per million events in the window\n",
		r.Dedup.Claims, float64(r.Dedup.KeyBytes)/(1<<20), float64(r.Dedup.UsedMemoryDelta)/(1<<20), r.Dedup.BytesPerMillion/(1<<20))
}

func inverse(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", 1/x)
}

func times(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

// usedMemory reads INFO memory's used_memory.
func usedMemory(ctx context.Context, rdb redis.UniversalClient) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO memory: %w", err)
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("redis INFO memory has no used_memory")
}

// dedupMemory measures the dedup hashes (consumers.DedupKey names) with SCAN, HLEN and
// MEMORY USAGE.
func dedupMemory(ctx context.Context, rdb redis.UniversalClient, before int64, d *Dedup) error {
	after, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}
	d.UsedMemoryDelta = after - before
	iter := rdb.Scan(ctx, 0, "mcpulse:dedup:*", 100).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		n, err := rdb.HLen(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("redis HLEN: %w", err)
		}
		b, err := rdb.MemoryUsage(ctx, key, 0).Result()
		if err != nil {
			return fmt.Errorf("redis MEMORY USAGE: %w", err)
		}
		d.Claims += n
		d.KeyBytes += b
	}
	if err := iter.Err(); err != nil {
		return fmt.Errorf("redis SCAN: %w", err)
	}
	if d.Claims > 0 {
		d.BytesPerMillion = float64(d.KeyBytes) / float64(d.Claims) * 1e6
	}
	return nil
}
