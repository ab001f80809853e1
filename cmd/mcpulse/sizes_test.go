package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// A size flag of 0 or less (and a gen --end that is not a time) is refused before anything
// starts, naming the flag and what it wants: demo --events 0
// used to run the default 200,000 events and --events -1 started the stack before failing;
// stack --partitions 0 silently meant 4 and -1 was reported as a Go field (Partitions);
// bench pipeline and bench dashboards --events 0 ran a million events.
func TestSizeFlagsBelowOneAreRefused(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // nothing may start: a command that gets past its checks fails on the context
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "--events", "0"}, "--events must be at least 1"},
		{[]string{"demo", "--events", "-1"}, "--events must be at least 1"},
		{[]string{"demo", "--kafka-brokers", "0"}, "--kafka-brokers must be between 1 and 16"},
		{[]string{"stack", "--partitions", "0"}, "--partitions must be between 1 and 10000"},
		{[]string{"stack", "--partitions", "-1"}, "--partitions must be between 1 and 10000"},
		{[]string{"stack", "--partitions", "10001"}, "--partitions must be between 1 and 10000"},
		{[]string{"stack", "--shards", "0"}, "--shards and --replicas must be at least 1"},
		{[]string{"stack", "--replicas", "-1"}, "--shards and --replicas must be at least 1"},
		{[]string{"stack", "--shards", "5", "--replicas", "4"}, "at most 16 servers, got 5 × 4"},
		{[]string{"migrate", "up", "--cluster", "c", "--ddl-timeout", "500ms"}, "--ddl-timeout must be at least 1s"},
		{[]string{"migrate", "up", "--cluster", "c", "--ddl-timeout", "58s"}, "--ddl-timeout 58s must stay at least 5s under the connection's read timeout 1m0s"},
		{[]string{"migrate", "up", "--cluster", "c", "--ddl-timeout", "58s", "--clickhouse", "clickhouse://127.0.0.1:1/default?read_timeout=120s"}, "context canceled"}, // a read_timeout in the DSN raises the bound
		{[]string{"migrate", "up", "--cluster", "c", "--preflight-timeout", "0s"}, "--preflight-timeout must be positive"},
		{[]string{"stack", "--kafka-brokers", "0"}, "--kafka-brokers must be between 1 and 16"},
		{[]string{"stack", "--kafka-brokers", "17"}, "--kafka-brokers must be between 1 and 16"},
		{[]string{"bench", "pipeline", "--events", "0"}, "--events must be at least 1"},
		{[]string{"bench", "pipeline", "--runs", "0"}, "--runs must be at least 1"},
		{[]string{"bench", "dashboards", "--events", "0"}, "--events must be at least 1"},
		{[]string{"scheduler", "--contact-audit-window", "-5h"}, "--contact-audit-window must be positive"},
		{[]string{"scheduler", "--contact-audit-window", "0s"}, "--contact-audit-window must be positive"},
		{[]string{"gen", "--events", "10", "--end", "yesterday", "--out", "/nonexistent/x.jsonl"}, `--end "yesterday": want an RFC 3339 time`},
		{[]string{"gen", "--events", "10", "--end", "2026-03-01", "--out", "/nonexistent/x.jsonl"}, `--end "2026-03-01": want an RFC 3339 time`},
	} {
		root := newRootCmd()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(c.args)
		err := root.ExecuteContext(ctx)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.args, err, c.want)
		}
	}
}
