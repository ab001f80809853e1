package bench

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// TestRunFiguresAreConsistent runs the whole benchmark on a tiny corpus and checks the
// figures' shape and that they agree with each other and with the stores (never speed).
func TestRunFiguresAreConsistent(t *testing.T) {
	const n = 3000
	stack := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := Run(ctx, Config{Events: n, SampleEvery: 10, Stack: stack, PhaseTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Events != n || res.Bytes <= 0 {
		t.Errorf("events %d bytes %d, want %d events and some bytes", res.Events, res.Bytes, n)
	}
	for name, p := range map[string]Phase{"publish": res.Publish, "mcpulse": res.Mcpulse, "kafka engine": res.KafkaEngine, "bare reader": res.BareReader} {
		if p.Seconds <= 0 || math.Abs(p.EventsPerSecond*p.Seconds-n) > 1e-6*n {
			t.Errorf("%s: %.3f s and %.1f events/s do not make %d events", name, p.Seconds, p.EventsPerSecond, n)
		}
	}
	if got, want := res.VsKafkaEngine, res.Mcpulse.EventsPerSecond/res.KafkaEngine.EventsPerSecond; math.Abs(got-want) > 1e-9 {
		t.Errorf("ratio to the Kafka engine %v, want %v", got, want)
	}
	if got, want := res.VsBareReader, res.Mcpulse.EventsPerSecond/res.BareReader.EventsPerSecond; math.Abs(got-want) > 1e-9 {
		t.Errorf("ratio to the bare reader %v, want %v", got, want)
	}
	if res.Latency.Samples != n/10 {
		t.Errorf("%d latency samples, want %d", res.Latency.Samples, n/10)
	}
	if l := res.Latency; l.P50Ms < 0 || l.P50Ms > l.P99Ms || l.P99Ms > l.MaxMs || l.MaxMs > res.Mcpulse.Seconds*1000 {
		t.Errorf("latency %+v is not ordered 0 ≤ p50 ≤ p99 ≤ max ≤ the run (%.0f ms)", l, res.Mcpulse.Seconds*1000)
	}
	if res.ConsumerPeakRSSBytes != 0 {
		t.Errorf("in-process run reports an RSS of %d", res.ConsumerPeakRSSBytes)
	}

	// Every distinct uuid is claimed once and stored once; the Kafka engine stored every message.
	ch, err := stores.OpenClickHouse(ctx, stack.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	var stored, engineRows, distinct uint64
	if err := ch.QueryRow(ctx, "SELECT count() FROM mcpulse.tool_calls FINAL").Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(uuid) FROM "+BenchDatabase+".tool_calls").Scan(&engineRows, &distinct); err != nil {
		t.Fatal(err)
	}
	if engineRows != n {
		t.Errorf("Kafka engine table holds %d rows, want %d", engineRows, n)
	}
	if distinct == n || stored != distinct || res.Dedup.Claims != int64(distinct) {
		t.Errorf("%d distinct uuids (want fewer than %d: the corpus has duplicates), %d stored, %d claimed", distinct, n, stored, res.Dedup.Claims)
	}
	if res.Dedup.KeyBytes <= 0 || math.Abs(res.Dedup.BytesPerMillion-float64(res.Dedup.KeyBytes)/float64(res.Dedup.Claims)*1e6) > 1 {
		t.Errorf("dedup memory %+v is not KeyBytes per claim scaled to a million", res.Dedup)
	}

	var table strings.Builder
	res.Print(&table)
	for _, want := range []string{"mcpulse end to end", "ClickHouse Kafka engine", "bare kafka-go reader", "p99", "per million events"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestKafkaEngineDDLUsesEachVersionsSyntax(t *testing.T) {
	old := strings.Join(kafkaEngineDDL(18, []string{"127.0.0.1:9092"}, "g'1"), "\n")
	if !strings.Contains(old, `ENGINE = Kafka('127.0.0.1:9092', 'mcp_tool_calls', 'g\'1', 'TabSeparated', '\n')`) {
		t.Errorf("18.16 DDL lacks the positional engine arguments:\n%s", old)
	}
	cur := strings.Join(kafkaEngineDDL(24, []string{"127.0.0.1:9092"}, "g"), "\n")
	if !strings.Contains(cur, `ENGINE = Kafka SETTINGS kafka_broker_list = '127.0.0.1:9092', kafka_topic_list = 'mcp_tool_calls', kafka_group_name = 'g', kafka_format = 'TabSeparated'`) {
		t.Errorf("current DDL lacks the SETTINGS form:\n%s", cur)
	}
}

func TestQuantileIsNearestRank(t *testing.T) {
	v := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, c := range []struct{ q, want float64 }{{0.5, 5}, {0.99, 10}, {0.1, 1}, {0, 1}, {1, 10}} {
		if got := quantile(v, c.q); got != c.want {
			t.Errorf("quantile(1..10, %v) = %v, want %v", c.q, got, c.want)
		}
	}
}
