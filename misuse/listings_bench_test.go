package misuse_test

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/misuse"
)

// benchSchema is a realistic tool input schema (about 1 KB, as zod-to-json-schema serves one):
// a few typed properties with descriptions, a nested filter object and an enum. variant
// changes one enum value, so that each variant is a schema of its own.
func benchSchema(tool string, variant int) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false,"properties":{`)
	fmt.Fprintf(&b, `"query":{"type":"string","description":"What to look for in %s: free text, matched against titles and bodies."},`, tool)
	fmt.Fprintf(&b, `"limit":{"type":"integer","minimum":1,"maximum":100,"description":"At most this many results."},`)
	fmt.Fprintf(&b, `"cursor":{"type":"string","description":"The cursor a previous call returned, to read on."},`)
	fmt.Fprintf(&b, `"filter":{"type":"object","additionalProperties":false,"properties":{"since":{"type":"string","format":"date-time"},"until":{"type":"string","format":"date-time"},"owner":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}},`)
	fmt.Fprintf(&b, `"project":{"type":"string","enum":["default","staging","workspace-%d"],"description":"The project to search."}`, variant)
	fmt.Fprintf(&b, `},"required":["query"]}`)
	return []byte(b.String())
}

// benchListing returns the 20 tools of listing kind (0: basic, 1: beta, 2: admin; each adds
// tools) with, for variant > 0, one tool whose schema is the session's own.
func benchListing(kind, variant int) []misuse.ServedTool {
	n := 16 + 2*kind
	tools := make([]misuse.ServedTool, 0, n)
	for i := range n {
		name := fmt.Sprintf("tool_%02d", i)
		v := 0
		if i == 0 {
			v = variant
		}
		tools = append(tools, misuse.ServedTool{Name: name, InputSchema: benchSchema(name, v)})
	}
	return tools
}

// BenchmarkListings100kSessions builds the listing state of 100,000 live sessions, each served
// its own listing, and reports the heap it holds (heap-MiB, after a GC, less the heap before)
// against the consumer's 300 MiB budget. Run with -benchtime 1x (each iteration builds the
// whole state). Sessions are served one of three listings (16 to 20 tools of about 1 KB
// each); in "shared" 10% of them get a per-session variant (one tool's schema their own), in
// "distinct" every session does; a tenth list in two pages. Then every session calls the tool
// its variant changed, so that schema is compiled (the compiled cache keeps its bound).
func BenchmarkListings100kSessions(b *testing.B) {
	const sessions = 100_000
	for _, bc := range []struct {
		name        string
		variantEach int // every variantEach-th session gets its own variant
	}{{"shared", 10}, {"distinct", 1}} {
		b.Run(bc.name, func(b *testing.B) {
			shared := [3][]misuse.ServedTool{benchListing(0, 0), benchListing(1, 0), benchListing(2, 0)}
			var heap, est float64
			var st misuse.ListingStats
			for b.Loop() {
				runtime.GC()
				var before, after runtime.MemStats
				runtime.ReadMemStats(&before)
				l := misuse.NewListings(misuse.ListingsConfig{})
				start := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
				for s := range sessions {
					kind := s % 3
					tools := shared[kind]
					if s%bc.variantEach == 0 {
						tools = benchListing(kind, s+1)
					}
					names := make([]string, len(tools))
					for i, t := range tools {
						names[i] = t.Name
					}
					p := misuse.ListingPage{Server: "posthog", Version: "2.14.0", Session: fmt.Sprintf("019ac%011d-7e3a-7000-8000-%012d", s, s),
						At: start.Add(time.Duration(s) * time.Millisecond), Pos: misuse.Position{Partition: int32(s % 16), Offset: int64(s)},
						Names: names, Tools: tools}
					if s%10 == 5 { // two pages
						p1, p2 := p, p
						p1.Names, p1.Tools, p1.NextCursor = names[:8], tools[:8], "page-2"
						p2.Names, p2.Tools, p2.Cursor, p2.HasCursor = names[8:], tools[8:], "page-2", true
						p2.At, p2.Pos.Offset = p.At.Add(time.Microsecond), p.Pos.Offset+1
						l.Observe(p1)
						l.Observe(p2)
						continue
					}
					l.Observe(p)
				}
				// Each session calls its own variant's tool once: its schema is compiled
				// (and the compiled cache stays at its bound).
				for s := range sessions {
					c := misuse.CallAt{Server: "posthog", Version: "2.14.0", Session: fmt.Sprintf("019ac%011d-7e3a-7000-8000-%012d", s, s),
						At: start.Add(time.Hour), Pos: misuse.NoPosition}
					if v := l.Judge(c, "tool_00"); v.Schema == nil || v.From != misuse.ServedSession {
						b.Fatalf("session %d: %+v", s, v)
					}
				}
				runtime.GC()
				runtime.ReadMemStats(&after)
				heap = float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
				st = l.Stats()
				est = float64(l.Bytes()) / (1 << 20)
				runtime.KeepAlive(l)
			}
			if st.Sessions != sessions {
				b.Fatalf("%d sessions kept, want %d", st.Sessions, sessions)
			}
			b.ReportMetric(heap, "heap-MiB")
			b.ReportMetric(heap*(1<<20)/sessions, "heap-B/session")
			b.ReportMetric(est, "estimate-MiB") // Listings.Bytes, what the memory budget counts
			b.ReportMetric(float64(st.Listings), "listings")
			b.ReportMetric(float64(st.Schemas), "schemas")
			b.ReportMetric(float64(st.Compiled), "compiled")
		})
	}
}
