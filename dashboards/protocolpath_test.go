package dashboards

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/sql"
)

// The protocol path's one mapping (the multiIf of panel_campaign_funnel_by_path), run on
// ClickHouse 18.16 over versions on either side of each boundary, agrees with the generator's
// restatement (gen.ProtocolPath) that .expected.json is computed with.
func TestProtocolPathMappingAgreesWithTheGenerator(t *testing.T) {
	withDemoData(t)
	m := regexp.MustCompile(`(?s)(multiIf\(.*?\)) AS path`).FindStringSubmatch(sql.Query("panel_campaign_funnel_by_path"))
	if m == nil {
		t.Fatal("no `multiIf(...) AS path` in panel_campaign_funnel_by_path")
	}
	versions := []string{"2026-07-28", "2027-01-15", "2026-07-27", "2025-11-25", "2025-06-18", "2025-03-26",
		"2024-11-05", "2024-10-07", "", "DRAFT-2026-v2", "2026-07-28 ", "2026-7-280", "9999-99-99"}
	quoted := make([]string, len(versions))
	for i, v := range versions {
		quoted[i] = "'" + v + "'"
	}
	q := "SELECT protocol_version, " + m[1] + " AS path FROM (SELECT arrayJoin([" + strings.Join(quoted, ", ") + "]) AS protocol_version)"
	rows, err := demoData.ch.Query(context.Background(), q)
	if err != nil {
		t.Fatalf("%v\n%s", err, q)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var v, path string
		if err := rows.Scan(&v, &path); err != nil {
			t.Fatal(err)
		}
		n++
		if want := gen.ProtocolPath(v); path != want {
			t.Errorf("version %q: the query maps it to %q, gen.ProtocolPath to %q", v, path, want)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(versions) {
		t.Errorf("%d rows for %d versions", n, len(versions))
	}
}
