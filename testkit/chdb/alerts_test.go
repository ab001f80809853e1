package chdb_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/dashboards/alerts"
)

// evaluateAlerts evaluates the built-in alert rules and one panel rule that fires on the
// harness's schema checks (tools with many undescribed nested parameters), notifying a local
// webhook, so every alert query and the delivery bookkeeping run on the engine.
func evaluateAlerts(ctx context.Context, ch driver.Conn, rdb redis.UniversalClient, replica string, now time.Time) (alerts.Report, error) {
	ds, err := dashboards.Load()
	if err != nil {
		return alerts.Report{}, err
	}
	rules, err := alerts.DefaultRules(ds)
	if err != nil {
		return alerts.Report{}, err
	}
	dir, err := os.MkdirTemp("", "chdb-alerts-")
	if err != nil {
		return alerts.Report{}, err
	}
	defer os.RemoveAll(dir)
	own := "title: Many undescribed nested parameters\npanel: schema-ratchet/offending-tools\nwindow: 24h\n" +
		"value: undescribed_nested\nlabels: [server, tool_name]\nthreshold: {above: 10}\nreceivers: [hook]\n"
	if err := os.WriteFile(filepath.Join(dir, "undescribed-parameters.yaml"), []byte(own), 0o644); err != nil {
		return alerts.Report{}, err
	}
	more, err := alerts.LoadRulesDir(dir, ds)
	if err != nil {
		return alerts.Report{}, err
	}
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer hook.Close()
	ev := &alerts.Evaluator{Rules: append(rules, more...), Dashboards: ds, ClickHouse: ch, Redis: rdb, Replica: replica,
		Receivers: alerts.ReceiversConfig{Receivers: []alerts.Receiver{{Name: "hook", Kind: alerts.KindWebhook, URL: hook.URL}}}}
	return ev.Evaluate(ctx, now)
}
