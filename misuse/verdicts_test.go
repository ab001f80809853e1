package misuse_test

import (
	"crypto/sha256"
	"testing"

	"github.com/mcpulse/mcpulse/misuse"
)

// TestVerdictsStoredAndReused: a schema over a limit is checked once and its verdict is pending
// until stored; a second state (a restarted consumer) given the stored verdicts judges the
// schema's calls not measured without checking or compiling it, and measures its neighbour
// as before. A verdict over a limit raised since is checked again; one of a limit this state
// does not know is kept.
func TestVerdictsStoredAndReused(t *testing.T) {
	lim := misuse.SchemaLimits{MaxProperties: 50}
	wide := misuse.ServedTool{Name: "wide", InputSchema: wideSchema(60)}
	fine := tool("fine", "q")

	first := misuse.NewListings(misuse.ListingsConfig{Schemas: lim})
	first.Observe(page("s", 10, wide, fine))
	for i := range 3 {
		if got := ignored(t, first.Judge(call("s", 20+i), "wide"), `{"extra":1}`); got.Reason != misuse.ReasonSchemaOverLimit {
			t.Fatalf("wide: %+v, want %s", got, misuse.ReasonSchemaOverLimit)
		}
	}
	ignored(t, first.Judge(call("s", 30), "fine"), `{"q":"x"}`)
	pending := first.PendingVerdicts()
	if len(pending) != 2 {
		t.Fatalf("pending verdicts %+v, want wide's and fine's", pending)
	}
	byKind := map[misuse.VerdictKind]misuse.SchemaVerdict{}
	for _, v := range pending {
		byKind[v.Kind] = v
	}
	over := byKind[misuse.VerdictOverLimit]
	if over.Sum != sha256.Sum256(wide.InputSchema) || over.Over != (misuse.OverLimit{Limit: misuse.LimitProperties, Max: 50, Seen: 51}) || over.At.IsZero() {
		t.Errorf("over-limit verdict %+v, want wide's: properties, max 50, seen 51", over)
	}
	if _, ok := byKind[misuse.VerdictMeasured]; !ok {
		t.Errorf("no measured verdict (fine's) in %+v", pending)
	}
	if st := first.Stats(); st.Checks != 2 || st.VerdictsReused != 0 {
		t.Errorf("first: checks %d, reused %d; want 2 and 0", st.Checks, st.VerdictsReused)
	}
	first.VerdictsStored(pending)
	if p := first.PendingVerdicts(); len(p) != 0 {
		t.Errorf("pending after stored: %+v", p)
	}

	// Restarted: the stored verdicts read back.
	second := misuse.NewListings(misuse.ListingsConfig{Schemas: lim})
	second.Observe(page("s", 10, wide, fine))
	if u := second.UnjudgedSchemas(); len(u) != 2 {
		t.Errorf("unjudged after the listing: %d schemas, want wide's and fine's", len(u))
	}
	second.PutVerdicts(pending)
	second.Observe(page("s", 11, wide, fine))
	if u := second.UnjudgedSchemas(); len(u) != 0 {
		t.Errorf("unjudged once their verdicts were read: %d schemas, want none", len(u))
	}
	if got := ignored(t, second.Judge(call("s", 20), "wide"), `{"extra":1}`); got.Reason != misuse.ReasonSchemaOverLimit {
		t.Errorf("wide after restart: %+v, want %s", got, misuse.ReasonSchemaOverLimit)
	}
	if got := ignored(t, second.Judge(call("s", 21), "fine"), `{"q":"x","extra":1}`); got.Source != misuse.SourceSchema || len(got.Keys) != 1 {
		t.Errorf("fine after restart: %+v, want extra ignored", got)
	}
	if st := second.Stats(); st.Checks != 0 || st.VerdictsReused != 2 || st.Compiles != 1 {
		t.Errorf("second: checks %d, reused %d, compiles %d; want 0, 2, 1 (fine's)", st.Checks, st.VerdictsReused, st.Compiles)
	}
	if p := second.PendingVerdicts(); len(p) != 0 {
		t.Errorf("second: reused verdicts pending again: %+v", p)
	}

	// The properties limit raised past what the text was seen at: checked again.
	raised := misuse.NewListings(misuse.ListingsConfig{Schemas: misuse.SchemaLimits{MaxProperties: 100}})
	raised.PutVerdicts(pending)
	raised.Observe(page("s", 10, wide))
	if got := ignored(t, raised.Judge(call("s", 20), "wide"), `{"k1":"x","extra":1}`); got.Source != misuse.SourceSchema {
		t.Errorf("wide under a raised limit: %+v, want measured", got)
	}
	// A limit this state does not know (a newer consumer's) keeps its verdict.
	unknown := misuse.NewListings(misuse.ListingsConfig{Schemas: misuse.SchemaLimits{MaxProperties: 100}})
	unknown.PutVerdicts([]misuse.SchemaVerdict{{Sum: over.Sum, Kind: misuse.VerdictOverLimit, Over: misuse.OverLimit{Limit: "elsewhere", Max: 1, Seen: 2}}})
	unknown.Observe(page("s", 10, wide))
	if got := ignored(t, unknown.Judge(call("s", 20), "wide"), `{"extra":1}`); got.Reason != misuse.ReasonSchemaOverLimit {
		t.Errorf("wide under an unknown limit's verdict: %+v, want %s", got, misuse.ReasonSchemaOverLimit)
	}
}
