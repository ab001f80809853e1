package ingest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/ingest"
)

// demoLines returns n lines of a demo corpus (tool calls and recruitment events as the demo
// publishes them, malformed and duplicate lines included).
func demoLines(b *testing.B, n int) [][]byte {
	b.Helper()
	var buf bytes.Buffer
	if _, err := gen.Generate(gen.Config{Events: n, Seed: 7, End: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)}, &buf); err != nil {
		b.Fatal(err)
	}
	return bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n"))
}

// sdkGenLines returns the lines of the demo's corpus of SDK shape (gen.ShapeSDK: tool calls
// with their $mcp_parameters and $mcp_response, $mcp_initialize and $mcp_tools_list events
// listing whole served schemas, $exception) whose event is name, every line when name is "".
func sdkGenLines(b *testing.B, name string) [][]byte {
	b.Helper()
	var buf bytes.Buffer
	if _, err := gen.Generate(gen.Config{Events: 2000, Seed: 7, Shape: gen.ShapeSDK, End: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)}, &buf); err != nil {
		b.Fatal(err)
	}
	var out [][]byte
	for _, l := range bytes.Split(bytes.TrimSuffix(buf.Bytes(), []byte("\n")), []byte("\n")) {
		if name == "" || bytes.Contains(l, []byte(`"event":"`+name+`"`)) {
			out = append(out, l)
		}
	}
	if len(out) == 0 {
		b.Fatalf("no %s event in the SDK-shaped corpus", name)
	}
	return out
}

// sdkEvents returns the SDK-shaped events of testdata/sdk whose names match glob.
func sdkEvents(tb testing.TB, glob string) [][]byte {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "sdk", glob))
	if err != nil || len(files) == 0 {
		tb.Fatalf("no SDK events match %s: %v", glob, err)
	}
	var out [][]byte
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, bytes.TrimSpace(data))
	}
	return out
}

// cpuTime is the CPU time the process has used (user and system, every thread: the
// garbage collector's work included), in nanoseconds. On a shared machine it is steadier than
// the wall-clock ns/op.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkParse measures Parse per event (ns/op and cpu-ns/op are per event) on the demo's events and on
// events shaped as @posthog/mcp sends them: the fixtures of testdata/sdk (about 1 KB of
// $mcp_parameters and $mcp_response in the tool call), and the demo's SDK-shaped corpus
// (sdk_gen_*: its tool calls, its $mcp_tools_list events of about 35 KB listing whole served
// schemas, and all its lines).
func BenchmarkParse(b *testing.B) {
	for _, c := range []struct {
		name  string
		lines func(*testing.B) [][]byte
	}{
		{"demo", func(b *testing.B) [][]byte { return demoLines(b, 5000) }},
		{"sdk_tool_call", func(b *testing.B) [][]byte { return sdkEvents(b, "tool_call.json") }},
		{"sdk_all", func(b *testing.B) [][]byte { return sdkEvents(b, "*.json") }},
		{"sdk_gen_tool_call", func(b *testing.B) [][]byte { return sdkGenLines(b, "$mcp_tool_call") }},
		{"sdk_gen_tools_list", func(b *testing.B) [][]byte { return sdkGenLines(b, "$mcp_tools_list") }},
		{"sdk_gen", func(b *testing.B) [][]byte { return sdkGenLines(b, "") }},
	} {
		b.Run(c.name, func(b *testing.B) {
			lines := c.lines(b)
			var size int
			for _, l := range lines {
				size += len(l)
			}
			b.SetBytes(int64(size / len(lines)))
			b.ReportAllocs()
			i := 0
			start := cpuTime()
			for b.Loop() {
				_, _ = ingest.Parse(lines[i])
				if i++; i == len(lines) {
					i = 0
				}
			}
			b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
		})
	}
}
