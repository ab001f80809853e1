package schemacheck

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// This file reads the public tool-schema corpus (testdata/mcp-tool-schemas at the repository
// root) with a small test-only reader, checks every tool against the figures Node computed
// (testdata/jsvectors.json, "corpus"), logs the per-set figures and benchmarks Check.
//
// Layouts (the same mapping as make-vectors.js):
//
//	github-mcp-server/*.snap              one tool object each ({name, inputSchema, ...})
//	posthog/*.json                        a bare input schema named after the file
//	                                      (services/mcp tool-schemas snapshots), or a tool
//	                                      object (exec-tool.json)
//	sentry-mcp/toolDefinitions.json       an array of tool objects
//	kubernetes-mcp-server/toolsets-*.json arrays of tool objects (the toolsets overlap, and
//	                                      two files are identical; every entry is checked)
//	an object with "tools"                a tools/list result
//
// Skipped, and why: posthog-mcp-standalone/tool-definitions.json maps tool names to metadata
// without input schemas, and posthog-mcp-standalone/tool-inputs.json is a bundle of 45
// definitions keyed by schema name (DashboardCreateSchema, ...), with no record of which of
// the 44 tools uses which; posthog/INDEX.txt and MANIFEST.tsv are not JSON.

var benchCorpusDir = filepath.Join("..", "testdata", "mcp-tool-schemas")

// corpusSetNames maps the corpus directories to the set names used in figures.
var corpusSetNames = map[string]string{
	"github-mcp-server":     "GitHub",
	"posthog":               "PostHog",
	"sentry-mcp":            "Sentry",
	"kubernetes-mcp-server": "Kubernetes",
}

type corpusEntry struct {
	set   string // directory
	file  string // set/file
	index int    // position in the file
	tool  Tool
}

// readBenchCorpus reads every tool of the corpus and lists the files it skipped.
func readBenchCorpus(tb testing.TB) (entries []corpusEntry, skipped []string) {
	tb.Helper()
	sets, err := os.ReadDir(benchCorpusDir)
	if err != nil {
		tb.Fatalf("corpus: %v", err)
	}
	for _, d := range sets {
		if !d.IsDir() {
			skipped = append(skipped, d.Name()+" (not a tool file)")
			continue
		}
		if d.Name() == "posthog-mcp-standalone" {
			skipped = append(skipped, d.Name()+"/tool-definitions.json (metadata, no input schemas)",
				d.Name()+"/tool-inputs.json (definitions keyed by schema name; no tool mapping)")
			continue
		}
		files, err := os.ReadDir(filepath.Join(benchCorpusDir, d.Name()))
		if err != nil {
			tb.Fatalf("corpus: %v", err)
		}
		for _, f := range files {
			rel := d.Name() + "/" + f.Name()
			ext := filepath.Ext(f.Name())
			if ext != ".json" && ext != ".snap" {
				skipped = append(skipped, rel+" (not JSON)")
				continue
			}
			data, err := os.ReadFile(filepath.Join(benchCorpusDir, d.Name(), f.Name()))
			if err != nil {
				tb.Fatalf("corpus: %v", err)
			}
			tools, err := corpusFileTools(f.Name(), data)
			if err != nil {
				skipped = append(skipped, fmt.Sprintf("%s (%v)", rel, err))
				continue
			}
			for i, t := range tools {
				entries = append(entries, corpusEntry{set: d.Name(), file: rel, index: i, tool: t})
			}
		}
	}
	return entries, skipped
}

// corpusFileTools maps one corpus file to tools.
func corpusFileTools(name string, data []byte) ([]Tool, error) {
	type toolObject struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	fromList := func(list []toolObject) []Tool {
		out := make([]Tool, len(list))
		for i, t := range list {
			out[i] = Tool{Name: t.Name, InputSchema: t.InputSchema}
		}
		return out
	}
	var list []toolObject
	if json.Unmarshal(data, &list) == nil {
		return fromList(list), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(data, &obj); err != nil {
		return nil, fmt.Errorf("neither a JSON array nor an object: %v", err)
	}
	if raw, ok := obj["tools"]; ok {
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf(`"tools" is not an array of tools: %v`, err)
		}
		return fromList(list), nil
	}
	if _, ok := obj["inputSchema"]; ok {
		var t toolObject
		if err := json.Unmarshal(data, &t); err != nil {
			return nil, err
		}
		return []Tool{{Name: t.Name, InputSchema: t.InputSchema}}, nil
	}
	if strings.HasSuffix(name, ".snap") {
		return nil, fmt.Errorf("a .snap without inputSchema")
	}
	return []Tool{{Name: strings.TrimSuffix(name, filepath.Ext(name)), InputSchema: data}}, nil
}

func corpusAll(entries []corpusEntry) []Tool {
	out := make([]Tool, len(entries))
	for i, e := range entries {
		out[i] = e.tool
	}
	return out
}

// TestCorpusMatchesNode compares every corpus tool's size (as served and after injection)
// and coverage counts with the figures JavaScript computed independently.
func TestCorpusMatchesNode(t *testing.T) {
	entries, skipped := readBenchCorpus(t)
	want := map[string]jsVectorCorpus{}
	for _, c := range jsVectors(t).Corpus {
		want[fmt.Sprintf("%s#%d", c.File, c.Index)] = c
	}
	if len(entries) != len(want) {
		t.Errorf("read %d corpus tools, node read %d", len(entries), len(want))
	}
	t.Logf("skipped: %s", strings.Join(skipped, "; "))
	for _, e := range entries {
		key := fmt.Sprintf("%s#%d", e.file, e.index)
		w, ok := want[key]
		if !ok {
			t.Errorf("%s: not in jsvectors.json", key)
			continue
		}
		if w.Name != e.tool.Name {
			t.Errorf("%s: name %q, node %q", key, e.tool.Name, w.Name)
		}
		raw, err := SerializedSize(e.tool.InputSchema)
		if err != nil || raw != w.RawLength {
			t.Errorf("%s: SerializedSize = %d, %v; node %d", key, raw, err, w.RawLength)
		}
		r := Check([]Tool{e.tool}, Settings{})
		tr := r.PerTool[0]
		if tr.SchemaChars != w.InjectedLength || tr.Injected != w.Injected {
			t.Errorf("%s: injected size %d (injected %v); node %d (%v)", key, tr.SchemaChars, tr.Injected, w.InjectedLength, w.Injected)
		}
		if tr.Nested != w.Nested || tr.Described != w.Described || tr.FullNested != w.FullNested || tr.FullDescribed != w.FullDescribed {
			t.Errorf("%s: coverage %d/%d full %d/%d; node %d/%d full %d/%d", key,
				tr.Described, tr.Nested, tr.FullDescribed, tr.FullNested, w.Described, w.Nested, w.FullDescribed, w.FullNested)
		}
		off := Check([]Tool{e.tool}, Settings{InjectContext: new(bool)})
		if off.PerTool[0].SchemaChars != w.RawLength {
			t.Errorf("%s: size without injection %d, node %d", key, off.PerTool[0].SchemaChars, w.RawLength)
		}
	}
}

// corpusSetFigures are the figures reported per set.
type corpusSetFigures struct {
	tools, oversized, nested, described, fullNested, fullDescribed int
}

// corpusServer names the server a corpus entry belongs to: its set, except that each
// Kubernetes toolsets file is a server of its own (the files are alternative
// configurations of one server and repeat tools, which one server would report as
// duplicate names).
func corpusServer(e corpusEntry) string {
	if e.set == "kubernetes-mcp-server" {
		return e.file
	}
	return e.set
}

// TestCorpusFigures checks each corpus server and logs its figures, and the totals per set;
// the expected figures are sums of what Node computed per tool (jsvectors.json), not Check's
// own output.
func TestCorpusFigures(t *testing.T) {
	entries, _ := readBenchCorpus(t)
	byServer := map[string][]Tool{}
	setOf := map[string]string{}
	want := map[string]*corpusSetFigures{}
	node := map[string]jsVectorCorpus{}
	for _, c := range jsVectors(t).Corpus {
		node[fmt.Sprintf("%s#%d", c.File, c.Index)] = c
	}
	for _, e := range entries {
		srv := corpusServer(e)
		byServer[srv] = append(byServer[srv], e.tool)
		setOf[srv] = e.set
		c, ok := node[fmt.Sprintf("%s#%d", e.file, e.index)]
		if !ok {
			t.Fatalf("%s#%d not in jsvectors.json", e.file, e.index)
		}
		f := want[srv]
		if f == nil {
			f = &corpusSetFigures{}
			want[srv] = f
		}
		f.tools++
		if c.InjectedLength >= DefaultCharLimit {
			f.oversized++
		}
		f.nested += c.Nested
		f.described += c.Described
		f.fullNested += c.FullNested
		f.fullDescribed += c.FullDescribed
	}
	servers := make([]string, 0, len(byServer))
	for s := range byServer {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	perSet := map[string]*corpusSetFigures{}
	total := 0
	for _, srv := range servers {
		set := setOf[srv]
		r := Check(byServer[srv], Settings{ServerName: strings.ToLower(corpusSetNames[set])})
		got := corpusSetFigures{r.Tools, r.Oversized, r.NestedProperties, r.DescribedNestedProperties,
			r.FullNestedProperties, r.FullDescribedNestedProperties}
		if got != *want[srv] {
			t.Errorf("%s: got %+v, node %+v", srv, got, *want[srv])
		}
		if cov := coverageRatio(r.DescribedNestedProperties, r.NestedProperties); r.NestedDescriptionCoverage != cov {
			t.Errorf("%s: coverage %v, want %v", srv, r.NestedDescriptionCoverage, cov)
		}
		ps := perSet[set]
		if ps == nil {
			ps = &corpusSetFigures{}
			perSet[set] = ps
		}
		ps.tools += got.tools
		ps.oversized += got.oversized
		ps.nested += got.nested
		ps.described += got.described
		ps.fullNested += got.fullNested
		ps.fullDescribed += got.fullDescribed
		total += r.Tools
		problems := 0
		for _, tr := range r.PerTool {
			problems += len(tr.Problems)
		}
		t.Logf("%-55s tools %3d  oversized %d  nested %4d  described %4d  coverage %.4f  full %4d/%4d = %.4f  name failures %3d  problems %d  ok=%v",
			srv, r.Tools, r.Oversized, r.NestedProperties, r.DescribedNestedProperties,
			r.NestedDescriptionCoverage, r.FullDescribedNestedProperties, r.FullNestedProperties,
			r.FullNestedDescriptionCoverage, r.NameFailures, problems, r.OK())
		for _, v := range r.Violations {
			t.Logf("  violation: %s", v)
		}
		for _, tr := range r.PerTool {
			for _, p := range tr.Problems {
				t.Logf("  problem %s: %s", tr.Name, p)
			}
			if tr.Oversized {
				t.Logf("  oversized %s: %d", tr.Name, tr.SchemaChars)
			}
		}
	}
	sets := make([]string, 0, len(perSet))
	for s := range perSet {
		sets = append(sets, s)
	}
	sort.Strings(sets)
	for _, set := range sets {
		f := perSet[set]
		t.Logf("SET %-10s tools %3d  oversized %d  nested %4d  described %4d  coverage %.4f  full %d/%d = %.4f",
			corpusSetNames[set], f.tools, f.oversized, f.nested, f.described, coverageRatio(f.described, f.nested),
			f.fullDescribed, f.fullNested, coverageRatio(f.fullDescribed, f.fullNested))
	}
	if total != len(jsVectors(t).Corpus) {
		t.Errorf("checked %d tools, node %d", total, len(jsVectors(t).Corpus))
	}
}

// TestCorpusCheckIsFast: the whole corpus checks in well under 100 ms (the schema ratchet's acceptance criterion).
// The bound here is generous for slow CI machines and the race detector; the benchmark gives
// the real figure.
func TestCorpusCheckIsFast(t *testing.T) {
	entries, _ := readBenchCorpus(t)
	tools := corpusAll(entries)
	Check(tools, Settings{}) // warm up
	best := time.Hour
	for range 5 {
		start := time.Now()
		Check(tools, Settings{})
		best = min(best, time.Since(start))
	}
	t.Logf("checked %d tools in %v", len(tools), best)
	if best > 500*time.Millisecond {
		t.Errorf("checking the corpus took %v", best)
	}
}

// BenchmarkCheckCorpus checks every corpus tool as one server.
func BenchmarkCheckCorpus(b *testing.B) {
	entries, _ := readBenchCorpus(b)
	tools := corpusAll(entries)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		Check(tools, Settings{})
	}
	b.ReportMetric(float64(len(tools)), "tools/op")
}
