package migrations_test

import (
	"context"
	"reflect"
	"testing"

	"github.com/mcpulse/mcpulse/internal/stores"
	"github.com/mcpulse/mcpulse/migrations"
	"github.com/mcpulse/mcpulse/stack"
)

func TestUpIsIdempotentAndCreatesTheDesignedViews(t *testing.T) {
	s := stack.ForTest(t)
	ctx := context.Background()
	ch, err := stores.OpenClickHouse(ctx, s.ClickHouseDSN)
	if err != nil {
		t.Fatal(err)
	}
	defer ch.Close()

	all, err := migrations.All()
	if err != nil {
		t.Fatal(err)
	}
	first, err := migrations.Up(ctx, ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != len(all) {
		t.Fatalf("first Up applied %d migrations, want all %d", len(first), len(all))
	}
	second, err := migrations.Up(ctx, ch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 0 {
		t.Fatalf("second Up applied %d migrations, want none", len(second))
	}
	applied, err := migrations.AppliedVersions(ctx, ch)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range all {
		if applied[m.Version].Checksum != m.Checksum {
			t.Errorf("migration %d recorded with checksum %q, want %q", m.Version, applied[m.Version].Checksum, m.Checksum)
		}
	}

	// The analyst views are a contract (DESIGN.md §4): exactly these columns, in this order.
	want := map[string][][2]string{
		"v_ignored_key_rates_hourly": {{"hour", "DateTime('UTC')"}, {"tool_name", "String"}, {"client_name", "String"},
			{"successful_calls", "UInt64"}, {"calls_with_ignored_keys", "UInt64"}, {"ignored_key_rate", "Float64"}},
		"v_ignored_keys_hourly": {{"hour", "DateTime('UTC')"}, {"tool_name", "String"}, {"key_path", "String"}, {"occurrences", "UInt64"}},
		"v_gate_reasons_hourly": {{"hour", "DateTime('UTC')"}, {"campaign_id", "String"}, {"reason", "String"}, {"client_name", "String"},
			{"url_supported", "Nullable(UInt8)"}, {"form_supported", "Nullable(UInt8)"}, {"calls", "UInt64"}, {"people", "UInt64"}},
		"v_recruitment_funnel_daily": {{"day", "Date"}, {"campaign_id", "String"}, {"feature_flag", "String"}, {"invitations", "UInt64"},
			{"people", "UInt64"}, {"first_opens", "UInt64"}, {"accepted", "UInt64"}, {"declined", "UInt64"}, {"cancelled", "UInt64"},
			{"unanswered", "Int64"}},
	}
	for view, cols := range want {
		got := describe(t, ctx, ch, "mcpulse."+view)
		if !reflect.DeepEqual(got, cols) {
			t.Errorf("%s columns:\n got %v\nwant %v", view, got, cols)
		}
	}
}

func TestSplitStatementsDropsCommentsAndSplitsAtLineEndingSemicolons(t *testing.T) {
	got := migrations.SplitStatements("-- a comment; with a semicolon\nCREATE TABLE a (x String DEFAULT ';')\nENGINE = Memory;\n\n-- next\nCREATE VIEW b AS SELECT 1;\n")
	want := []string{"CREATE TABLE a (x String DEFAULT ';')\nENGINE = Memory", "CREATE VIEW b AS SELECT 1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
