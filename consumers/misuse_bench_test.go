package consumers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/misuse"
)

// BenchmarkDeriveMisuse measures the misuse step per batch of the recorded @posthog/mcp tool
// calls (cpu-ns/call is per call), with the server version's listing cached (the steady
// state): derivation from the result or from the arguments against the served schema, without
// the derivation cache ("uncached": every call walked) and with it ("cached": the consumer's,
// whose shapes repeat after the first batch).
func BenchmarkDeriveMisuse(b *testing.B) {
	for _, cached := range []bool{false, true} {
		name := "uncached"
		if cached {
			name = "cached"
		}
		b.Run(name, func(b *testing.B) { benchmarkDeriveMisuse(b, cached) })
	}
}

func benchmarkDeriveMisuse(b *testing.B, cached bool) {
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
	if cached {
		c.derivations = misuse.NewDeriveCache(misuse.DefaultDeriveCacheEntries)
	}
	for _, name := range []string{"tools_list_zod", "tools_list_json"} {
		c.listings.Observe(listingPage(read(name), misuse.NoPosition))
	}
	// The listings' schemas are taken as judged: no ClickHouse to read stored verdicts from.
	_ = c.listings.UnjudgedSchemas()
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

// BenchmarkDeriveMisuseWorstSchema is the misuse step of a batch of the recorded tool calls
// (as BenchmarkDeriveMisuse) that also carries, in "with_worst_new_schema", a new listing of
// their server version with one more tool whose input schema is the worst within the default
// limits (the most subschemas the members limit allows; a new text, so compiled anew, each
// batch) and a call of that tool. ns/op is per batch; normal-calls/s is the rate of the
// recorded calls through the step, the schema's compilation included; the difference between
// the two sub-benchmarks is what the worst schema costs a batch.
func BenchmarkDeriveMisuseWorstSchema(b *testing.B) {
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
	// worst is the schema of objects of 994 empty properties under one `properties`, as many
	// as the members limit allows, made new by variant.
	worst := func(variant int) []byte {
		var s strings.Builder
		fmt.Fprintf(&s, `{"$comment":"%d","properties":{`, variant)
		for o := range (misuse.DefaultSchemaMaxMembers - 2) / 996 {
			if o > 0 {
				s.WriteByte(',')
			}
			fmt.Fprintf(&s, `"o%d":{"properties":{`, o)
			for i := range 994 {
				if i > 0 {
					s.WriteByte(',')
				}
				fmt.Fprintf(&s, `"k%d":{}`, i)
			}
			s.WriteString(`}}`)
		}
		s.WriteString(`}}`)
		return []byte(s.String())
	}
	if o := misuse.CheckSchema(worst(0), misuse.SchemaLimits{}); o != nil {
		b.Fatalf("worst schema over the default limits: %v", o)
	}
	for _, withWorst := range []bool{false, true} {
		name := "normal"
		if withWorst {
			name = "with_worst_new_schema"
		}
		b.Run(name, func(b *testing.B) {
			keys, _ := ingest.NewKeyFilter(ingest.DefaultClientInjectedKeys)
			c := &Consumer{cfg: Config{Now: time.Now}, keys: keys, listings: misuse.NewListings(misuse.ListingsConfig{})}
			listing := read("tools_list_json")
			c.listings.Observe(listingPage(read("tools_list_zod"), misuse.NoPosition))
			c.listings.Observe(listingPage(listing, misuse.NoPosition))
			var events []*ingest.Event
			var rows ingest.Rows
			for _, name := range []string{"tool_call_ok", "tool_call_misnamed_top_level", "tool_call_nested_zod", "tool_call_ref_unions", "tool_call_open_objects", "tool_call_notice_ignored_keys"} {
				ev := read(name)
				events = append(events, ev)
				rows.Append(ev, ingest.RowContext{Keys: keys, Offset: -1})
			}
			normal := len(rows.ToolCalls)
			if withWorst {
				// The new listing just before the calls, and a call of its worst tool.
				call := read("tool_call_ok")
				call.UUID = uuid.New()
				tc := *call.ToolCall
				tc.ToolName, tc.ServerName, tc.ServerVersion = "worst", listing.ToolsList.ServerName, listing.ToolsList.ServerVersion
				call.ToolCall = &tc
				events = append(events, call)
				rows.Append(call, ingest.RowContext{Keys: keys, Offset: -1})
				lst := *listing
				tl := *listing.ToolsList
				tl.SessionID = ""
				lst.ToolsList, lst.UUID, lst.Timestamp = &tl, uuid.New(), call.Timestamp.Add(-time.Millisecond)
				events = append(events, &lst)
			}
			positions := make([]misuse.Position, len(events))
			for i := range positions {
				positions[i] = misuse.NoPosition
			}
			variant := 0
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				if withWorst {
					// A later listing each batch (one at the same time and place as another is
					// the same page), and the call just after it.
					variant++
					call, lst := events[len(events)-2], events[len(events)-1]
					call.Timestamp = events[0].Timestamp.Add(time.Duration(variant) * time.Millisecond)
					lst.Timestamp = call.Timestamp.Add(-time.Microsecond)
					tl := lst.ToolsList
					tl.Tools = append(slices.Clip(listing.ToolsList.Tools), ingest.ServedTool{Name: "worst", InputSchema: worst(variant)})
					tl.ListedToolNames = append(slices.Clip(listing.ToolsList.ListedToolNames), "worst")
				}
				if err := c.deriveMisuse(context.Background(), events, positions, rows.ToolCalls); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(normal*b.N)/time.Since(start).Seconds(), "normal-calls/s")
			if withWorst {
				last := rows.ToolCalls[len(rows.ToolCalls)-1]
				if last.IgnoredKeysSource != string(misuse.SourceSchema) {
					b.Fatalf("the worst tool's call: source %q reason %q, want derived from its schema", last.IgnoredKeysSource, last.IgnoredKeysReason)
				}
				if st := c.listings.Stats(); st.Compiles < uint64(variant) {
					b.Fatalf("%d compiles for %d new schemas", st.Compiles, variant)
				}
			}
		})
	}
}
