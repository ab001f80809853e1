package migrations_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/migrations"
)

var (
	distributedRE = regexp.MustCompile(`^CREATE TABLE IF NOT EXISTS mcpulse\.(\w+) ON CLUSTER c AS mcpulse_local\.(\w+) ENGINE = Distributed\(c, mcpulse_local, (\w+), (.+)\)$`)
	dropDistRE    = regexp.MustCompile(`^DROP TABLE IF EXISTS mcpulse\.(\w+) ON CLUSTER c$`)
	createLocalRE = regexp.MustCompile(`(?s)^CREATE TABLE IF NOT EXISTS mcpulse_local\.(\w+) ON CLUSTER c\b.*ENGINE = (Replicated\w*MergeTree|Null)\b`)
)

// The sharded layout keeps every stored row and every materialized view in mcpulse_local,
// with its name in mcpulse a Distributed table over it with the table's sharding key, and
// leaves the analyst views and the backfills in mcpulse, reading through the Distributed
// tables.
func TestShardedPlanPutsTablesInTheLocalDatabaseUnderDistributedOnes(t *testing.T) {
	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := migrations.ShardedPlan(all, "c")
	if err != nil {
		t.Fatal(err)
	}
	dist := map[string]string{} // Distributed table -> key, as the plan leaves them
	local := map[string]bool{}  // local tables created, minus those dropped or renamed
	for i, m := range all {
		if len(plan[i]) != len(m.Statements) {
			t.Fatalf("%04d: %d statement groups for %d statements", m.Version, len(plan[i]), len(m.Statements))
		}
		for _, group := range plan[i] {
			for _, st := range group {
				s := strings.TrimSpace(st.SQL)
				switch {
				case distributedRE.MatchString(s):
					g := distributedRE.FindStringSubmatch(s)
					if g[1] != g[2] || g[2] != g[3] {
						t.Errorf("Distributed table over another name: %s", s)
					}
					dist[g[1]] = g[4]
				case dropDistRE.MatchString(s):
					delete(dist, dropDistRE.FindStringSubmatch(s)[1])
				case strings.HasPrefix(s, "CREATE MATERIALIZED VIEW"):
					if !strings.HasPrefix(s, "CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse_local.") || strings.Contains(s, " mcpulse.") {
						t.Errorf("a materialized view outside mcpulse_local, or reading or writing mcpulse: %s", firstLine(s))
					}
				case strings.HasPrefix(s, "CREATE VIEW"):
					if !strings.HasPrefix(s, "CREATE VIEW IF NOT EXISTS mcpulse.") || strings.Contains(s, "mcpulse_local") {
						t.Errorf("an analyst view not in mcpulse, over mcpulse's tables: %s", firstLine(s))
					}
				case strings.HasPrefix(s, "CREATE TABLE"):
					g := createLocalRE.FindStringSubmatch(s)
					if g == nil {
						t.Errorf("a table neither local and stored nor Distributed: %s", firstLine(s))
						continue
					}
					local[g[1]] = true
				case strings.HasPrefix(s, "DROP TABLE IF EXISTS mcpulse_local."):
					delete(local, strings.Fields(s)[4][len("mcpulse_local."):])
				case strings.HasPrefix(s, "RENAME TABLE"):
					for _, pair := range strings.Split(strings.TrimPrefix(strings.Split(s, " ON CLUSTER")[0], "RENAME TABLE "), ",") {
						f := strings.Fields(pair)
						delete(local, strings.TrimPrefix(f[0], "mcpulse_local."))
					}
					for _, pair := range strings.Split(strings.TrimPrefix(strings.Split(s, " ON CLUSTER")[0], "RENAME TABLE "), ",") {
						f := strings.Fields(pair)
						local[strings.TrimPrefix(f[2], "mcpulse_local.")] = true
					}
				case strings.HasPrefix(s, "ALTER TABLE"), strings.HasPrefix(s, "OPTIMIZE"), strings.HasPrefix(s, "TRUNCATE"):
					if !strings.Contains(strings.Fields(s)[2], "mcpulse_local.") {
						t.Errorf("an ALTER, OPTIMIZE or TRUNCATE of a Distributed table: %s", firstLine(s))
					}
				}
			}
		}
	}
	names := func(m map[string]bool) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		slices.Sort(out)
		return out
	}
	distNames := map[string]bool{}
	for k := range dist {
		distNames[k] = true
	}
	if got, want := names(distNames), names(local); !slices.Equal(got, want) {
		t.Errorf("Distributed tables %v, want one over each local table %v", got, want)
	}
	for name, key := range map[string]string{
		"tool_calls":             "cityHash64(distinct_id)",
		"recruitment_events":     "cityHash64(identity_hash)",
		"suppression_audit":      "cityHash64(identity_hash)",
		"tool_call_stats_hourly": "cityHash64(kafka_topic, kafka_partition)",
		"served_tool_schemas_in": "0",
	} {
		if dist[name] != key {
			t.Errorf("%s is sharded by %q, want %q", name, dist[name], key)
		}
	}
}

// A table no sharding key was chosen for fails the plan, naming it, rather than getting one
// by default.
func TestShardedPlanRefusesATableWithoutShardingKey(t *testing.T) {
	m := migrations.Migration{Version: 9999, Name: "new", Statements: []string{
		"CREATE TABLE IF NOT EXISTS mcpulse.brand_new (a String) ENGINE = MergeTree() ORDER BY a",
	}}
	_, err := migrations.ShardedPlan([]migrations.Migration{m}, "c")
	if err == nil || !strings.Contains(err.Error(), "brand_new has no sharding key") {
		t.Fatalf("got %v, want an error naming brand_new", err)
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " ..."
	}
	return s
}
