package migrations_test

import (
	"context"
	"testing"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

// A Distributed engine's arguments, as 18.16 shows them in system.tables.engine_full (as
// written: identifiers, a backquoted cluster name) and as current releases do (string
// literals), give the local table and cluster mutations run on.
func TestDistributedTargetReadsEngineArguments(t *testing.T) {
	for _, c := range []struct {
		full string
		want migrations.Target
		name string
	}{
		{"Distributed(mcpulse_cluster, mcpulse_local, tool_calls, cityHash64(distinct_id))",
			migrations.Target{Database: "mcpulse_local", Table: "tool_calls", Cluster: "mcpulse_cluster"},
			"mcpulse_local.tool_calls ON CLUSTER mcpulse_cluster"},
		{"Distributed(`mcpulse-cluster`, mcpulse_local, campaign_lint_runs, 0)",
			migrations.Target{Database: "mcpulse_local", Table: "campaign_lint_runs", Cluster: "mcpulse-cluster"},
			"mcpulse_local.campaign_lint_runs ON CLUSTER `mcpulse-cluster`"},
		{"Distributed('mcpulse_cluster', 'mcpulse_local', 'rollup_batches', cityHash64(kafka_topic, kafka_partition))",
			migrations.Target{Database: "mcpulse_local", Table: "rollup_batches", Cluster: "mcpulse_cluster"},
			"mcpulse_local.rollup_batches ON CLUSTER mcpulse_cluster"},
		{"Distributed(c, db, t)", migrations.Target{Database: "db", Table: "t", Cluster: "c"}, "db.t ON CLUSTER c"},
	} {
		got, err := migrations.DistributedTarget(c.full)
		if err != nil || got != c.want || got.Name() != c.name {
			t.Errorf("%s: got %+v (%q), %v; want %+v (%q)", c.full, got, got.Name(), err, c.want, c.name)
		}
	}
	if got := (migrations.Target{Database: "mcpulse_local", Table: "t", Cluster: "mcpulse_cluster"}).System("mutations"); got != "cluster('mcpulse_cluster', system, mutations)" {
		t.Errorf("System on the sharded layout: %q", got)
	}
	for _, bad := range []string{"MergeTree() ORDER BY x", "Distributed(c, db)", "Distributed(, db, t)"} {
		if got, err := migrations.DistributedTarget(bad); err == nil {
			t.Errorf("%s: got %+v, want an error", bad, got)
		}
	}
}

// On one server a table's mutations run on the table itself, and its mutations and parts are
// the server's own; a table that does not exist is an error naming it.
func TestMutationTargetOnOneServer(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()
	if _, err := migrations.Up(ctx, ch, nil); err != nil {
		t.Fatal(err)
	}
	got, err := migrations.MutationTarget(ctx, ch, "campaign_lint_runs")
	if err != nil {
		t.Fatal(err)
	}
	if want := (migrations.Target{Database: "mcpulse", Table: "campaign_lint_runs"}); got != want || got.Name() != "mcpulse.campaign_lint_runs" || got.System("parts") != "system.parts" {
		t.Errorf("got %+v (%q, %q), want %+v, mcpulse.campaign_lint_runs, system.parts", got, got.Name(), got.System("parts"), want)
	}
	if got, err := migrations.MutationTarget(ctx, ch, "no_such_table"); err == nil {
		t.Errorf("a missing table: got %+v, want an error", got)
	} else {
		t.Logf("a missing table: %v", err)
	}
}
