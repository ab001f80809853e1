package intents

import (
	"regexp"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/intents/details"
	"github.com/mcpulse/mcpulse/sql"
)

// attributedBy are the queries that attribute tool calls to intent-prompt versions; each
// holds the same attribution text (the report, the export and the dashboard's panels must
// count a call under the same version).
var attributedBy = []string{"intents_report", "intents_export", "panel_intent_versions", "panel_intent_details_by_kind"}

// attribution is the version-attribution part of a query, whitespace collapsed: from the
// latest listing to the label, and the listings joined.
func attribution(t *testing.T, name string) string {
	t.Helper()
	q := strings.Join(strings.Fields(sql.Query(name)), " ")
	start := strings.Index(q, "arrayReduce('max'")
	mid := strings.Index(q, "AS version_label")
	join := strings.Index(q, "ANY LEFT JOIN")
	end := strings.Index(q, "USING distinct_id, client")
	if start < 0 || mid < start || join < mid || end < join {
		t.Fatalf("%s: no attribution found", name)
	}
	return q[start:mid] + " … " + q[join:end]
}

func TestQueriesAttributeAlike(t *testing.T) {
	want := attribution(t, attributedBy[0])
	for _, name := range attributedBy[1:] {
		if got := attribution(t, name); got != want {
			t.Errorf("%s attributes calls differently from %s:\n%s\nwant\n%s", name, attributedBy[0], got, want)
		}
	}
}

// Every kind a query names is one of details.Patterns', and the report and the details
// panel name them all.
func TestQueriesNameTheKinds(t *testing.T) {
	named := regexp.MustCompile(`has\(intent_details, '([a-z_]+)'\)`)
	for _, name := range []string{"intents_report", "panel_intent_details_by_kind"} {
		seen := map[string]bool{}
		for _, m := range named.FindAllStringSubmatch(sql.Query(name), -1) {
			seen[m[1]] = true
		}
		for _, k := range details.Kinds() {
			if !seen[string(k)] {
				t.Errorf("%s does not count %s", name, k)
			}
			delete(seen, string(k))
		}
		for k := range seen {
			t.Errorf("%s counts %s, which is no kind of details.Patterns", name, k)
		}
	}
}
