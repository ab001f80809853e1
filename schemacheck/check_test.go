package schemacheck

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// schemaOfSize returns an object schema whose serialized size after injection is n.
func schemaOfSize(t *testing.T, n int) json.RawMessage {
	t.Helper()
	mk := func(k int) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","description":"` + strings.Repeat("d", k) + `"}}}`)
	}
	base := Check([]Tool{{Name: "x", InputSchema: mk(0)}}, Settings{}).PerTool[0].SchemaChars
	s := mk(n - base)
	if got := Check([]Tool{{Name: "x", InputSchema: s}}, Settings{}).PerTool[0].SchemaChars; got != n {
		t.Fatalf("built %d, want %d", got, n)
	}
	return s
}

// anyContains reports whether some message contains sub.
func anyContains(ss []string, sub string) bool {
	for _, s := range ss {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

func TestDefaults(t *testing.T) {
	r := Check(nil, Settings{})
	if r.CharLimit != 16384 || r.MaxOversized != 44 || r.MinNestedCoverage != 0.55 {
		t.Fatalf("defaults: %+v", r)
	}
	r = Check(nil, Settings{CharLimit: -1, NameMaxLen: -1, MinNestedCoverage: new(math.NaN())})
	if r.CharLimit != 16384 || r.MinNestedCoverage != 0.55 {
		t.Fatalf("defaults for invalid values: %+v", r)
	}
	r = Check(nil, Settings{CharLimit: 100, MaxOversized: new(0), MinNestedCoverage: new(0.0)})
	if r.CharLimit != 100 || r.MaxOversized != 0 || r.MinNestedCoverage != 0 {
		t.Fatalf("explicit zero ratchets must hold: %+v", r)
	}
}

func TestOversizedRatchet(t *testing.T) {
	big := schemaOfSize(t, 2000)
	small := schemaOfSize(t, 1999)
	tools := []Tool{{Name: "a", InputSchema: big}, {Name: "b", InputSchema: big}, {Name: "c", InputSchema: small}}

	r := Check(tools, Settings{CharLimit: 2000, MaxOversized: new(1)})
	if r.Oversized != 2 || r.OK() || len(r.Violations) != 1 {
		t.Fatalf("2 oversized over a ratchet of 1: %+v", r)
	}
	v := r.Violations[0]
	for _, want := range []string{"2 tools reach the 2000-character client limit, above the ratchet of 1", "a (2000)", "raise max_oversized deliberately"} {
		if !strings.Contains(v, want) {
			t.Errorf("violation %q lacks %q", v, want)
		}
	}

	r = Check(tools, Settings{CharLimit: 2000, MaxOversized: new(2)})
	if !r.OK() || anyContains(r.Notes, "ratchet can be lowered") {
		t.Fatalf("at the ratchet: %+v", r)
	}

	r = Check(tools, Settings{CharLimit: 2000, MaxOversized: new(5)})
	if !r.OK() || !anyContains(r.Notes, "ratchet can be lowered to 2") {
		t.Fatalf("below the ratchet: %+v", r.Notes)
	}

	// Oversized is >= char_limit; without injection these schemas are 615+ smaller.
	r = Check(tools, Settings{CharLimit: 2000, MaxOversized: new(0), InjectContext: new(bool)})
	if r.Oversized != 0 || !r.OK() {
		t.Fatalf("without injection: %+v", r)
	}
}

func TestCoverageRatchet(t *testing.T) {
	half := json.RawMessage(`{"properties":{"o":{"properties":{"a":{"description":"a"},"b":{}}}}}`)
	r := Check([]Tool{{Name: "t", InputSchema: half}}, Settings{})
	if r.NestedDescriptionCoverage != 0.5 || r.OK() {
		t.Fatalf("50%% under 55%%: %+v", r)
	}
	if !anyContains(r.Violations, "nested description coverage is 50.0% (1 of 2 nested properties described), below the ratchet of 55.0%") ||
		!anyContains(r.Violations, "t (1 of 2 undescribed)") || !anyContains(r.Violations, "lower min_nested_coverage deliberately") {
		t.Fatalf("violation: %q", r.Violations)
	}
	r = Check([]Tool{{Name: "t", InputSchema: half}}, Settings{MinNestedCoverage: new(0.5)})
	if !r.OK() {
		t.Fatalf("at the ratchet: %q", r.Violations)
	}
	r = Check([]Tool{{Name: "t", InputSchema: half}}, Settings{MinNestedCoverage: new(0.3)})
	if !r.OK() || !anyContains(r.Notes, "min_nested_coverage can be raised to 0.50") {
		t.Fatalf("above the ratchet: %q", r.Notes)
	}
}

func TestOptionalRatchets(t *testing.T) {
	s := schemaOfSize(t, 1000)
	tools := []Tool{{Name: "a", InputSchema: s}, {Name: "b", InputSchema: schemaOfSize(t, 900)}}
	r := Check(tools, Settings{MaxTools: 1, MaxToolChars: 950})
	if r.OK() || len(r.Violations) != 2 {
		t.Fatalf("violations: %q", r.Violations)
	}
	if !anyContains(r.Violations, "the server lists 2 tools, above max_tools 1") ||
		!anyContains(r.Violations, "1 tool is over the per-tool limit of 950 characters (a (1000))") {
		t.Fatalf("violations: %q", r.Violations)
	}
	if r := Check(tools, Settings{MaxTools: 2, MaxToolChars: 1000}); !r.OK() {
		t.Fatalf("at the limits: %q", r.Violations)
	}
}

// TestReportJSON: the JSON field names the command and the scheduler rely on, and lists
// that are [] rather than null.
func TestReportJSON(t *testing.T) {
	r := Check([]Tool{{Name: "get_me", InputSchema: json.RawMessage(`{"type":"object"}`)}}, Settings{})
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tools", "char_limit", "oversized", "max_oversized", "nested_properties",
		"described_nested_properties", "nested_description_coverage", "min_nested_coverage",
		"full_nested_description_coverage", "name_failures", "violations", "notes", "per_tool"} {
		if _, ok := m[k]; !ok {
			t.Errorf("report JSON lacks %q", k)
		}
	}
	if v, ok := m["violations"].([]any); !ok || v == nil {
		t.Errorf("violations is %v, want []", m["violations"])
	}
	pt := m["per_tool"].([]any)[0].(map[string]any)
	for _, k := range []string{"name", "schema_chars", "oversized", "nested", "described", "full_nested",
		"full_described", "name_ok", "name_warnings", "problems"} {
		if _, ok := pt[k]; !ok {
			t.Errorf("per_tool JSON lacks %q", k)
		}
	}
	if _, ok := pt["problems"].([]any); !ok {
		t.Errorf("problems is %v, want []", pt["problems"])
	}
}

func TestDuplicateToolNames(t *testing.T) {
	s := json.RawMessage(`{"type":"object"}`)
	r := Check([]Tool{{Name: "a", InputSchema: s}, {Name: "b", InputSchema: s}, {Name: "a", InputSchema: s}}, Settings{})
	if len(r.PerTool[0].Problems) != 0 || !anyContains(r.PerTool[2].Problems, `duplicate tool name "a" (also tool #1)`) {
		t.Fatalf("%+v", r.PerTool)
	}
	if !anyContains(r.Notes, "1 tool has structural problems") || r.ToolsWithProblems != 1 {
		t.Fatalf("notes %q", r.Notes)
	}
}

// TestMessagesSayWhatToDo: every violation and note is a sentence with an instruction.
func TestMessagesSayWhatToDo(t *testing.T) {
	tools := []Tool{
		{Name: "Bad_Name", InputSchema: schemaOfSize(t, 20000)},
		{Name: "x", InputSchema: json.RawMessage(`{"properties":{"o":{"properties":{"a":{},"b":1}}}}`)},
	}
	r := Check(tools, Settings{MaxOversized: new(0), MaxTools: 1, MaxToolChars: 100})
	msgs := append(append([]string{}, r.Violations...), r.Notes...)
	if len(r.Violations) != 4 {
		t.Fatalf("violations %q", r.Violations)
	}
	for _, m := range msgs {
		if !strings.Contains(m, ": ") && !strings.Contains(m, "; ") {
			t.Errorf("message without an instruction: %q", m)
		}
		low := strings.ToLower(m)
		if !(strings.Contains(low, "shrink") || strings.Contains(low, "raise") || strings.Contains(low, "lower") ||
			strings.Contains(low, "add ") || strings.Contains(low, "remove") || strings.Contains(low, "rename") ||
			strings.Contains(low, "fix") || strings.Contains(low, "set ")) {
			t.Errorf("message says nothing to do: %q", m)
		}
	}
}

// A schema that cannot be measured (valid JSON nested past the parser's depth) breaks the run
// instead of passing as a tool of size 0.
func TestUnmeasurableSchemaBreaksTheRun(t *testing.T) {
	deep := strings.Repeat(`{"type":"object","properties":{"a":`, 1200) + `{"type":"string"}` + strings.Repeat(`}}`, 1200)
	if !json.Valid([]byte(deep)) {
		t.Fatal("test schema is not valid JSON")
	}
	zero := 0
	r := Check([]Tool{{Name: "deep", InputSchema: json.RawMessage(deep)}}, Settings{MaxOversized: &zero})
	if r.OK() || !r.PerTool[0].Unmeasured {
		t.Fatalf("report %+v: want the unmeasured tool to break the run", r)
	}
	if p := strings.Join(r.PerTool[0].Problems, " "); !strings.Contains(p, "deeper than") || strings.Contains(p, "not valid JSON") {
		t.Errorf("problem %q: want it to say the schema nests too deep, not that it is invalid", p)
	}
}

// TestCheckTruncatedSnapshots: snapshots the SDK cut count with lower-bound sizes, leave the
// replaced properties out of the coverage, report no marker as a structural problem, and a
// snapshot cut at its root counts in no figure (and breaks nothing).
func TestCheckTruncatedSnapshots(t *testing.T) {
	cutSchema := `{"type":"object","properties":{"q":{"type":"object","description":"d","properties":{"a":{"description":"x"},"b":"[Object]","token":"[redacted]","...":"[MaxProperties ~]"},"required":["a","zz","[MaxProperties ~]"]},"l":{"type":"array","items":"[Object]"}},"$ref":"#/$defs/cut"}`
	tools := []Tool{
		{Name: "cut", InputSchema: json.RawMessage(cutSchema), Truncated: true},
		{Name: "whole-root-cut", InputSchema: json.RawMessage(`"[Object]"`), Truncated: true},
	}
	r := Check(tools, Settings{InjectContext: new(false), MaxOversized: new(0)})
	cut, root := r.PerTool[0], r.PerTool[1]
	if !cut.Truncated || cut.Cut || len(cut.Problems) != 0 {
		t.Fatalf("cut snapshot: %+v", cut)
	}
	// Only q.a is counted (described); b, token and "..." were replaced by the SDK.
	if cut.Nested != 1 || cut.Described != 1 || cut.SchemaChars != len(cutSchema) {
		t.Fatalf("cut snapshot figures: nested %d described %d size %d", cut.Nested, cut.Described, cut.SchemaChars)
	}
	if !root.Cut || root.Unmeasured || root.SchemaChars != 0 || root.Oversized {
		t.Fatalf("root cut: %+v", root)
	}
	if !r.OK() || r.TruncatedTools != 2 {
		t.Fatalf("report: ok %v, truncated %d, violations %q", r.OK(), r.TruncatedTools, r.Violations)
	}
	found := false
	for _, n := range r.Notes {
		if strings.Contains(n, "the snapshots of 2 tools were cut or redacted") && strings.Contains(n, `1 was cut whole ("whole-root-cut")`) {
			found = true
		}
	}
	if !found {
		t.Fatalf("no note on the cut snapshots: %q", r.Notes)
	}
	// The same schema from a server (not a snapshot) is a broken schema.
	plain := Check([]Tool{{Name: "cut", InputSchema: json.RawMessage(cutSchema)}}, Settings{InjectContext: new(false)})
	if len(plain.PerTool[0].Problems) == 0 || plain.PerTool[0].Nested != 4 {
		t.Fatalf("served schema with markers: problems %q, nested %d", plain.PerTool[0].Problems, plain.PerTool[0].Nested)
	}
}
