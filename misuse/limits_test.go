package misuse_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/misuse"
)

// wideSchema is an object schema whose `properties` declares n keys k0..k(n-1).
func wideSchema(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":{"type":"string"}`, i)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// deepSchema is an object schema nesting property "a" depth times below its root: its JSON
// nests 2*depth+1 levels (each level a schema object and its `properties` object).
func deepSchema(depth int) []byte {
	return []byte(strings.Repeat(`{"type":"object","properties":{"a":`, depth) + `{"type":"string"}` + strings.Repeat(`}}`, depth))
}

// TestCheckSchemaLimits: each limit is found, named, with its value, and a text just at each
// limit passes.
func TestCheckSchemaLimits(t *testing.T) {
	lim := misuse.SchemaLimits{MaxBytes: 4096, MaxProperties: 10, MaxMembers: 30, MaxDepth: 9}
	allOf := func(widths ...int) []byte { // members: 1 + 3 per property + 2 per branch
		var parts [][]byte
		for _, w := range widths {
			parts = append(parts, wideSchema(w))
		}
		return []byte(`{"allOf":[` + string(bytes.Join(parts, []byte(","))) + `]}`)
	}
	for _, c := range []struct {
		name   string
		schema []byte
		want   *misuse.OverLimit
	}{
		{"at properties", wideSchema(10), nil},
		{"over properties", wideSchema(11), &misuse.OverLimit{Limit: misuse.LimitProperties, Max: 10, Seen: 11}},
		{"at members", allOf(5, 5, 1), nil}, // 1 + 12 + 12 + 5 members
		{"over members", allOf(5, 5, 2), &misuse.OverLimit{Limit: misuse.LimitMembers, Max: 30, Seen: 31}},
		{"at depth", deepSchema(4), nil}, // 9 levels
		{"over depth", deepSchema(5), &misuse.OverLimit{Limit: misuse.LimitDepth, Max: 9, Seen: 10}},
		{"over depth in arrays", []byte(`{"allOf":[[[[[[[[[]]]]]]]]]}`), &misuse.OverLimit{Limit: misuse.LimitDepth, Max: 9, Seen: 10}},
		{"at bytes", append(wideSchema(1), bytes.Repeat([]byte(" "), 4096-len(wideSchema(1)))...), nil},
		{"over bytes", append(wideSchema(1), bytes.Repeat([]byte(" "), 4097-len(wideSchema(1)))...), &misuse.OverLimit{Limit: misuse.LimitBytes, Max: 4096, Seen: 4097}},
		// String values and array items are not members: only names count.
		{"values not counted", []byte(`{"enum":["a","b","c","d","e","f","g","h","i","j","k","l"],"x":"y"}`), nil},
		{"not JSON", []byte(`{"properties":`), nil},
	} {
		got := misuse.CheckSchema(c.schema, lim)
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: CheckSchema = %+v, want %+v", c.name, got, c.want)
		}
	}
}

// TestCheckSchemaDefaults: zero limits take the documented defaults.
func TestCheckSchemaDefaults(t *testing.T) {
	if o := misuse.CheckSchema(wideSchema(misuse.DefaultSchemaMaxProperties), misuse.SchemaLimits{}); o != nil {
		t.Errorf("%d properties: %v", misuse.DefaultSchemaMaxProperties, o)
	}
	if o := misuse.CheckSchema(wideSchema(misuse.DefaultSchemaMaxProperties+1), misuse.SchemaLimits{}); o == nil || o.Limit != misuse.LimitProperties {
		t.Errorf("%d properties: %v, want over properties", misuse.DefaultSchemaMaxProperties+1, o)
	}
	if o := misuse.CheckSchema(deepSchema(misuse.DefaultSchemaMaxDepth), misuse.SchemaLimits{}); o == nil || o.Limit != misuse.LimitDepth {
		t.Errorf("depth %d: %v, want over depth", 2*misuse.DefaultSchemaMaxDepth+1, o)
	}
	big := append(wideSchema(1), bytes.Repeat([]byte(" "), misuse.DefaultSchemaMaxBytes)...)
	if o := misuse.CheckSchema(big, misuse.SchemaLimits{}); o == nil || o.Limit != misuse.LimitBytes {
		t.Errorf("%d bytes: %v, want over bytes", len(big), o)
	}
}

// TestListingsSchemaOverLimit: a listing whose schema has 100,000 properties (the worst
// listing: 2.7 MB as written here) is judged without compiling it: its calls are not measured
// with schema_over_limit, counted and logged once, naming the limit, however often it is
// called; a schema within the limits beside it still derives its undeclared keys. With the
// default limits its size decides; with MaxBytes raised, its properties.
func TestListingsSchemaOverLimit(t *testing.T) {
	for _, c := range []struct {
		lim     misuse.SchemaLimits
		limit   misuse.Limit
		logLine string
	}{
		{misuse.SchemaLimits{}, misuse.LimitBytes, "limit=bytes max=262144 seen=2688922"},
		{misuse.SchemaLimits{MaxBytes: 8 << 20}, misuse.LimitProperties, "limit=properties max=1000 seen=1001"},
	} {
		var logs bytes.Buffer
		l := misuse.NewListings(misuse.ListingsConfig{Schemas: c.lim, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		worst := misuse.ServedTool{Name: "worst", InputSchema: wideSchema(100_000)}
		l.Observe(page("s", 10, worst, tool("fine", "q")))

		for i := range 3 {
			v := l.Judge(call("s", 20+i), "worst")
			if v.Schema == nil || v.Unknown {
				t.Fatalf("%s: worst: verdict %+v, want its schema", c.limit, v)
			}
			if got := ignored(t, v, `{"k1":"x","extra":1}`); got.Source != misuse.SourceNotMeasurable || got.Reason != misuse.ReasonSchemaOverLimit {
				t.Fatalf("%s: worst: %+v, want not measurable (%s)", c.limit, got, misuse.ReasonSchemaOverLimit)
			}
		}
		if got := ignored(t, l.Judge(call("s", 30), "fine"), `{"q":"x","extra":1}`); got.Source != misuse.SourceSchema || len(got.Keys) != 1 || got.Keys[0] != "extra" {
			t.Errorf("%s: fine: %+v, want extra ignored by the schema", c.limit, got)
		}
		st := l.Stats()
		if st.OverLimit[c.limit] != 1 || len(st.OverLimit) != 1 || st.Compiles != 1 {
			t.Errorf("stats: over limit %v, compiles %d; want %s 1 and one compile (fine's)", st.OverLimit, st.Compiles, c.limit)
		}
		if n := strings.Count(logs.String(), "input schema over limit"); n != 1 || !strings.Contains(logs.String(), c.logLine) {
			t.Errorf("%d over-limit log lines, want 1 with %q:\n%s", n, c.logLine, logs.String())
		}
	}
	if string(misuse.ReasonSchemaOverLimit) != "schema_over_limit" {
		t.Errorf("reason %q: the rollup SQL counts it by this value", misuse.ReasonSchemaOverLimit)
	}
}

// TestListingsSchemaAtLimits: schemas just within each configured limit compile and derive as
// before; one past a limit does not.
func TestListingsSchemaAtLimits(t *testing.T) {
	lim := misuse.SchemaLimits{MaxProperties: 50, MaxDepth: 11, MaxBytes: 2000}
	l := misuse.NewListings(misuse.ListingsConfig{Schemas: lim})
	wide := misuse.ServedTool{Name: "wide", InputSchema: wideSchema(50)}
	deep := misuse.ServedTool{Name: "deep", InputSchema: deepSchema(5)} // 11 levels
	l.Observe(page("s", 10, wide, deep))
	if got := ignored(t, l.Judge(call("s", 11), "wide"), `{"k49":"x","extra":1}`); got.Source != misuse.SourceSchema || len(got.Keys) != 1 || got.Keys[0] != "extra" {
		t.Errorf("wide at limit: %+v, want extra ignored", got)
	}
	if got := ignored(t, l.Judge(call("s", 11), "deep"), `{"a":{"a":{"b":1}}}`); got.Source != misuse.SourceSchema || len(got.Keys) != 1 || got.Keys[0] != "a.a.b" {
		t.Errorf("deep at limit: %+v, want a.a.b ignored", got)
	}

	l.Observe(page("s", 20, misuse.ServedTool{Name: "wide", InputSchema: wideSchema(51)}, misuse.ServedTool{Name: "deep", InputSchema: deepSchema(6)}))
	for _, name := range []string{"wide", "deep"} {
		if got := ignored(t, l.Judge(call("s", 21), name), `{"extra":1}`); got.Reason != misuse.ReasonSchemaOverLimit {
			t.Errorf("%s past limit: %+v, want %s", name, got, misuse.ReasonSchemaOverLimit)
		}
	}
	st := l.Stats()
	if st.OverLimit[misuse.LimitProperties] != 1 || st.OverLimit[misuse.LimitDepth] != 1 {
		t.Errorf("over limit %v, want properties 1 and depth 1", st.OverLimit)
	}
}

// TestListingsToolsOverLimit: a listing past MaxToolsPerListing keeps its first tools by name
// and is not complete, so a tool it cut is never called unknown.
func TestListingsToolsOverLimit(t *testing.T) {
	l := misuse.NewListings(misuse.ListingsConfig{Schemas: misuse.SchemaLimits{MaxToolsPerListing: 2}})
	l.Observe(page("s", 10, tool("a", "q"), tool("b", "q"), tool("c", "q")))
	if v := l.Judge(call("s", 11), "b"); v.Schema == nil {
		t.Errorf("b (kept): %+v, want its schema", v)
	}
	if v := l.Judge(call("s", 11), "c"); v.Schema != nil || v.Unknown {
		t.Errorf("c (cut): %+v, want neither a schema nor unknown", v)
	}
	if v := l.Judge(call("s", 11), "zzz"); v.Unknown {
		t.Errorf("zzz: %+v, want not unknown (the listing was cut)", v)
	}
	if n := l.Stats().OverLimit[misuse.LimitTools]; n != 1 {
		t.Errorf("tools over limit %d, want 1", n)
	}
}

// spreadSchema is an object schema of objs properties, each an object schema declaring per
// properties whose schemas are empty: as many subschemas as members.
func spreadSchema(objs, per int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"properties":{`)
	for o := range objs {
		if o > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"o%d":{"properties":{`, o)
		for i := range per {
			if i > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `"k%d":{}`, i)
		}
		b.WriteString(`}}`)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// TestSchemaWithinLimitsCompiles: the worst schema within the default limits (the most
// subschemas the members limit allows) compiles, and one member more is refused.
func TestSchemaWithinLimitsCompiles(t *testing.T) {
	within := worstWithinDefaults(0)
	if o := misuse.CheckSchema(within, misuse.SchemaLimits{}); o != nil {
		t.Fatalf("within limits: %v", o)
	}
	if _, err := misuse.CompileSchemaContext(context.Background(), within, misuse.SchemaLimits{MaxCompileTime: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if o := misuse.CheckSchema(worstWithinDefaults(1), misuse.SchemaLimits{}); o == nil || o.Limit != misuse.LimitMembers || o.Seen != misuse.DefaultSchemaMaxMembers+1 {
		t.Errorf("over members: %v", o)
	}
}

// worstWithinDefaults is the schema of the most subschemas the default members limit allows
// (objects of 994 empty properties, 995 members each, under one `properties`: 1 + objects *
// 996 members), with more objects past it.
func worstWithinDefaults(more int) []byte {
	return spreadSchema((misuse.DefaultSchemaMaxMembers-1)/996+more, 994)
}

// BenchmarkWorstListing is the cost per schema of judging a call against the worst listing
// (one schema of 100,000 properties, 2.7 MB) and against a normal listing's schema: the check
// alone decides the worst (it is never compiled); a normal schema is checked and compiled.
// Each iteration uses a fresh listing state, so nothing is cached.
func BenchmarkWorstListing(b *testing.B) {
	// The limits raised so far that the 100,000-property schema is compiled (as
	// --schema-max-bytes, --schema-max-properties and --schema-max-members would).
	raised := misuse.SchemaLimits{MaxBytes: 8 << 20, MaxProperties: 200_000, MaxMembers: 400_000, MaxCompileTime: time.Minute}
	for _, c := range []struct {
		name   string
		schema []byte
		lim    misuse.SchemaLimits
	}{
		{"worst_100k_properties", wideSchema(100_000), misuse.SchemaLimits{}},
		{"worst_100k_properties_compiled_limits_raised", wideSchema(100_000), raised},
		{"normal_10_properties", wideSchema(10), misuse.SchemaLimits{}},
		{"one_object_at_limit", wideSchema(misuse.DefaultSchemaMaxProperties), misuse.SchemaLimits{}},
		{"worst_within_limits", worstWithinDefaults(0), misuse.SchemaLimits{}},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.schema)))
			start := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op") }()
			for b.Loop() {
				l := misuse.NewListings(misuse.ListingsConfig{Schemas: c.lim})
				l.Observe(page("s", 10, misuse.ServedTool{Name: "t", InputSchema: c.schema}))
				v := l.Judge(call("s", 11), "t")
				if v.Schema == nil {
					b.Fatal("no schema")
				}
				if got := misuse.FromArguments(v.Schema, []byte(`{"k1":"x"}`)); c.lim.MaxBytes > 0 && got.Source != misuse.SourceSchema {
					b.Fatalf("limits raised: %+v, want derived from the schema", got)
				}
			}
		})
	}
}

// cpuTime is the CPU time the process has used, in nanoseconds: on shared cores, wall time per
// operation says more about the neighbours than about the work.
func cpuTime() int64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// BenchmarkCompileProperties is CompileSchema alone on one object of n properties: the cost
// the properties limit bounds (linear in n; it was quadratic with jsonschema/v6's compiler,
// see BenchmarkOracleCompileProperties).
func BenchmarkCompileProperties(b *testing.B) {
	for _, n := range []int{100, misuse.DefaultSchemaMaxProperties, 2000, 10_000, 100_000} {
		schema := wideSchema(n)
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			start := cpuTime()
			defer func() { b.ReportMetric(float64(cpuTime()-start)/float64(b.N)/1e6, "cpu-ms/op") }()
			for b.Loop() {
				if _, err := misuse.CompileSchema(schema); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestSchemaLimitsValidate: a negative limit is refused by name; zero (the default) is not.
func TestSchemaLimitsValidate(t *testing.T) {
	if err := (misuse.SchemaLimits{}).Validate(); err != nil {
		t.Errorf("zero limits: %v", err)
	}
	err := misuse.SchemaLimits{MaxDepth: -1, MaxToolsPerListing: -2}.Validate()
	if err == nil || !strings.Contains(err.Error(), "MaxDepth must not be negative") || !strings.Contains(err.Error(), "MaxToolsPerListing") {
		t.Errorf("negative limits: %v", err)
	}
}

// TestCompileSchemaTimeBudget: a compilation past SchemaLimits.MaxCompileTime stops and the
// schema is over the `time` limit; in a listing that verdict is kept (counted and logged once,
// never compiled again) and its calls are not measured.
func TestCompileSchemaTimeBudget(t *testing.T) {
	lim := misuse.SchemaLimits{MaxProperties: 5000, MaxMembers: 20_000, MaxCompileTime: time.Nanosecond}
	s, err := misuse.CompileSchemaContext(context.Background(), wideSchema(3000), lim)
	var o *misuse.OverLimit
	if !errors.As(err, &o) || o.Limit != misuse.LimitTime || s == nil {
		t.Fatalf("CompileSchemaContext = %v, %v; want over the time limit", s, err)
	}
	if got := misuse.FromArguments(s, []byte(`{"extra":1}`)); got.Reason != misuse.ReasonSchemaOverLimit {
		t.Errorf("over time: %+v, want %s", got, misuse.ReasonSchemaOverLimit)
	}
	if s, err := misuse.CompileSchemaContext(context.Background(), wideSchema(3000), misuse.SchemaLimits{MaxProperties: 5000, MaxMembers: 20_000}); err != nil || s == nil {
		t.Fatalf("within the default budget: %v", err)
	}

	var logs bytes.Buffer
	l := misuse.NewListings(misuse.ListingsConfig{Schemas: lim, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	l.Observe(page("s", 10, misuse.ServedTool{Name: "slow", InputSchema: wideSchema(3000)}))
	for i := range 3 {
		if got := ignored(t, l.Judge(call("s", 20+i), "slow"), `{"extra":1}`); got.Reason != misuse.ReasonSchemaOverLimit {
			t.Fatalf("slow: %+v, want %s", got, misuse.ReasonSchemaOverLimit)
		}
	}
	if st := l.Stats(); st.OverLimit[misuse.LimitTime] != 1 || st.Compiles != 0 {
		t.Errorf("stats: over limit %v, compiles %d; want time 1, none compiled", st.OverLimit, st.Compiles)
	}
	if n := strings.Count(logs.String(), "limit=time"); n != 1 {
		t.Errorf("%d log lines naming the time limit, want 1:\n%s", n, logs.String())
	}
}

// TestCompileSchemaCancelled: a done context stops a compilation with its error, and is no
// verdict: the listing compiles the schema when asked again with a live context.
func TestCompileSchemaCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if s, err := misuse.CompileSchemaContext(ctx, wideSchema(10), misuse.SchemaLimits{}); s != nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v, %v; want no schema and context.Canceled", s, err)
	}
	l := misuse.NewListings(misuse.ListingsConfig{})
	l.Observe(page("s", 10, misuse.ServedTool{Name: "t", InputSchema: wideSchema(10)}))
	if _, err := l.JudgeContext(ctx, call("s", 11), "t"); !errors.Is(err, context.Canceled) {
		t.Fatalf("JudgeContext cancelled: %v, want context.Canceled", err)
	}
	if st := l.Stats(); len(st.OverLimit) != 0 || st.Compiles != 0 {
		t.Fatalf("a cancelled compile was recorded: %+v", st)
	}
	v, err := l.JudgeContext(context.Background(), call("s", 12), "t")
	if err != nil {
		t.Fatal(err)
	}
	if got := ignored(t, v, `{"k1":"x","extra":1}`); got.Source != misuse.SourceSchema || len(got.Keys) != 1 {
		t.Errorf("after the cancelled compile: %+v, want extra ignored", got)
	}
}
