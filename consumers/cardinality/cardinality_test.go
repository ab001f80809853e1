package cardinality_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/consumers/cardinality"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

const topic = "mcp_tool_calls"

var hour = time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC)

func call(partition int32, offset int64, srv, tool, client string, at time.Time, keys ...string) ingest.ToolCallRow {
	return ingest.ToolCallRow{Timestamp: at, ServerName: srv, ToolName: tool, ClientName: client, KafkaPartition: partition,
		KafkaOffset: offset, CountedIgnoredKeys: keys, FoldedKeyPaths: []string{}}
}

func fold(t testing.TB, f *cardinality.Folder, rows []ingest.ToolCallRow) {
	t.Helper()
	if err := f.Fold(context.Background(), rows, func(int) string { return topic }); err != nil {
		t.Fatal(err)
	}
}

// Past a cap, values fold into their bucket; a call's several folded key paths become one
// bucket entry beside the admitted ones, in order. Each partition, server and hour is a window
// of its own. A batch folded twice (a retry) gives the same rows.
func TestFoldPastTheCaps(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	var folds []string
	f := cardinality.New(e.ClickHouse, cardinality.Limits{Tools: 2, Clients: 1, KeyPaths: 2}, nil,
		func(d cardinality.Dimension, n int) { folds = append(folds, fmt.Sprintf("%s=%d", d, n)) })
	rows := []ingest.ToolCallRow{
		call(0, 0, "s", "a", "c1", hour, "k1"),
		call(0, 1, "s", "b", "c1", hour.Add(time.Minute), "k2", "k3", "k1", "k4"),
		call(0, 2, "s", "c", "c2", hour.Add(2*time.Minute)),
		call(0, 3, "s", "a", "c2", hour.Add(3*time.Minute), "k3"),
		call(1, 0, "s", "c", "c2", hour.Add(4*time.Minute)),     // another partition
		call(0, 4, "s", "c", "c2", hour.Add(time.Hour)),         // another hour
		call(0, 5, "other", "c", "c2", hour.Add(5*time.Minute)), // another server
	}
	fold(t, f, rows)
	got := make([]string, len(rows))
	for i := range rows {
		r := &rows[i]
		got[i] = fmt.Sprintf("%s/%s %s/%s %v/%v", r.ToolName, r.FoldedToolName, r.ClientName, r.FoldedClientName, r.CountedIgnoredKeys, r.FoldedKeyPaths)
	}
	want := []string{
		"a/ c1/ [k1]/[]",
		"b/ c1/ [k2 k1 (other keys)]/[k3 k4]",
		"(other tools)/c (other clients)/c2 []/[]",
		"a/ (other clients)/c2 [(other keys)]/[k3]",
		"c/ c2/ []/[]",
		"c/ c2/ []/[]",
		"c/ c2/ []/[]",
	}
	if !slices.Equal(got, want) {
		t.Errorf("folded rows:\n%q\nwant\n%q", got, want)
	}
	if want := []string{"tool=1", "client=2", "key_path=3"}; !slices.Equal(folds, want) {
		t.Errorf("folds counted %v, want %v", folds, want)
	}
	again := slices.Clone(rows)
	fold(t, f, again)
	for i := range rows {
		if fmt.Sprint(again[i]) != fmt.Sprint(rows[i]) {
			t.Errorf("row %d folded again: %+v, was %+v", i, again[i], rows[i])
		}
	}
}

// Over its byte budget the Folder lets go only windows whose offsets are all committed, the
// least recently used first; Reset lets every window go.
func TestWindowsLetGoOnlyOnceCommitted(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	f := cardinality.New(e.ClickHouse, cardinality.Limits{Budget: 1}, nil, nil)
	fold(t, f, []ingest.ToolCallRow{call(0, 10, "s", "a", "c", hour), call(1, 10, "s", "a", "c", hour)})
	if n := f.Windows(); n != 2 {
		t.Fatalf("%d windows held before any commit, want 2 (over budget, none committed)", n)
	}
	f.Committed(topic, 0, 11)
	fold(t, f, []ingest.ToolCallRow{call(2, 10, "s", "a", "c", hour)})
	if n := f.Windows(); n != 2 {
		t.Fatalf("%d windows held after partition 0 was committed, want 2 (its window let go)", n)
	}
	f.Committed(topic, 1, 10) // offset 10 of partition 1 is not committed yet
	fold(t, f, nil)
	if n := f.Windows(); n != 2 {
		t.Fatalf("%d windows held, want 2: partition 1's window holds an offset not committed", n)
	}
	if f.Bytes() <= 0 {
		t.Fatalf("Bytes() = %d with windows held", f.Bytes())
	}
	f.Reset()
	if f.Windows() != 0 || f.Bytes() != 0 {
		t.Fatalf("after Reset: %d windows, %d bytes", f.Windows(), f.Bytes())
	}
}

// BenchmarkFold folds ordinary calls (20 tools, 5 clients, 2 ignored keys each, over 4
// partitions) in windows already held: the cost the caps add per stored tool call, with the
// partitions' calls interleaved one by one (the worst case: each call in another window than
// the one before) and in runs of 2,500 (as a fetch hands them over).
func BenchmarkFold(b *testing.B) {
	e := testenv.New(b, testenv.Options{})
	for _, order := range []struct {
		name      string
		partition func(i int) int32
	}{{"interleaved", func(i int) int32 { return int32(i % 4) }}, {"runs", func(i int) int32 { return int32(i / 2500) }}} {
		b.Run(order.name, func(b *testing.B) {
			f := cardinality.New(e.ClickHouse, cardinality.Limits{}, nil, nil)
			rows := make([]ingest.ToolCallRow, 10_000)
			for i := range rows {
				rows[i] = call(order.partition(i), int64(i), "srv", fmt.Sprintf("tool-%d", i%20), fmt.Sprintf("client-%d", i%5),
					hour.Add(time.Duration(i)*time.Millisecond), "filters.0.kind", fmt.Sprintf("k%d", i%7))
			}
			batch := slices.Clone(rows)
			fold(b, f, batch)
			b.ResetTimer()
			for b.Loop() {
				copy(batch, rows)
				if err := f.Fold(context.Background(), batch, func(int) string { return topic }); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(rows)), "ns/call")
		})
	}
}
