package rollup_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers/rollup"
	"github.com/mcpulse/mcpulse/misuse"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// event is one message of a test partition log: a tool call (or nothing: a message without
// an event still advances the offsets).
type event struct {
	call *rollup.ToolCall
}

func genLog(rng *rand.Rand, n int) []event {
	tools := []string{"query-run", "feature-flag-get", "docs-search", "insight-create"}
	clients := []string{"claude-code", "cursor", ""}
	keys := []string{"limit", "filters.date", "query.kind", "items.0.name"}
	sources := []misuse.Source{misuse.SourceReported, misuse.SourceResponse, misuse.SourceSchema, misuse.SourceNotMeasurable, ""}
	reasons := []misuse.Reason{misuse.ReasonNoSchema, misuse.ReasonArgumentsTruncated, misuse.ReasonRootUnion, misuse.ReasonSchemaTruncated}
	log := make([]event, n)
	for i := range log {
		if rng.IntN(20) == 0 {
			continue // not an event
		}
		tc := &rollup.ToolCall{
			Timestamp: t0.Add(time.Duration(rng.IntN(3*3600)) * time.Second),
			Tool:      tools[rng.IntN(len(tools))], Client: clients[rng.IntN(len(clients))],
			Server: "posthog", ServerVersion: []string{"1.0", "1.1"}[rng.IntN(2)],
			IsError: rng.IntN(5) == 0, Source: sources[rng.IntN(len(sources))],
			ErrorClass: []misuse.ErrorClass{"", misuse.ClassValidationType, misuse.ClassUnknownTool, misuse.ClassOther}[rng.IntN(4)], UnknownTool: rng.IntN(10) == 0,
			CampaignID: "c1", URLSupport: uint8(rng.IntN(3)), FormSupport: uint8(rng.IntN(3)),
		}
		if tc.Source == "not_measurable" {
			tc.Reason = reasons[rng.IntN(len(reasons))]
		}
		if rng.IntN(3) > 0 {
			d := []float64{0, 3.5, 5, 5.0001, 99.9, 1234.5678, 7e4, 3.6e6}[rng.IntN(8)]
			tc.DurationMs = &d
		}
		for range rng.IntN(3) {
			tc.CountedIgnoredKeys = append(tc.CountedIgnoredKeys, keys[rng.IntN(len(keys))])
		}
		if rng.IntN(3) == 0 {
			tc.GateReason = []string{"eligible", "session_too_young", "url_unsupported"}[rng.IntN(3)]
		}
		log[i] = event{call: tc}
	}
	return log
}

// expected computes every view's rows from the stored events directly, the way the views
// define them: one line per row, sorted.
func expected(logs map[rollup.Stream][]event, upTo map[rollup.Stream]int) (stats, keys, gates, names []string) {
	type statCell struct {
		hour                          time.Time
		tool, client, server, version string
	}
	st := map[statCell][]uint64{}
	kc := map[string]uint64{}
	gc := map[string]uint64{}
	nc := map[string]uint64{}
	for s, log := range logs {
		for _, e := range log[:upTo[s]] {
			tc := e.call
			if tc == nil {
				continue
			}
			h := tc.Timestamp.Truncate(time.Hour)
			nc[fmt.Sprintf("%s|$mcp_tool_call", h.Format(time.DateTime))]++
			c := statCell{h, tc.Tool, tc.Client, tc.Server, tc.ServerVersion}
			v := st[c]
			if v == nil {
				v = make([]uint64, 15+len(rollup.DurationBucketBoundsMs))
				st[c] = v
			}
			v[0]++
			measurable := !tc.IsError && tc.Source != "not_measurable"
			if tc.IsError {
				v[1]++
			} else {
				v[2]++
				switch tc.Source {
				case "reported":
					v[5]++
				case "response":
					v[6]++
				case "schema":
					v[7]++
				case "not_measurable":
					switch tc.Reason {
					case "no_schema":
						v[8]++
					case "arguments_truncated", "arguments_redacted", "schema_truncated":
						v[9]++
					default:
						v[10]++
					}
				}
			}
			if measurable {
				v[3]++
				if len(tc.CountedIgnoredKeys) > 0 {
					v[4]++
				}
				seen := map[string]bool{}
				for _, k := range tc.CountedIgnoredKeys {
					if !seen[k] {
						seen[k] = true
						kc[fmt.Sprintf("%s|%s|%s|%s|%s", h.Format(time.DateTime), tc.Tool, tc.Server, tc.ServerVersion, k)]++
					}
				}
			}
			if strings.HasPrefix(string(tc.ErrorClass), "validation_") {
				v[11]++
			}
			if tc.UnknownTool || tc.ErrorClass == "unknown_tool" {
				v[12]++
			}
			if tc.DurationMs != nil {
				d := *tc.DurationMs
				v[13]++
				v[14] += uint64(math.Min(d, 1e12) * 1000)
				for i, b := range rollup.DurationBucketBoundsMs {
					if d <= b {
						v[15+i]++
						break
					}
				}
			}
			if tc.GateReason != "" {
				gc[fmt.Sprintf("%s|%s|%s|%s|%d|%d", h.Format(time.DateTime), tc.CampaignID, tc.GateReason, tc.Client, tc.URLSupport, tc.FormSupport)]++
			}
		}
	}
	for c, v := range st {
		stats = append(stats, fmt.Sprintf("%s|%s|%s|%s|%s|%v", c.hour.Format(time.DateTime), c.tool, c.client, c.server, c.version, v))
	}
	for k, n := range kc {
		keys = append(keys, fmt.Sprintf("%s|%d", k, n))
	}
	for k, n := range gc {
		gates = append(gates, fmt.Sprintf("%s|%d", k, n))
	}
	for k, n := range nc {
		names = append(names, fmt.Sprintf("%s|%d", k, n))
	}
	for _, l := range [][]string{stats, keys, gates, names} {
		slices.Sort(l)
	}
	return
}

// observed reads the views, in expected's formats.
func observed(t *testing.T, ch driver.Conn) (stats, keys, gates, names []string) {
	t.Helper()
	ctx := context.Background()
	rows, err := ch.Query(ctx, `SELECT hour, tool_name, client_name, server_name, server_version, calls, errors, successful_calls,
measurable_calls, calls_with_ignored_keys, keys_reported, keys_from_response, keys_from_schema, not_measurable_no_schema,
not_measurable_truncated, not_measurable_other, validation_errors, unknown_tool_calls, duration_count, duration_sum_ms,
duration_buckets FROM mcpulse.v_tool_call_stats_hourly`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var (
			h                             time.Time
			tool, client, server, version string
			v                             = make([]uint64, 14)
			sumMs                         float64
			buckets                       []uint64
		)
		dest := []any{&h, &tool, &client, &server, &version}
		for i := range v[:13] {
			dest = append(dest, &v[i])
		}
		dest = append(dest, &v[13], &sumMs, &buckets)
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		all := append(append(v, uint64(math.Round(sumMs*1000))), buckets...)
		stats = append(stats, fmt.Sprintf("%s|%s|%s|%s|%s|%v", h.UTC().Format(time.DateTime), tool, client, server, version, all))
	}
	rows.Close()
	scanLines := func(q string, n int) []string {
		rows, err := ch.Query(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var h time.Time
			strs := make([]string, n)
			var count uint64
			dest := []any{&h}
			for i := range strs {
				dest = append(dest, &strs[i])
			}
			dest = append(dest, &count)
			if err := rows.Scan(dest...); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s|%s|%d", h.UTC().Format(time.DateTime), strings.Join(strs, "|"), count))
		}
		return out
	}
	keys = scanLines("SELECT hour, tool_name, server_name, server_version, key_path, occurrences FROM mcpulse.v_ignored_key_paths_hourly", 4)
	gates = scanLines(`SELECT hour, campaign_id, reason, client_name, toString(ifNull(url_supported, 2)), toString(ifNull(form_supported, 2)), calls
FROM mcpulse.v_gate_reasons_hourly`, 5)
	names = scanLines("SELECT hour, event, events FROM mcpulse.v_events_by_name_hourly", 1)
	for _, l := range [][]string{stats, keys, gates, names} {
		slices.Sort(l)
	}
	return
}

// feed adds log[from:to] of stream s to batch b with Adder a.
func feed(b *rollup.Batch, a *rollup.Adder, s rollup.Stream, log []event, from, to int) {
	for o := from; o < to; o++ {
		b.Advance(s, int64(o))
		if tc := log[o].call; tc != nil {
			a.AddToolCall(b, s, tc)
			a.AddEvent(b, s, "$mcp_tool_call", tc.Timestamp)
		}
	}
}

func compare(t *testing.T, ch driver.Conn, logs map[rollup.Stream][]event, upTo map[rollup.Stream]int, when string) {
	t.Helper()
	es, ek, eg, en := expected(logs, upTo)
	os, ok, og, on := observed(t, ch)
	for _, c := range []struct {
		name       string
		want, have []string
	}{{"tool_call_stats", es, os}, {"ignored_key_paths", ek, ok}, {"gate_reason_calls", eg, og}, {"events_by_name", en, on}} {
		if !slices.Equal(c.want, c.have) {
			t.Errorf("%s: %s differs from the events:\n want %d rows %q\n have %d rows %q", when, c.name, len(c.want), head(c.want), len(c.have), head(c.have))
		}
	}
}

func head(l []string) []string {
	if len(l) > 6 {
		return l[:6]
	}
	return l
}

// TestRollupsEqualTheirEvents writes batches of two partitions, with a cache small enough to
// evict and reload, and checks after each batch that every view equals what the stored events
// say.
func TestRollupsEqualTheirEvents(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(1, 2))
	streams := []rollup.Stream{{"mcp_tool_calls", 0}, {"mcp_tool_calls", 1}}
	logs := map[rollup.Stream][]event{streams[0]: genLog(rng, 3000), streams[1]: genLog(rng, 2000)}
	for _, budget := range []int{1 << 20, 10} {
		t.Run(fmt.Sprintf("budget %d", budget), func(t *testing.T) {
			truncate(t, env.ClickHouse)
			store := rollup.NewStore(env.ClickHouse, rollup.Tables(), budget, nil)
			if err := store.Begin(ctx, map[rollup.Stream]int64{streams[0]: 0, streams[1]: 0}); err != nil {
				t.Fatal(err)
			}
			upTo := map[rollup.Stream]int{}
			var a rollup.Adder
			for batch := 0; ; batch++ {
				b := store.NewBatch()
				done := true
				for _, s := range streams {
					from := upTo[s]
					to := min(from+1+rng.IntN(700), len(logs[s]))
					if from < to {
						done = false
					}
					feed(b, &a, s, logs[s], from, to)
					upTo[s] = to
				}
				if done {
					break
				}
				w, err := store.Prepare(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Insert(ctx); err != nil {
					t.Fatal(err)
				}
				if batch%3 == 0 {
					compare(t, env.ClickHouse, logs, upTo, fmt.Sprintf("after batch %d", batch))
				}
			}
			compare(t, env.ClickHouse, logs, upTo, "at the end")
			if budget == 10 && store.CachedCells() > 2000 {
				t.Errorf("cache holds %d cells with a budget of 10", store.CachedCells())
			}
		})
	}
}

// TestReplayAfterAPartialInsert stores a batch's rollups partly (markers and some tables, or
// all of them) without committing it, then lets a new generation replay the offsets with other
// batch boundaries and, for some events, another derivation (the ignored keys a served schema
// yields may differ on a replay): the views equal the replayed events, counted once.
func TestReplayAfterAPartialInsert(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	s := rollup.Stream{Topic: "mcp_tool_calls", Partition: 3}
	for _, partial := range []string{"markers only", "half the tables", "all tables"} {
		t.Run(partial, func(t *testing.T) {
			truncate(t, env.ClickHouse)
			rng := rand.New(rand.NewPCG(3, uint64(len(partial))))
			log := genLog(rng, 1200)
			var a rollup.Adder
			store := rollup.NewStore(env.ClickHouse, rollup.Tables(), 1<<20, nil)
			if err := store.Begin(ctx, map[rollup.Stream]int64{s: 0}); err != nil {
				t.Fatal(err)
			}
			// Committed: [0, 500).
			b := store.NewBatch()
			feed(b, &a, s, log, 0, 500)
			w, err := store.Prepare(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.Insert(ctx); err != nil {
				t.Fatal(err)
			}
			// Stored in part, never committed: [500, 900).
			b = store.NewBatch()
			feed(b, &a, s, log, 500, 900)
			w, err = store.Prepare(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			if err := rollup.InsertPartly(ctx, w, partial); err != nil {
				t.Fatal(err)
			}
			// The replay derives some calls differently from the first attempt.
			replayed := slices.Clone(log)
			for o := 500; o < 900; o++ {
				if tc := replayed[o].call; tc != nil && o%7 == 0 {
					c := *tc
					c.CountedIgnoredKeys = []string{"derived.differently"}
					c.Tool = "renamed-by-replay"
					replayed[o] = event{call: &c}
				}
			}
			// A new generation (this member or another) replays from the committed offset 500,
			// in batches of other sizes.
			store2 := rollup.NewStore(env.ClickHouse, rollup.Tables(), 1<<20, nil)
			if err := store2.Begin(ctx, map[rollup.Stream]int64{s: 500}); err != nil {
				t.Fatal(err)
			}
			if store2.Epoch() <= store.Epoch() {
				t.Fatalf("second generation's epoch %d is not above the first's %d", store2.Epoch(), store.Epoch())
			}
			// Right after Begin, before anything is replayed, the views show the committed
			// prefix exactly.
			compare(t, env.ClickHouse, map[rollup.Stream][]event{s: log}, map[rollup.Stream]int{s: 500}, "after recovery")
			for from := 500; from < len(replayed); from += 130 {
				b := store2.NewBatch()
				to := min(from+130, len(replayed))
				feed(b, &a, s, replayed, from, to)
				w, err := store2.Prepare(ctx, b)
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Insert(ctx); err != nil {
					t.Fatal(err)
				}
			}
			compare(t, env.ClickHouse, map[rollup.Stream][]event{s: replayed}, map[rollup.Stream]int{s: len(replayed)}, "after the replay")
		})
	}
}

// TestALateRowOfAnOlderGenerationIsNotABase: a member that lost the partition writes a row
// after the new owner recovered it (its insert was in flight); the new owner, loading that cell,
// continues from the committed total the row carries as `before`, not from the row's total.
func TestALateRowOfAnOlderGenerationIsNotABase(t *testing.T) {
	sc := newTakeover(t)
	if err := sc.late.Insert(sc.ctx); err != nil {
		t.Fatal(err)
	}
	sc.write(t, sc.owner, 2, 4).insert(t)
	compare(t, sc.ch, map[rollup.Stream][]event{sc.s: sc.log}, map[rollup.Stream]int{sc.s: 4}, "after the late row")
}

// takeover is a partition's log of four tool calls whose first owner wrote offsets [0, 2),
// committed them, and prepared [2, 3) (late) but had not inserted it when a new owner began at
// committed offset 2.
type takeover struct {
	ctx   context.Context
	ch    driver.Conn
	s     rollup.Stream
	log   []event
	a     rollup.Adder
	owner *rollup.Store
	late  *rollup.Write
}

func newTakeover(t *testing.T) *takeover {
	sc := newPartition(t)
	old := sc.begin(t, 0)
	sc.write(t, old, 0, 2).insert(t)
	sc.late = sc.write(t, old, 2, 3).w
	sc.owner = sc.begin(t, 2)
	return sc
}

// newPartition is a partition's log of four tool calls of one hour, on empty rollups.
func newPartition(t *testing.T) *takeover {
	env := testenv.New(t, testenv.Options{})
	truncate(t, env.ClickHouse)
	tc := &rollup.ToolCall{Timestamp: t0, Tool: "a", Source: "reported"}
	sc := &takeover{ctx: context.Background(), ch: env.ClickHouse, s: rollup.Stream{Topic: "mcp_tool_calls", Partition: 0},
		log: []event{{tc}, {tc}, {tc}, {tc}}}
	return sc
}

// begin starts a store's generation at committed offset c.
func (sc *takeover) begin(t *testing.T, c int64) *rollup.Store {
	t.Helper()
	st := rollup.NewStore(sc.ch, rollup.Tables(), 1<<20, nil)
	if err := st.Begin(sc.ctx, map[rollup.Stream]int64{sc.s: c}); err != nil {
		t.Fatal(err)
	}
	return st
}

// prepared is a Write with the context and batch to insert it again.
type prepared struct {
	sc *takeover
	w  *rollup.Write
}

// write prepares offsets [from, to) of the log in st.
func (sc *takeover) write(t *testing.T, st *rollup.Store, from, to int) prepared {
	t.Helper()
	b := st.NewBatch()
	feed(b, &sc.a, sc.s, sc.log, from, to)
	w, err := st.Prepare(sc.ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	return prepared{sc, w}
}

func (p prepared) insert(t *testing.T) {
	t.Helper()
	if err := p.w.Insert(p.sc.ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTheTotalsReplacedLiveInTheMarkerNotTheRows: after batches of two partitions, no rollup
// row carries the totals it replaced, and once merged the markers are one row per partition
// (of the one generation): each with its newest batch's cells and, for each, the totals that
// batch replaced, which are the totals of the batch before.
func TestTheTotalsReplacedLiveInTheMarkerNotTheRows(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	truncate(t, env.ClickHouse)
	rng := rand.New(rand.NewPCG(3, 4))
	streams := []rollup.Stream{{"mcp_tool_calls", 0}, {"mcp_tool_calls", 1}}
	logs := map[rollup.Stream][]event{streams[0]: genLog(rng, 1500), streams[1]: genLog(rng, 1500)}
	store := rollup.NewStore(env.ClickHouse, rollup.Tables(), 1<<20, nil)
	if err := store.Begin(ctx, map[rollup.Stream]int64{streams[0]: 0, streams[1]: 0}); err != nil {
		t.Fatal(err)
	}
	var a rollup.Adder
	for from := 0; from < 1500; from += 500 {
		b := store.NewBatch()
		for _, s := range streams {
			feed(b, &a, s, logs[s], from, from+500)
		}
		w, err := store.Prepare(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(ctx); err != nil {
			t.Fatal(err)
		}
	}
	compare(t, env.ClickHouse, logs, map[rollup.Stream]int{streams[0]: 1500, streams[1]: 1500}, "after three batches")
	for _, tbl := range rollup.Tables() {
		var rows, carrying uint64
		if err := env.ClickHouse.QueryRow(ctx, "SELECT count(), countIf(notEmpty(before) OR before_as_of != 0 OR as_of != 0) FROM "+tbl.Name).Scan(&rows, &carrying); err != nil {
			t.Fatal(err)
		}
		if rows == 0 || carrying != 0 {
			t.Errorf("%s: %d of %d rows carry before totals or an as_of beside their version", tbl.Name, carrying, rows)
		}
	}
	if err := env.ClickHouse.Exec(ctx, "OPTIMIZE TABLE mcpulse.rollup_batches FINAL"); err != nil {
		t.Fatal(err)
	}
	rows, err := env.ClickHouse.Query(ctx, `SELECT kafka_partition, as_of, cell_tables, cell_keys, befores, before_as_ofs
FROM mcpulse.rollup_batches ORDER BY kafka_partition`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var (
			partition    int32
			asOf         int64
			tables, keys []string
			befores      [][]uint64
			asOfs        []int64
		)
		if err := rows.Scan(&partition, &asOf, &tables, &keys, &befores, &asOfs); err != nil {
			t.Fatal(err)
		}
		n++
		if asOf != 1500 || len(keys) == 0 || len(tables) != len(keys) || len(befores) != len(keys) || len(asOfs) != len(keys) {
			t.Fatalf("partition %d: marker as of %d with %d tables, %d keys, %d befores, %d offsets", partition, asOf, len(tables), len(keys), len(befores), len(asOfs))
		}
		// The events_by_name cell of each hour: the marker's before is the hour's count in the
		// partition's first 1,000 events, as of offset 1,000 (or nothing, before then).
		want := map[time.Time]uint64{}
		for _, e := range logs[streams[partition]][:1000] {
			if e.call != nil {
				want[e.call.Timestamp.Truncate(time.Hour)]++
			}
		}
		checked := 0
		for i, tbl := range tables {
			if tbl != rollup.EventsByName.Name {
				continue
			}
			hour := time.Unix(int64(binary.BigEndian.Uint64([]byte(keys[i][:8]))), 0).UTC()
			wantBefore, wantAsOf := []uint64{want[hour]}, int64(1000)
			if want[hour] == 0 {
				wantBefore, wantAsOf = []uint64{}, 0 // written first by the batch: no totals
			}
			if !slices.Equal(befores[i], wantBefore) || asOfs[i] != wantAsOf {
				t.Errorf("partition %d, hour %s: marker's before %v as of %d, want %v as of %d", partition, hour, befores[i], asOfs[i], wantBefore, wantAsOf)
			}
			checked++
		}
		if checked == 0 {
			t.Errorf("partition %d: the marker lists no events_by_name cell", partition)
		}
		// A cell the newest batch wrote first replaced nothing: its marker entry is empty
		// (read back as zeros), not a row of zeros.
		first := 0
		for i, tbl := range tables {
			if tbl == rollup.EventsByName.Name {
				continue
			}
			if asOfs[i] == 0 {
				first++
				if len(befores[i]) != 0 {
					t.Errorf("partition %d: %s cell %q, written first by the batch, is marked with the totals %v, want none", partition, tbl, keys[i], befores[i])
				}
			} else if len(befores[i]) == 0 {
				t.Errorf("partition %d: %s cell %q replaced totals as of %d, but its marker holds none", partition, tbl, keys[i], asOfs[i])
			}
		}
		if first == 0 {
			t.Errorf("partition %d: no cell of the marker was written first by its batch; the test checks nothing of those", partition)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(streams) {
		t.Errorf("rollup_batches holds %d rows after merges, want one per partition (%d)", n, len(streams))
	}
}

// TestMarkersOfOldGenerationsAreDropped: a member that begins more than one block of 1,024
// epochs after a marker's generation drops that marker's block, and keeps the recent ones.
func TestMarkersOfOldGenerationsAreDropped(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	truncate(t, env.ClickHouse)
	s := rollup.Stream{Topic: "mcp_tool_calls", Partition: 0}
	log := genLog(rand.New(rand.NewPCG(5, 6)), 400)
	var a rollup.Adder
	write := func(epoch uint64, from, to int) {
		t.Helper()
		nextEpoch(t, env.ClickHouse, epoch)
		store := rollup.NewStore(env.ClickHouse, rollup.Tables(), 1<<20, nil)
		if err := store.Begin(ctx, map[rollup.Stream]int64{s: int64(from)}); err != nil {
			t.Fatal(err)
		}
		if store.Epoch() != epoch {
			t.Fatalf("took epoch %d, want %d", store.Epoch(), epoch)
		}
		b := store.NewBatch()
		feed(b, &a, s, log, from, to)
		w, err := store.Prepare(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(ctx); err != nil {
			t.Fatal(err)
		}
	}
	epochs := func() []uint64 {
		t.Helper()
		rows, err := env.ClickHouse.Query(ctx, "SELECT DISTINCT epoch FROM mcpulse.rollup_batches ORDER BY epoch")
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []uint64
		for rows.Next() {
			var e uint64
			if err := rows.Scan(&e); err != nil {
				t.Fatal(err)
			}
			out = append(out, e)
		}
		return out
	}
	write(5, 0, 100)
	write(1500, 100, 200)
	write(2047, 200, 300)
	if got := epochs(); !slices.Equal(got, []uint64{5, 1500, 2047}) {
		t.Fatalf("before a generation two blocks on: markers of epochs %v", got)
	}
	write(2048, 300, 400) // block 2: block 0 (epochs 0-1023) goes
	if got := epochs(); !slices.Equal(got, []uint64{1500, 2047, 2048}) {
		t.Errorf("after a generation in block 2: markers of epochs %v, want [1500 2047 2048]", got)
	}
	compare(t, env.ClickHouse, map[rollup.Stream][]event{s: log}, map[rollup.Stream]int{s: 400}, "after the drop")
}

// TestABatchMarkedBeforeTheMarkersCarriedCellsIsReset: data written before migration 0035
// (rows carrying their before totals, versions epoch<<32 | sequence, markers in rollup_writes,
// renamed rollup_writes_before_0035 by migration 0036) is still recovered: a new owner resets a cell a batch stored beyond the committed offset,
// and counts its replay once.
func TestABatchMarkedBeforeTheMarkersCarriedCellsIsReset(t *testing.T) {
	sc := newLegacy(t)
	// Two batches of two events as the consumer wrote them before migration 0035, the second
	// never committed: the $mcp_tool_call count of the hour, 2 as of offset 2, then 4 as of 4.
	sc.marker(t, 1, 2)
	sc.row(t, 1, 2, 2, 0, 0)
	sc.marker(t, 2, 4)
	sc.row(t, 2, 4, 4, 2, 2)
	sc.counted(t, "before the takeover", 4)
	owner := sc.begin(t, 2)
	sc.counted(t, "after the reset", 2)
	sc.write(t, owner, 2, 4).insert(t)
	sc.counted(t, "after the replay", 4)
}

// TestALateRowWrittenBeforeTheMarkersCarriedCellsIsNotABase: a previous owner of the release
// before migration 0035 (rows carrying their before totals, no batch marker) whose insert lands
// after the takeover: the new owner continues from the committed total the row carries.
func TestALateRowWrittenBeforeTheMarkersCarriedCellsIsNotABase(t *testing.T) {
	sc := newLegacy(t)
	sc.row(t, 1, 2, 2, 0, 0) // committed at offset 2
	owner := sc.begin(t, 2)
	sc.row(t, 2, 4, 4, 2, 2) // the previous owner's next batch, landing after the takeover
	sc.write(t, owner, 2, 4).insert(t)
	sc.counted(t, "after the replay", 4)
}

// TestTheReleaseBeforeMigration0035FailsOnItsTables: a consumer of the release before
// migration 0035 run after the upgrade (a rolling upgrade, a rollback) would write rows every
// current row supersedes, so migration 0036 renamed the two tables only it names: every
// statement with which it takes an epoch (first thing at each generation's Begin) and reads or
// writes its markers (the insert precedes each batch's rows) is refused, naming the table, so
// it retries without committing, having taken no epoch.
func TestTheReleaseBeforeMigration0035FailsOnItsTables(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	for _, r := range legacyStatements(context.Background(), env.ClickHouse) {
		t.Logf("%s: %v", r.what, r.err)
		if r.err == nil || !strings.Contains(r.err.Error(), "mcpulse."+r.table) {
			t.Errorf("the release before migration 0035: %s: %v, want an error naming mcpulse.%s", r.what, r.err, r.table)
		}
	}
}

// legacyResult is what one statement of the release before migration 0035 did: the table it
// names and its error.
type legacyResult struct {
	what, table string
	err         error
}

// legacyStatements runs the statements with which the release before migration 0035 took its
// epochs and read and wrote its markers, as they were then (sql/rollup/epoch_newest.sql,
// epoch_take.sql, writes.sql and its marker insert), in that order.
func legacyStatements(ctx context.Context, ch driver.Conn) []legacyResult {
	var newest uint64
	out := []legacyResult{
		{"Begin's newest epoch", "rollup_epochs", ch.QueryRow(ctx, "SELECT max(epoch) FROM mcpulse.rollup_epochs").Scan(&newest)},
		{"Begin's epoch taken", "rollup_epochs", ch.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs (name, epoch, taken_at) SELECT 'rollups', ?, now()", legacyEpoch)},
	}
	rows, err := ch.Query(ctx, `SELECT kafka_topic, kafka_partition, argMax(as_of, version) AS marker_as_of, argMax(hours, version) AS marker_hours
FROM mcpulse.rollup_writes
WHERE has(?, kafka_topic)
GROUP BY kafka_topic, kafka_partition`, []string{"mcp_tool_calls"})
	if err == nil {
		for rows.Next() {
		}
		err = rows.Err()
		rows.Close()
	}
	out = append(out, legacyResult{"Begin's read of the markers", "rollup_writes", err})
	batch, err := ch.PrepareBatch(ctx, "INSERT INTO mcpulse.rollup_writes (kafka_topic, kafka_partition, as_of, hours, version)")
	if err == nil {
		if err = batch.Append("mcp_tool_calls", int32(0), int64(4), []time.Time{t0}, uint64(legacyEpoch)<<32|1); err == nil {
			err = batch.Send()
		} else {
			_ = batch.Abort()
		}
	}
	return append(out, legacyResult{"a batch's marker insert", "rollup_writes", err})
}

// legacyEpoch is the epoch of the rows newLegacy's scenarios write as the release before
// migration 0035 did.
const legacyEpoch = 7

// newLegacy is a partition's log of four tool calls on empty rollups whose newest epoch is
// legacyEpoch; its row and marker methods write what that release's consumer wrote.
func newLegacy(t *testing.T) *takeover {
	sc := newPartition(t)
	if err := sc.ch.Exec(sc.ctx, "INSERT INTO mcpulse.rollup_epochs_taken (name, epoch, taken_at) SELECT 'rollups', ?, now()", legacyEpoch); err != nil {
		t.Fatal(err)
	}
	return sc
}

// row writes the hour's $mcp_tool_call count of batch seq as that release did: version
// epoch<<32 | seq, its as_of, and the totals it replaced.
func (sc *takeover) row(t *testing.T, seq uint64, events, asOf, before, beforeAsOf int) {
	t.Helper()
	if err := sc.ch.Exec(sc.ctx, `INSERT INTO mcpulse.events_by_name_hourly (kafka_topic, kafka_partition, hour, event, events,
as_of, before, before_as_of, version) SELECT 'mcp_tool_calls', 0, toDateTime(?, 'UTC'), '$mcp_tool_call', ?, ?, [toUInt64(?)], ?, ?`,
		t0.Unix(), events, asOf, before, beforeAsOf, uint64(legacyEpoch)<<32|seq); err != nil {
		t.Fatal(err)
	}
}

// marker writes batch seq's marker as that release did, in its table's name since migration
// 0036 (rollup_writes_before_0035).
func (sc *takeover) marker(t *testing.T, seq uint64, asOf int) {
	t.Helper()
	if err := sc.ch.Exec(sc.ctx, `INSERT INTO mcpulse.rollup_writes_before_0035 (kafka_topic, kafka_partition, as_of, hours, version)
SELECT 'mcp_tool_calls', 0, ?, [toDateTime(?, 'UTC')], ?`, asOf, t0.Unix(), uint64(legacyEpoch)<<32|seq); err != nil {
		t.Fatal(err)
	}
}

// counted checks the tool calls v_events_by_name_hourly counts.
func (sc *takeover) counted(t *testing.T, when string, want uint64) {
	t.Helper()
	var n uint64
	if err := sc.ch.QueryRow(sc.ctx, "SELECT sum(events) FROM mcpulse.v_events_by_name_hourly").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != want {
		t.Errorf("%s: %d tool calls counted, want %d", when, n, want)
	}
}

// TestDurationBucketBoundsAreTheViewsBounds: the Go list and the SQL view are one definition.
func TestDurationBucketBoundsAreTheViewsBounds(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	var bounds []float64
	if err := env.ClickHouse.QueryRow(context.Background(), "SELECT bounds FROM mcpulse.v_duration_bucket_bounds").Scan(&bounds); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(bounds, rollup.DurationBucketBoundsMs) {
		t.Errorf("v_duration_bucket_bounds = %v, rollup.DurationBucketBoundsMs = %v", bounds, rollup.DurationBucketBoundsMs)
	}
}

// nextEpoch makes epoch the one the next Begin takes: the epochs taken so far are forgotten
// and epoch − 1 is recorded as the newest.
func nextEpoch(t *testing.T, ch driver.Conn, epoch uint64) {
	t.Helper()
	ctx := context.Background()
	if err := ch.Exec(ctx, "TRUNCATE TABLE mcpulse.rollup_epochs_taken"); err != nil {
		t.Fatal(err)
	}
	if err := ch.Exec(ctx, "INSERT INTO mcpulse.rollup_epochs_taken (name, epoch, taken_at) SELECT 'rollups', ?, now()", epoch-1); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, ch driver.Conn) {
	t.Helper()
	for _, tbl := range []string{"tool_call_stats_hourly", "ignored_key_paths_hourly", "gate_reason_calls_hourly",
		"gate_reason_people_sealed", "events_by_name_hourly", "rollup_writes_before_0035", "rollup_batches"} {
		if err := ch.Exec(context.Background(), "TRUNCATE TABLE mcpulse."+tbl); err != nil {
			t.Fatal(err)
		}
	}
}

// TestALateRowSeenBeforeItsMarker: on a cluster (docs/scaling.md) the previous owner's batch
// reaches the new owner's replica table by table, so its late rows can be visible there before
// its marker in rollup_batches. The new owner must not take such a row's totals (which count
// the uncommitted batch) as the committed ones: rows written before migration 0035 carried the
// totals they replaced, so this interleaving counted once then.
func TestALateRowSeenBeforeItsMarker(t *testing.T) {
	sc := newTakeover(t)
	ctx, late, owner := sc.ctx, sc.late, sc.owner
	// The rows reach the owner's replica first, the marker a moment later.
	if err := rollup.InsertPartly(ctx, late, "rows only"); err != nil {
		t.Fatal(err)
	}
	b := owner.NewBatch()
	feed(b, &sc.a, sc.s, sc.log, 2, 4)
	w, err := owner.Prepare(ctx, b)
	if err != nil {
		// Waiting for the marker (the consumer retries Prepare) is fine.
		if err := rollup.InsertPartly(ctx, late, "markers only"); err != nil {
			t.Fatal(err)
		}
		if w, err = owner.Prepare(ctx, b); err != nil {
			t.Fatal(err)
		}
	} else if err := rollup.InsertPartly(ctx, late, "markers only"); err != nil {
		t.Fatal(err)
	}
	if err := w.Insert(ctx); err != nil {
		t.Fatal(err)
	}
	compare(t, sc.ch, map[rollup.Stream][]event{sc.s: sc.log}, map[rollup.Stream]int{sc.s: 4}, "after the late rows and their marker")
}

// refuseDrops is a ClickHouse connection whose user may not drop partitions (a consumer user
// granted SELECT and INSERT only).
type refuseDrops struct{ driver.Conn }

func (c refuseDrops) Exec(ctx context.Context, query string, args ...any) error {
	if strings.Contains(query, "DROP PARTITION") {
		return fmt.Errorf("code: 497, message: Not enough privileges (simulated)")
	}
	return c.Conn.Exec(ctx, query, args...)
}

// TestAFailedDropOfOldMarkersDoesNotStopTheRollups: dropping the marker blocks of old
// generations is housekeeping; when ClickHouse refuses it, Begin still succeeds and the batch
// is counted (a failing Begin stops every commit of the member, and each retry takes an epoch).
func TestAFailedDropOfOldMarkersDoesNotStopTheRollups(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	truncate(t, env.ClickHouse)
	s := rollup.Stream{Topic: "mcp_tool_calls", Partition: 0}
	log := genLog(rand.New(rand.NewPCG(7, 8)), 200)
	var a rollup.Adder
	for _, g := range []struct {
		epoch    uint64
		from, to int
	}{{5, 0, 100}, {2048, 100, 200}} {
		nextEpoch(t, env.ClickHouse, g.epoch)
		store := rollup.NewStore(refuseDrops{env.ClickHouse}, rollup.Tables(), 1<<20, nil)
		if err := store.Begin(ctx, map[rollup.Stream]int64{s: int64(g.from)}); err != nil {
			t.Fatalf("Begin of epoch %d: %v", g.epoch, err)
		}
		b := store.NewBatch()
		feed(b, &a, s, log, g.from, g.to)
		w, err := store.Prepare(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Insert(ctx); err != nil {
			t.Fatal(err)
		}
	}
	compare(t, env.ClickHouse, map[rollup.Stream][]event{s: log}, map[rollup.Stream]int{s: 200}, "after a refused drop")
}
