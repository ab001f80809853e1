package consumers

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// BenchmarkDeriveMisuse measures the misuse step per tool call (ns/op and cpu-ns/op are per
// call) on the recorded @posthog/mcp tool calls, with the server version's listing cached (the
// steady state): derivation from the result or from the arguments against the served schema.
func BenchmarkDeriveMisuse(b *testing.B) {
	read := func(name string) *ingest.Event {
		data, err := os.ReadFile(filepath.Join("..", "ingest", "gateway", "testdata", "sdk", name+".json"))
		if err != nil {
			b.Fatal(err)
		}
		ev, err := ingest.Parse(data)
		if err != nil {
			b.Fatal(err)
		}
		return ev
	}
	keys, _ := ingest.NewKeyFilter(ingest.DefaultClientInjectedKeys)
	c := &Consumer{cfg: Config{Now: time.Now}, keys: keys, listings: misuse.NewListings(misuse.ListingsConfig{})}
	for _, name := range []string{"tools_list_zod", "tools_list_json"} {
		c.listings.Observe(listingPage(read(name), misuse.NoPosition))
	}
	var events []*ingest.Event
	var positions []misuse.Position
	var rows ingest.Rows
	for _, name := range []string{"tool_call_ok", "tool_call_misnamed_top_level", "tool_call_nested_zod", "tool_call_ref_unions", "tool_call_open_objects", "tool_call_notice_ignored_keys"} {
		ev := read(name)
		events = append(events, ev)
		positions = append(positions, misuse.NoPosition)
		rows.Append(ev, ingest.RowContext{Keys: keys, Offset: -1})
	}
	var ru syscall.Rusage
	cpu := func() int64 {
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return ru.Utime.Nano() + ru.Stime.Nano()
	}
	b.ReportAllocs()
	start, n := cpu(), 0
	for b.Loop() {
		if err := c.deriveMisuse(context.Background(), events, positions, rows.ToolCalls); err != nil {
			b.Fatal(err)
		}
		n += len(rows.ToolCalls)
	}
	b.ReportMetric(float64(cpu()-start)/float64(n), "cpu-ns/call")
}
