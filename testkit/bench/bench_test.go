package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/stack"
)

// TestRun runs the whole benchmark twice on one tiny corpus (pre-published, then live) and
// checks that the figures agree with each other and with the stores, and that the Kafka-engine
// peer stored every tool call with the values mcpulse stored (never speed).
func TestRun(t *testing.T) {
	const n = 2000
	st := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, st.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	corpus := corpusDistinctIDs(t, Config{Events: n, Seed: 1, Hours: 24, Shape: ShapeDemo})

	t.Run("pre-published", func(t *testing.T) {
		res, err := Run(ctx, Config{Events: n, Runs: 2, Stack: st, PhaseTimeout: 3 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Events != n || res.Messages != n || res.Bytes <= 0 || len(res.Runs) != 2 || res.Live {
			t.Fatalf("events %d messages %d bytes %d runs %d live %v, want %d events and messages, some bytes, 2 runs", res.Events, res.Messages, res.Bytes, len(res.Runs), res.Live, n)
		}
		if res.Publish.Seconds <= 0 {
			t.Errorf("publish phase %+v", res.Publish)
		}
		var rates []float64
		for _, r := range res.Runs {
			for name, p := range map[string]Phase{"mcpulse": r.Mcpulse, "kafka engine": r.KafkaEngine, "bare reader": r.BareReader} {
				if p.Seconds <= 0 || math.Abs(p.EventsPerSecond*p.Seconds-n) > 1e-6*n || p.CPUMicrosPerEvent <= 0 {
					t.Errorf("run %d %s: %.3f s, %.1f events/s, %.1f CPU µs/event do not make %d events", r.Run, name, p.Seconds, p.EventsPerSecond, p.CPUMicrosPerEvent, n)
				}
			}
			if got, want := r.VsKafkaEngine, r.Mcpulse.EventsPerSecond/r.KafkaEngine.EventsPerSecond; math.Abs(got-want) > 1e-9 {
				t.Errorf("run %d: ratio to the Kafka engine %v, want %v", r.Run, got, want)
			}
			if got, want := r.VsBareReader, r.Mcpulse.EventsPerSecond/r.BareReader.EventsPerSecond; math.Abs(got-want) > 1e-9 {
				t.Errorf("run %d: ratio to the bare reader %v, want %v", r.Run, got, want)
			}
			if r.Latency != (Latency{}) || r.ConsumerPeakRSSBytes != 0 {
				t.Errorf("run %d: pre-published, in process: latency %+v and RSS %d, want none", r.Run, r.Latency, r.ConsumerPeakRSSBytes)
			}
			if c := r.Mcpulse.CPU; c.ClickHouseMerges < 0 || c.ClickHouseMerges > c.ClickHouse {
				t.Errorf("run %d: ClickHouse's merges %.2f s of its %.2f s CPU", r.Run, c.ClickHouseMerges, c.ClickHouse)
			}
			if r.Redis.Keys != 0 || math.Abs(r.Redis.BytesPerMillion-float64(r.Redis.UsedMemoryDelta)/n*1e6) > 1 {
				t.Errorf("run %d: Redis growth %+v: want no key for tool calls (dedup is per partition, in the consumer) and used_memory's delta scaled to a million events", r.Run, r.Redis)
			}
			filled := 0
			emptied := 0
			for _, s := range r.Rollups {
				if s.Table == "gate_reason_calls_hourly" || s.Table == "ignored_key_paths_hourly" {
					// Every hour of the corpus is sealed, and the seal deletes these per-partition
					// rows; the part it emptied may stay, a few hundred bytes of headers.
					emptied++
					if s.Rows != 0 || s.RowsOptimized != 0 || s.Bytes > 4096 {
						t.Errorf("run %d: rollup %+v: want no per-partition row left once every hour is sealed, at most an empty part", r.Run, s)
					}
					continue
				}
				if (s.Rows > 0) != (s.Bytes > 0) || (s.Rows > 0) != (s.RowsOptimized > 0) || s.RowsOptimized > s.Rows {
					t.Errorf("run %d: rollup %+v: want bytes when there are rows, and no more rows after OPTIMIZE FINAL", r.Run, s)
				}
				if s.Rows > 0 {
					filled++
				}
			}
			if raw := r.RawToolCalls; raw.Rows == 0 || raw.Bytes == 0 || raw.Parts == 0 || raw.Rows > n {
				t.Errorf("run %d: raw tool_calls storage %+v: want the stored rows (at most %d), their bytes and parts", r.Run, raw, n)
			}
			if filled == 0 {
				t.Errorf("run %d: no rollup table holds rows: %+v", r.Run, r.Rollups)
			}
			for _, table := range []string{"gate_reason_people_sealed", "ignored_key_paths_sealed", "rollup_sealed_hours"} {
				sealed := slices.IndexFunc(r.Rollups, func(s RollupStorage) bool { return s.Table == table })
				if r.Seal.Hours == 0 || sealed < 0 || r.Rollups[sealed].RowsOptimized == 0 {
					t.Errorf("run %d: seal %+v, rollups %+v: want the corpus's hours sealed and %s measured", r.Run, r.Seal, r.Rollups, table)
				}
			}
			if emptied != 2 {
				t.Errorf("run %d: rollups %+v: want gate_reason_calls_hourly and ignored_key_paths_hourly measured", r.Run, r.Rollups)
			}
			if !slices.Contains(r.PeerDefaults, "properties") {
				t.Errorf("run %d: peer default columns %v lack properties", r.Run, r.PeerDefaults)
			}
			rates = append(rates, r.Mcpulse.EventsPerSecond)
		}
		var unsealed uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM mcpulse.v_rollup_unsealed_hours").Scan(&unsealed); err != nil {
			t.Fatal(err)
		}
		if unsealed != 0 {
			t.Errorf("%d hours without a current seal after the run's seal, want none (every hour of the corpus is closed)", unsealed)
		}
		slices.Sort(rates)
		if got := res.Summary.Mcpulse.EventsPerSecond; got.Median != (rates[0]+rates[1])/2 || got.Min != rates[0] || got.Max != rates[1] {
			t.Errorf("summary %+v is not the median, min and max of %v", got, rates)
		}

		// The runs started from empty stores: each stored every distinct event once.
		var stored, distinct uint64
		if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(uuid) FROM mcpulse.tool_calls FINAL").Scan(&stored, &distinct); err != nil {
			t.Fatal(err)
		}
		if distinct >= n || stored != distinct {
			t.Errorf("mcpulse stored %d rows of %d distinct uuids; want each distinct uuid once, fewer than %d (the corpus has duplicates)", stored, distinct, n)
		}
		checkPeerRows(ctx, t, ch, corpus, nil)

		var table strings.Builder
		res.Print(&table)
		for _, want := range []string{"mcpulse end to end", "ClickHouse Kafka engine", "bare kafka-go reader", "run 2", "rollup storage", "per million tool calls"} {
			if !strings.Contains(table.String(), want) {
				t.Errorf("table lacks %q:\n%s", want, table.String())
			}
		}
	})

	t.Run("sdk", func(t *testing.T) {
		// A seed of its own: the topic still holds the pre-published run's events, and the
		// same seed gives the same uuids, which the consumer's dedup windows would drop.
		res, err := Run(ctx, Config{Events: n, Seed: 3, Shape: ShapeSDK, Stack: st, PhaseTimeout: 3 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if res.Events != n || res.Shape != ShapeSDK {
			t.Fatalf("events %d shape %s", res.Events, res.Shape)
		}
		// The session events go with the calls once the consumer routes their kinds; until
		// then they are left out, and a note says so.
		if res.Messages == n && !strings.Contains(strings.Join(res.Notes, "\n"), "$mcp_tools_list") {
			t.Errorf("no session events published and no note why: %v", res.Notes)
		}
		if res.Messages > n && strings.Contains(strings.Join(res.Notes, "\n"), "not published") {
			t.Errorf("session events published, yet a note says some were not: %v", res.Notes)
		}
		var derived uint64
		if err := ch.QueryRow(ctx, "SELECT count() FROM mcpulse.tool_calls WHERE ignored_keys_source IN ('response', 'schema', 'not_measurable')").Scan(&derived); err != nil {
			t.Fatal(err)
		}
		if pending := strings.Contains(strings.Join(res.Notes, "\n"), "PENDING"); pending != (derived == 0) {
			t.Errorf("%d derivations stored, notes %q: the figures must be marked pending exactly when there are none", derived, res.Notes)
		}
		r := res.Runs[0]
		if r.KafkaEngine.Missing != 0 || r.BareReader.Seconds <= 0 {
			t.Errorf("peers: %+v %+v", r.KafkaEngine, r.BareReader)
		}
		sdk := corpusDistinctIDs(t, Config{Events: n, Seed: 3, Hours: 24, Shape: ShapeSDK})
		// The SDK sends no $mcp_ignored_keys: mcpulse derives the ignored keys (from the result
		// or the served schema), which a SELECT cannot; the peer's columns hold none.
		pending := map[string]bool{"ignored_keys": true, "ignored_keys_total": true}
		checkPeerRows(ctx, t, ch, sdk, pending)
	})

	t.Run("two members", func(t *testing.T) {
		// Two consumers of the group share the partitions; the stores end as one would leave
		// them: each distinct event once.
		members := -1 // the group's members, seen half-way
		midway := func() {
			client := &kafka.Client{Addr: kafka.TCP(st.KafkaBrokers...), Timeout: 10 * time.Second}
			resp, err := client.DescribeGroups(ctx, &kafka.DescribeGroupsRequest{GroupIDs: []string{runGroup(McpulseGroup, 1)}})
			if err != nil || len(resp.Groups) != 1 {
				t.Errorf("describing the group half-way: %v", err)
				return
			}
			members = len(resp.Groups[0].Members)
		}
		res, err := Run(ctx, Config{Events: n, Seed: 4, Runs: 1, ConsumerMembers: 2, SkipPeers: true, Stack: st, PhaseTimeout: 3 * time.Minute, Midway: midway})
		if err != nil {
			t.Fatal(err)
		}
		if members != 2 {
			t.Errorf("half-way the group had %d members, want 2", members)
		}
		if res.ConsumerMembers != 2 || len(res.Runs) != 1 || res.Runs[0].Mcpulse.Seconds <= 0 {
			t.Fatalf("members %d, runs %+v: want one run of two members", res.ConsumerMembers, res.Runs)
		}
		var table strings.Builder
		res.Print(&table)
		if !strings.Contains(table.String(), "2 consumer-group members") {
			t.Errorf("the table does not name the members:\n%s", table.String())
		}
		corpus := corpusDistinctIDs(t, Config{Events: n, Seed: 4, Hours: 24, Shape: ShapeDemo})
		var stored, distinct uint64
		if err := ch.QueryRow(ctx, "SELECT count(), uniqExact(uuid) FROM mcpulse.tool_calls FINAL").Scan(&stored, &distinct); err != nil {
			t.Fatal(err)
		}
		if stored != distinct || distinct != uint64(len(corpus.uuids)) {
			t.Errorf("two members stored %d rows of %d distinct uuids, want each of the corpus's %d once", stored, distinct, len(corpus.uuids))
		}
	})

	t.Run("live", func(t *testing.T) {
		// Other events than the pre-published run's, which the topic still holds: the same
		// uuids again would be duplicates within their partitions' dedup windows.
		corpus := corpusDistinctIDs(t, Config{Events: n, Seed: 2, Hours: 24, Shape: ShapeDemo})
		res, err := Run(ctx, Config{Events: n, Seed: 2, Live: true, Rate: 4 * n, SampleEvery: 10, Stack: st, PhaseTimeout: 3 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		r := res.Runs[0]
		if r.KafkaEngine.Seconds != 0 || r.BareReader.Seconds != 0 {
			t.Errorf("live run ran the peers: %+v %+v", r.KafkaEngine, r.BareReader)
		}
		if r.Latency.Samples != n/10 {
			t.Errorf("%d latency samples, want %d", r.Latency.Samples, n/10)
		}
		if l := r.Latency; l.P50Ms < 0 || l.P50Ms > l.P99Ms || l.P99Ms > l.MaxMs || l.MaxMs > r.Mcpulse.Seconds*1000 {
			t.Errorf("latency %+v is not ordered 0 ≤ p50 ≤ p99 ≤ max ≤ the phase (%.0f ms)", l, r.Mcpulse.Seconds*1000)
		}
		// At 4n events/s, in chunks of 1000, the last chunk is due (n-1000)/4n s after the first.
		if r.Publish.Seconds < float64(n-1000)/(4*n) || math.Abs(r.Publish.EventsPerSecond*r.Publish.Seconds-n) > 1e-6*n {
			t.Errorf("live publish %+v: want at least %.3f s for %d events at %d/s", r.Publish, float64(n-1000)/(4*n), n, 4*n)
		}
		if res.Summary.LatencyP99Ms.Median != r.Latency.P99Ms {
			t.Errorf("summary p99 %+v, want the run's %v", res.Summary.LatencyP99Ms, r.Latency.P99Ms)
		}
		var stored uint64
		if err := ch.QueryRow(ctx, "SELECT uniqExact(uuid) FROM mcpulse.tool_calls").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if want := uint64(len(corpus.uuids)); stored != want {
			t.Errorf("live run stored %d distinct uuids, want %d", stored, want)
		}
	})

	t.Run("live runs after the first start on emptied topics", func(t *testing.T) {
		// The second run publishes the corpus of seed 3 on topics emptied of every earlier
		// run's messages, so its member has no backlog to rebuild its dedup windows from.
		corpus := corpusDistinctIDs(t, Config{Events: n, Seed: 3, Hours: 24, Shape: ShapeDemo})
		res, err := Run(ctx, Config{Events: n, Seed: 2, Runs: 2, Live: true, Rate: 4 * n, SampleEvery: 10, Stack: st, PhaseTimeout: 3 * time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Runs) != 2 || res.Runs[1].Latency.Samples != n/10 {
			t.Fatalf("runs %+v, want 2 with %d latency samples each", res.Runs, n/10)
		}
		ends, err := endOffsets(ctx, st.KafkaBrokers, ingest.TopicToolCalls)
		if err != nil {
			t.Fatal(err)
		}
		var held int64
		for _, end := range ends {
			held += end
		}
		if held != n {
			t.Errorf("%s holds %d messages after the second live run, want its %d", ingest.TopicToolCalls, held, n)
		}
		var stored uint64
		if err := ch.QueryRow(ctx, "SELECT uniqExact(uuid) FROM mcpulse.tool_calls").Scan(&stored); err != nil {
			t.Fatal(err)
		}
		if want := uint64(len(corpus.uuids)); stored != want {
			t.Errorf("the second live run stored %d distinct uuids, want %d", stored, want)
		}
	})
}

// corpusIDs is what a corpus's tool calls carry.
type corpusIDs struct {
	distinctIDs map[string]uint64 // tool calls per distinct_id
	uuids       map[string]bool
}

// corpusDistinctIDs regenerates cfg's corpus and counts its tool calls per distinct_id.
func corpusDistinctIDs(t *testing.T, cfg Config) corpusIDs {
	t.Helper()
	out := corpusIDs{distinctIDs: map[string]uint64{}, uuids: map[string]bool{}}
	_, err := generate(context.Background(), cfg, func(msgs []kafka.Message) error {
		for _, m := range msgs {
			if jsonField(m.Value, "event") != "$mcp_tool_call" {
				continue // the SDK's session events
			}
			id, uuid := jsonField(m.Value, "distinct_id"), jsonField(m.Value, "uuid")
			out.distinctIDs[id]++
			out.uuids[uuid] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func mustDescribe(ctx context.Context, t *testing.T, ch driver.Conn) []tableColumn {
	t.Helper()
	cols, err := describe(ctx, ch, "mcpulse.tool_calls")
	if err != nil {
		t.Fatal(err)
	}
	return cols
}

// checkPeerRows checks that the Kafka-engine peer stored every tool call of the corpus with
// its distinct_id intact, and the same value as mcpulse in every column both fill (but the
// skipped ones).
func checkPeerRows(ctx context.Context, t *testing.T, ch driver.Conn, corpus corpusIDs, skip map[string]bool) {
	t.Helper()
	got := map[string]uint64{}
	rows, err := ch.Query(ctx, "SELECT distinct_id, count() FROM "+BenchDatabase+".tool_calls GROUP BY distinct_id")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			id string
			n  uint64
		)
		if err := rows.Scan(&id, &n); err != nil {
			t.Fatal(err)
		}
		got[id] = n
	}
	rows.Close()
	if !maps.Equal(got, corpus.distinctIDs) {
		var diff []string
		for id, n := range corpus.distinctIDs {
			if got[id] != n {
				diff = append(diff, fmt.Sprintf("%q: corpus %d, peer %d", id, n, got[id]))
			}
		}
		for id, n := range got {
			if _, ok := corpus.distinctIDs[id]; !ok {
				diff = append(diff, fmt.Sprintf("%q: not in the corpus, peer %d", id, n))
			}
		}
		slices.Sort(diff)
		t.Errorf("the peer's rows per distinct_id differ from the corpus's tool calls (%d ids):\n%s", len(diff), strings.Join(diff[:min(len(diff), 20)], "\n"))
	}
	if !slices.ContainsFunc(slices.Collect(maps.Keys(corpus.distinctIDs)), func(id string) bool { return strings.ContainsAny(id, `\"`) }) {
		t.Errorf("the corpus has no distinct_id with a backslash or quote: the check proves less than it should")
	}

	columns, err := describe(ctx, ch, "mcpulse.tool_calls")
	if err != nil {
		t.Fatal(err)
	}
	plan, err := planPeer(columns)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.unmapped) > 0 {
		t.Errorf("tool_calls columns %v have no rule in the peer (peerColumns or peerDerived)", plan.unmapped)
	}
	for _, c := range columns {
		if _, ok := peerColumns[c.Name]; !ok || peerApproximate[c.Name] || skip[c.Name] {
			continue
		}
		// One checksum over the distinct (uuid, value) pairs of each table.
		sum := func(table string) (uint64, uint64) {
			var s, n uint64
			q := fmt.Sprintf("SELECT sum(cityHash64(toString(uuid), %s)), count() FROM (SELECT DISTINCT uuid, `%s` AS v FROM %s)", textOf("v", c.Type), c.Name, table)
			if err := ch.QueryRow(ctx, q).Scan(&s, &n); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			return s, n
		}
		ms, mn := sum("mcpulse.tool_calls")
		ps, pn := sum(BenchDatabase + ".tool_calls")
		if ms != ps || mn != pn {
			t.Errorf("column %s: the peer's (uuid, value) pairs differ from mcpulse's (%d and %d pairs); some of mcpulse's the peer lacks: %s",
				c.Name, pn, mn, strings.Join(missingPairs(ctx, t, ch, c), "; "))
		}
	}
}

// missingPairs returns up to 3 (uuid, value) pairs of column c that mcpulse stored and the
// peer did not, each with the peer's value.
func missingPairs(ctx context.Context, t *testing.T, ch driver.Conn, c tableColumn) []string {
	pairs := func(table string) string {
		return fmt.Sprintf("SELECT DISTINCT uuid, %s AS v FROM (SELECT uuid, `%s` AS v FROM %s)", textOf("v", c.Type), c.Name, table)
	}
	q := fmt.Sprintf("SELECT toString(m.uuid), m.v, p.v FROM (%s) AS m ANY LEFT JOIN (%s) AS p USING uuid WHERE m.v != p.v LIMIT 3",
		pairs("mcpulse.tool_calls"), pairs(BenchDatabase+".tool_calls"))
	rows, err := ch.Query(ctx, q)
	if err != nil {
		return []string{err.Error()}
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, m, p string
		if err := rows.Scan(&id, &m, &p); err != nil {
			return []string{err.Error()}
		}
		out = append(out, fmt.Sprintf("%s: mcpulse %q, peer %q", id, m, p))
	}
	return out
}

// peerApproximate are peerColumns whose values legitimately differ from mcpulse's.
var peerApproximate = map[string]bool{
	"inserted_at":          true, // each store's own clock
	"counted_ignored_keys": true, // mcpulse leaves client-injected keys out
}

// textOf renders a value of a column type as text, for a checksum. Floats are rounded to 9
// digits after the point: 18.16's float parser is not always correctly rounded, so it may
// read a JSON number one unit in the last place away from Go's reading.
func textOf(v, typ string) string {
	if strings.Contains(typ, "Float") {
		v = "round(" + v + ", 9)"
	}
	switch {
	case strings.HasPrefix(typ, "Array("):
		return "arrayStringConcat(arrayMap(x -> toString(x), " + v + "), '\\x1f')"
	case strings.HasPrefix(typ, "Nullable("):
		return "ifNull(toString(" + v + "), 'NULL')"
	}
	return "toString(" + v + ")"
}

// jsonField reads a top-level string field of a generated line ("" when absent).
func jsonField(line []byte, name string) string {
	var v map[string]json.RawMessage
	var s string
	if json.Unmarshal(line, &v) != nil || json.Unmarshal(v[name], &s) != nil {
		return ""
	}
	return s
}

func TestGenerateChunksTheCorpusAndKeepsOnlyToolCalls(t *testing.T) {
	defer func(old int) { chunkToolCalls[ShapeDemo] = old }(chunkToolCalls[ShapeDemo])
	chunkToolCalls[ShapeDemo] = 500
	collect := func(events int) ([]kafka.Message, *corpusStats) {
		var all []kafka.Message
		stats, err := generate(context.Background(), Config{Events: events, Seed: 7, Hours: 24, Shape: ShapeDemo}, func(msgs []kafka.Message) error {
			all = append(all, msgs...)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return all, stats
	}
	all, stats := collect(1200)
	if stats.ToolCalls != 1200 || len(all) != 1200 || stats.Messages[topicToolCalls] != 1200 || stats.total() != 1200 {
		t.Fatalf("stats %+v, %d messages: want exactly 1200 tool calls on %s", stats, len(all), topicToolCalls)
	}
	for _, m := range all {
		if m.Topic != topicToolCalls || jsonField(m.Value, "event") != "$mcp_tool_call" {
			t.Fatalf("message on %s is not a tool call: %s", m.Topic, m.Value)
		}
		if string(m.Key) != jsonField(m.Value, "distinct_id") {
			t.Errorf("message key %q is not its distinct_id %q", m.Key, jsonField(m.Value, "distinct_id"))
		}
	}
	// The first chunk is the corpus of seed 7 alone; the next ones use seeds 8 and 9.
	first, _ := collect(500)
	for i := range first {
		if !bytes.Equal(first[i].Value, all[i].Value) {
			t.Fatalf("message %d differs from the one-chunk corpus's", i)
		}
	}
	if bytes.Equal(all[500].Value, all[0].Value) {
		t.Errorf("the second chunk starts like the first")
	}
}

func TestPlanPeerFillsEveryColumnItKnows(t *testing.T) {
	cols := []tableColumn{
		{Name: "uuid", Type: "UUID"}, {Name: "tool_name", Type: "String"}, {Name: "duration_ms", Type: "Nullable(Float64)"},
		{Name: "properties", Type: "String"}, {Name: "tool_name_lower", Type: "String", DefaultKind: "MATERIALIZED"},
		{Name: "brand_new", Type: "String"},
	}
	p, err := planPeer(cols)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(p.unmapped, []string{"brand_new"}) || !slices.Equal(p.defaults, []string{"properties"}) {
		t.Errorf("unmapped %v, defaults %v; want [brand_new] and [properties]", p.unmapped, p.defaults)
	}
	sel := strings.Join(p.selects, "\n")
	for _, want := range []string{"CAST(toUUID(uuid) AS UUID) AS `uuid`", "`properties.$mcp_exec_target_tool`", "CAST(`properties.$mcp_duration_ms` AS Nullable(Float64)) AS `duration_ms`",
		"assumeNotNull(CAST(NULL AS Nullable(String))) AS `properties`", "assumeNotNull(CAST(NULL AS Nullable(String))) AS `brand_new`"} {
		if !strings.Contains(sel, want) {
			t.Errorf("selects lack %q:\n%s", want, sel)
		}
	}
	if strings.Contains(sel, "tool_name_lower") {
		t.Errorf("a MATERIALIZED column is selected:\n%s", sel)
	}
	var names []string
	for _, c := range p.input {
		names = append(names, c[0])
	}
	// tool_name reads three $-named properties; 18.16 needs one identifier-named sibling.
	want := []string{"uuid", "event", "distinct_id", "timestamp", "properties.$mcp_duration_ms", "properties.$mcp_exec_target_tool", "properties.$mcp_exec_verb", "properties.$mcp_tool_name", "properties.source"}
	if !slices.Equal(names, want) {
		t.Errorf("Kafka table columns %v, want %v", names, want)
	}
}

func TestKafkaEngineDDLUsesEachVersionsSyntax(t *testing.T) {
	plan := &peerPlan{input: [][2]string{{"uuid", "String"}, {"properties.$mcp_tool_name", "String"}}, selects: []string{"uuid"}}
	old := strings.Join(kafkaEngineDDL(18, []string{"127.0.0.1:9092"}, "mcp_tool_calls", "g'1", plan), "\n")
	for _, want := range []string{
		"ENGINE = Kafka('127.0.0.1:9092', 'mcp_tool_calls', 'g\\'1', 'JSONEachRow')",
		"(`uuid` String, `properties.$mcp_tool_name` String)",
		"CREATE TABLE mcpulse_bench.tool_calls AS mcpulse.tool_calls",
		"WHERE event = '$mcp_tool_call'",
	} {
		if !strings.Contains(old, want) {
			t.Errorf("18.16 DDL lacks %q:\n%s", want, old)
		}
	}
	cur := strings.Join(kafkaEngineDDL(24, []string{"127.0.0.1:9092"}, "mcp_tool_calls", "g", plan), "\n")
	if !strings.Contains(cur, "ENGINE = Kafka SETTINGS kafka_broker_list = '127.0.0.1:9092', kafka_topic_list = 'mcp_tool_calls', kafka_group_name = 'g', kafka_format = 'JSONEachRow', input_format_import_nested_json = 1") {
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

func TestStatOfIsMedianMinMax(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want Stat
	}{
		{[]float64{3, 1, 2}, Stat{2, 1, 3}},
		{[]float64{4, 1, 3, 2}, Stat{2.5, 1, 4}},
		{[]float64{5}, Stat{5, 5, 5}},
		{nil, Stat{}},
	} {
		if got := statOf(c.in); got != c.want {
			t.Errorf("statOf(%v) = %+v, want %+v", c.in, got, c.want)
		}
	}
}

// The in-process Kafka keeps the messages where KafkaStore says; auto keeps up to
// AutoDiskEvents in memory.
func TestKafkaStore(t *testing.T) {
	for _, c := range []struct {
		store  string
		events int
		disk   bool
	}{
		{KafkaAuto, AutoDiskEvents, false}, {KafkaAuto, AutoDiskEvents + 1, true},
		{KafkaInMemory, 10 * AutoDiskEvents, false}, {KafkaOnDisk, 1, true},
	} {
		cfg := Config{Events: c.events, KafkaStore: c.store}
		cfg.setDefaults()
		if err := cfg.Validate(); err != nil {
			t.Errorf("%s, %d events: %v", c.store, c.events, err)
		}
		if got := cfg.kafkaOnDisk(); got != c.disk {
			t.Errorf("%s, %d events: on disk %v, want %v", c.store, c.events, got, c.disk)
		}
	}
	cfg := Config{KafkaStore: "ssd"}
	cfg.setDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `"ssd"`) {
		t.Errorf("KafkaStore ssd: %v, want an error naming it", err)
	}
	cfg = Config{ConsumerBatchMaxAge: -time.Second}
	cfg.setDefaults()
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "ConsumerBatchMaxAge") {
		t.Errorf("ConsumerBatchMaxAge -1s: %v, want an error naming it", err)
	}
}

// A child consumer gets the run's group and the consumer settings given as its own flags,
// and none it was not given.
func TestChildArgvCarriesTheConsumerSettings(t *testing.T) {
	base := []string{"mcpulse", "consume", "--until-drained"}
	for _, tc := range []struct {
		cfg  Config
		want []string
	}{
		{Config{ConsumerArgv: base}, []string{"mcpulse", "consume", "--until-drained", "--group", "g1"}},
		{Config{ConsumerArgv: base, ConsumerBatchSize: 5000, ConsumerBatchMaxAge: 300 * time.Millisecond},
			[]string{"mcpulse", "consume", "--until-drained", "--group", "g1", "--batch-size", "5000", "--batch-max-age", "300ms"}},
		{Config{ConsumerArgv: base, ConsumerBatchMaxAge: consumers.NoBatchMaxAge},
			[]string{"mcpulse", "consume", "--until-drained", "--group", "g1", "--batch-max-age", "0"}},
		{Config{ConsumerArgv: base, ConsumerCPUProfile: "/tmp/cpu.out"},
			[]string{"mcpulse", "consume", "--until-drained", "--group", "g1", "--cpuprofile", "/tmp/cpu.out"}},
	} {
		if got := tc.cfg.childArgv("g1", 1, 1); !slices.Equal(got, tc.want) {
			t.Errorf("childArgv = %q, want %q", got, tc.want)
		}
		if tc.cfg.ConsumerCPUProfile != "" {
			if got, want := tc.cfg.childArgv("g1", 3, 1), append(slices.Clone(tc.want[:len(tc.want)-1]), "/tmp/cpu.out.run3"); !slices.Equal(got, want) {
				t.Errorf("run 3: childArgv = %q, want %q", got, want)
			}
			if got, want := tc.cfg.childArgv("g1", 3, 2), append(slices.Clone(tc.want[:len(tc.want)-1]), "/tmp/cpu.out.run3.member2"); !slices.Equal(got, want) {
				t.Errorf("run 3, member 2: childArgv = %q, want %q", got, want)
			}
		}
		if len(tc.cfg.ConsumerArgv) != len(base) {
			t.Errorf("childArgv changed ConsumerArgv to %q", tc.cfg.ConsumerArgv)
		}
	}
}

// The printed header names the consumer settings a run was given and where the in-process
// Kafka kept the messages, so results can be told apart; with the defaults and a caller's
// stack it names only the consumer's default --batch-max-age, the bound its latency follows.
func TestPrintNamesTheConsumerSettings(t *testing.T) {
	defaultAge := "consumer --batch-max-age " + consumers.DefaultBatchMaxAge.String() + " (default)"
	for _, tc := range []struct {
		res        Result
		want, lack []string
	}{
		{Result{Shape: ShapeDemo, ConsumerBatchSize: 50000, ConsumerBatchMaxAge: "300ms", KafkaStore: KafkaOnDisk},
			[]string{"consumer --batch-size 50000", "consumer --batch-max-age 300ms", "in-process Kafka's messages on disk"}, []string{"(default)", "(no bound)"}},
		{Result{Shape: ShapeDemo, ConsumerBatchMaxAge: maxAgeText(consumers.NoBatchMaxAge)}, []string{"consumer --batch-max-age 0 (no bound)"}, []string{"(default)"}},
		{Result{Shape: ShapeDemo, ConsumerBatchMaxAge: maxAgeText(0)}, []string{defaultAge}, []string{"--batch-size", "(no bound)", "in-process Kafka"}},
	} {
		var out strings.Builder
		tc.res.Print(&out)
		header, _, _ := strings.Cut(out.String(), "\n")
		for _, w := range tc.want {
			if !strings.Contains(header, w) {
				t.Errorf("header %q lacks %q", header, w)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(header, l) {
				t.Errorf("header %q names %q, which does not fit the run", header, l)
			}
		}
	}
}

// The corpus's bytes are counted per event name, and they add up to the corpus's bytes.
func TestCorpusCountsBytesPerEvent(t *testing.T) {
	var all []kafka.Message
	stats, err := generate(context.Background(), Config{Events: 300, Seed: 5, Hours: 24, Shape: ShapeSDK}, func(msgs []kafka.Message) error {
		all = append(all, msgs...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]EventBytes{}
	for _, m := range all {
		name := jsonField(m.Value, "event")
		b := want[name]
		b.Event, b.Messages, b.Bytes = name, b.Messages+1, b.Bytes+int64(len(m.Value))
		want[name] = b
	}
	var sum int64
	got := stats.byEvent()
	for i, e := range got {
		w := want[e.Event]
		if e.Messages != w.Messages || e.Bytes != w.Bytes || e.BytesPerMessage != float64(w.Bytes)/float64(w.Messages) {
			t.Errorf("%s: %+v, want %d messages of %d bytes", e.Event, e, w.Messages, w.Bytes)
		}
		if i > 0 && got[i-1].Bytes < e.Bytes {
			t.Errorf("%s (%d bytes) listed after %s (%d bytes): want the most bytes first", e.Event, e.Bytes, got[i-1].Event, got[i-1].Bytes)
		}
		sum += e.Bytes
	}
	if len(got) != len(want) || sum != stats.Bytes || want["$mcp_tool_call"].Messages != 300 {
		t.Errorf("by event %+v (%d bytes), want %d event names adding up to %d bytes, 300 tool calls", got, sum, len(want), stats.Bytes)
	}
	var s Summary
	s.setCorpus(stats)
	if s.KafkaBytesPerToolCall != float64(stats.Bytes)/300 {
		t.Errorf("Kafka bytes per tool call %v, want %v", s.KafkaBytesPerToolCall, float64(stats.Bytes)/300)
	}
}

// The table and the JSON summary give every run's rates and ratios beside their median, and
// the bytes per event on Kafka and per row in the raw tables.
func TestPrintGivesEveryRunAndTheBytesPerEvent(t *testing.T) {
	res := Result{Shape: ShapeSDK, Events: 1000}
	for i, rates := range [][2]float64{{30000, 20000}, {45000, 30000}, {20000, 25000}} {
		run := RunResult{Run: i + 1, Mcpulse: Phase{Seconds: 1, EventsPerSecond: rates[0]}, KafkaEngine: Phase{Seconds: 1, EventsPerSecond: rates[1]},
			BareReader: Phase{Seconds: 1, EventsPerSecond: 100000}, VsKafkaEngine: rates[0] / rates[1], VsBareReader: rates[0] / 100000,
			RawTables:       []RollupStorage{{Table: "tool_calls", Rows: 1000, Bytes: uint64(130000 + 1000*i)}, {Table: "mcp_initialize_events", Rows: 10, Bytes: 5000}},
			ToolCallColumns: []ColumnBytes{{Column: "properties", Compressed: 40000, Uncompressed: 400000, CompressedPerRow: 40, UncompressedPerRow: 400}}}
		res.Runs = append(res.Runs, run)
	}
	res.summarize()
	res.Summary.setCorpus(&corpusStats{ToolCalls: 1000, Bytes: 2_600_000, ByEvent: map[string]EventBytes{
		"$mcp_tool_call": {Messages: 1000, Bytes: 2_000_000}, "$mcp_tools_list": {Messages: 20, Bytes: 600_000}}})

	s := res.Summary
	if len(s.PerRun) != 3 || s.PerRun[1] != (RunFigures{Run: 2, Mcpulse: 45000, KafkaEngine: 30000, BareReader: 100000, VsKafkaEngine: 1.5, VsBareReader: 0.45}) {
		t.Errorf("per run %+v", s.PerRun)
	}
	if got := s.RawBytesPerRow; len(got) != 2 || got[0].Table != "tool_calls" || got[0].BytesPerRow != (Stat{131, 130, 132}) || got[1].BytesPerRow.Median != 500 {
		t.Errorf("raw bytes per row %+v, want tool_calls 131 (130–132) and mcp_initialize_events 500", got)
	}
	var out strings.Builder
	res.Print(&out)
	for _, want := range []string{
		"30000", "20000", "1.50×", "45000", "0.80×", "median", // every run and the median
		"Kafka message bytes: 2600 per tool call", "$mcp_tool_call 1000 × 2000 bytes", "$mcp_tools_list 20 × 30000 bytes",
		"tool_calls 131 (130–132)", "mcp_initialize_events 500", "properties 40 of 400",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	js, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Summary struct {
			PerRun []struct {
				VsKafkaEngine float64 `json:"mcpulse_vs_kafka_engine"`
			} `json:"per_run"`
			KafkaBytesPerToolCall float64 `json:"kafka_bytes_per_tool_call"`
			RawBytesPerRow        []struct {
				Table       string `json:"table"`
				BytesPerRow Stat   `json:"bytes_per_row"`
			} `json:"raw_bytes_per_row"`
		} `json:"summary"`
	}
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	if b := back.Summary; len(b.PerRun) != 3 || b.PerRun[2].VsKafkaEngine != 0.8 || b.KafkaBytesPerToolCall != 2600 || len(b.RawBytesPerRow) != 2 {
		t.Errorf("JSON summary %+v", b)
	}
}

// The raw tables are measured when they hold rows, and tool_calls' columns by their bytes.
func TestRawStorageMeasuresTheFilledRawTables(t *testing.T) {
	st := stack.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ch, err := stores.OpenClickHouse(ctx, st.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	e := &env{cfg: Config{}, ch: ch}
	e.cfg.setDefaults()
	if e.rdb, err = stores.OpenRedis(ctx, st.RedisURL); err != nil {
		t.Fatal(err)
	}
	defer e.rdb.Close()
	if err := resetStores(ctx, e); err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(ctx, `INSERT INTO mcpulse.tool_calls (uuid, timestamp, tool_name, properties)
SELECT generateUUIDv4(), toDateTime('2026-01-01 00:00:00', 'UTC'), 'search', concat('{"k":', toString(number), '}') FROM system.numbers LIMIT 1000`); err != nil {
		t.Fatal(err)
	}
	raw, err := rawStorage(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	if len(raw) != 1 || raw[0].Table != "tool_calls" || raw[0].Rows != 1000 || raw[0].Bytes == 0 {
		t.Fatalf("raw storage %+v, want tool_calls alone with its 1000 rows", raw)
	}
	cols, err := largestColumns(ctx, ch, "tool_calls", raw[0].Rows)
	if err != nil {
		t.Fatal(err)
	}
	if len(cols) != topColumns || !slices.ContainsFunc(cols, func(c ColumnBytes) bool { return c.Column == "properties" }) {
		t.Fatalf("largest columns %+v, want %d of them, properties among them", cols, topColumns)
	}
	for i, c := range cols {
		if c.Compressed == 0 || c.CompressedPerRow != float64(c.Compressed)/1000 || c.UncompressedPerRow != float64(c.Uncompressed)/1000 ||
			(i > 0 && cols[i-1].Compressed < c.Compressed) {
			t.Errorf("column %d %+v: want bytes per row of 1000 rows, the largest first", i, c)
		}
	}
}
