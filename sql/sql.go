// Package sql holds mcpulse's named ClickHouse queries, one per .sql file under queries/, so
// analysts can run the same text in clickhouse-client, Grafana or Metabase. Queries read the
// analyst views (v_*) and the raw tables with FINAL; parameters are bound by the driver
// ({name:Type} placeholders are not used because ClickHouse 18.16 lacks them: filters are
// positional "?" arguments bound by clickhouse-go, never string-built). Each file states its
// parameters, in order, in its header comment, and uses "?" for nothing else.
//
// panel_*.sql are the dashboard panels' queries (dashboards/*.yaml names them), reading the
// rollups and analyst views; raw_*.sql compute the same figures from the deduplicated raw
// tables, with the same parameters, as the dashboards benchmark's peer and the tests' check.
//
// campaigns/*.sql are the statements of the campaign flag lint's store (package campaigns,
// migration 0041): its inserts, retention, and the reads of the payload versions.
package sql

import (
	"embed"
	"fmt"
	"strings"
)

//go:embed queries/*.sql rollup/*.sql campaigns/*.sql
var files embed.FS

// Query returns the text of the named query (the file name without ".sql"). An unknown name is
// a BUG in the caller and panics, so a typo fails every test that reaches it.
func Query(name string) string {
	data, err := files.ReadFile("queries/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("BUG: no query named %q", name))
	}
	return strings.TrimSpace(string(data))
}

// Names lists every query name.
func Names() []string {
	entries, _ := files.ReadDir("queries")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".sql"))
	}
	return out
}

// Rollup returns the text of the named statement of the consumer's rollup writer
// (rollup/NAME.sql). Some are templates whose {table}, {dims} and {values} package
// consumers/rollup fills from its table definitions; they are kept apart from queries/, whose
// files run as they are. An unknown name is a BUG in the caller and panics.
func Rollup(name string) string {
	data, err := files.ReadFile("rollup/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("BUG: no rollup statement named %q", name))
	}
	return strings.TrimSpace(string(data))
}

// RollupNames lists every rollup statement name.
func RollupNames() []string {
	entries, _ := files.ReadDir("rollup")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".sql"))
	}
	return out
}

// Campaigns returns the text of the named statement of the campaign flag lint's store
// (campaigns/NAME.sql), e.g. "payload_version_at". An unknown name is a BUG in the caller and
// panics.
func Campaigns(name string) string {
	data, err := files.ReadFile("campaigns/" + name + ".sql")
	if err != nil {
		panic(fmt.Sprintf("BUG: no campaigns statement named %q", name))
	}
	return strings.TrimSpace(string(data))
}

// CampaignsNames lists every campaigns statement name.
func CampaignsNames() []string {
	entries, _ := files.ReadDir("campaigns")
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, strings.TrimSuffix(e.Name(), ".sql"))
	}
	return out
}
