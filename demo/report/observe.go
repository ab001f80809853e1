// Package report reads what a run left in ClickHouse and Redis, as an outcome.Outcome to
// compare with a corpus's expected file, and as the readable summary `mcpulse demo` prints.
package report

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/demo/outcome"
	mcsql "github.com/mcpulse/mcpulse/sql"
	"github.com/mcpulse/mcpulse/suppression"
)

const (
	hourFormat = "2006-01-02 15:04:05"
	dayFormat  = "2006-01-02"
)

// Observe reads the stores' current state: counts per table and kind, every rollup row, and
// every suppression record (found with SCAN, never KEYS).
func Observe(ctx context.Context, ch driver.Conn, rdb redis.UniversalClient) (*outcome.Outcome, error) {
	o := &outcome.Outcome{EventsByKind: map[string]int64{}, Tables: map[string]int64{}, Suppression: map[string]outcome.Suppression{}}
	if err := scanCounts(ctx, ch, "table_counts", o.Tables); err != nil {
		return nil, err
	}
	if err := scanCounts(ctx, ch, "events_by_kind", o.EventsByKind); err != nil {
		return nil, err
	}
	for k, v := range o.EventsByKind {
		if v == 0 {
			delete(o.EventsByKind, k)
		}
	}
	if err := readRollups(ctx, ch, "outcome", o); err != nil {
		return nil, err
	}
	if err := scanServedSchemas(ctx, ch, o); err != nil {
		return nil, err
	}
	if err := scanSDKEvents(ctx, ch, o); err != nil {
		return nil, err
	}
	if err := scanToolMisuse(ctx, ch, "outcome_tool_misuse", o); err != nil {
		return nil, err
	}
	if err := scanFunnelByPath(ctx, ch, o); err != nil {
		return nil, err
	}
	if err := scanSuppression(ctx, rdb, o.Suppression); err != nil {
		return nil, err
	}
	o.Normalize()
	return o, nil
}

func each(ctx context.Context, ch driver.Conn, query string, scan func(driver.Rows) error, args ...any) error {
	rows, err := ch.Query(ctx, mcsql.Query(query), args...)
	if err != nil {
		return fmt.Errorf("query %s: %w", query, err)
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return fmt.Errorf("query %s: %w", query, err)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("query %s: %w", query, err)
	}
	return nil
}

func scanCounts(ctx context.Context, ch driver.Conn, query string, into map[string]int64) error {
	return each(ctx, ch, query, func(r driver.Rows) error {
		var (
			name string
			n    uint64
		)
		if err := r.Scan(&name, &n); err != nil {
			return err
		}
		into[name] += int64(n)
		return nil
	})
}

// scanSuppression reads every suppression record (SCAN, never KEYS; pending continuation keys
// do not match the pattern).
func scanSuppression(ctx context.Context, rdb redis.UniversalClient, into map[string]outcome.Suppression) error {
	records, err := suppression.ScanRecords(ctx, rdb)
	if err != nil {
		return err
	}
	for h, rec := range records {
		into[h] = outcome.Suppression{DistinctID: rec.DistinctID, CampaignID: rec.CampaignID, Response: rec.Response, RespondedAt: rec.RespondedAt}
	}
	return nil
}

// scanServedSchemas reads v_served_tool_schemas.
func scanServedSchemas(ctx context.Context, ch driver.Conn, o *outcome.Outcome) error {
	return each(ctx, ch, "outcome_served_schemas", func(r driver.Rows) error {
		var (
			row         outcome.ServedSchema
			first, last time.Time
		)
		if err := r.Scan(&row.ServerName, &row.ServerVersion, &row.ToolName, &row.SchemaSHA256, &row.Truncated, &first, &last); err != nil {
			return err
		}
		row.FirstSeen, row.LastSeen = first.UTC().Format(hourFormat), last.UTC().Format(hourFormat)
		o.ServedSchemas = append(o.ServedSchemas, row)
		return nil
	})
}

// scanSDKEvents reads the SDK's reports and requests per kind, subject and client.
func scanSDKEvents(ctx context.Context, ch driver.Conn, o *outcome.Outcome) error {
	return each(ctx, ch, "outcome_sdk_events", func(r driver.Rows) error {
		var (
			row            outcome.SDKEvent
			events, errors uint64
		)
		if err := r.Scan(&row.Kind, &row.Subject, &row.ClientName, &events, &errors); err != nil {
			return err
		}
		row.Events, row.Errors = int64(events), int64(errors)
		o.SDKEvents = append(o.SDKEvents, row)
		return nil
	})
}

// scanFunnelByPath reads the recruitment funnel per protocol path and client over every day,
// campaign and client: the dashboard panel's own query (panel_campaign_funnel_by_path), so
// the path is mapped in one place.
func scanFunnelByPath(ctx context.Context, ch driver.Conn, o *outcome.Outcome) error {
	from, to := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2105, 12, 31, 23, 59, 59, 0, time.UTC)
	return each(ctx, ch, "panel_campaign_funnel_by_path", func(r driver.Rows) error {
		var (
			row                                             outcome.FunnelPath
			sent, people, opens, answered, acc, dec, cancel uint64
			unanswered                                      int64
			answerRate, acceptRate, openRate                *float64
		)
		if err := r.Scan(&row.Path, &row.ClientName, &sent, &people, &opens, &answered, &acc, &dec, &cancel, &unanswered,
			&answerRate, &acceptRate, &openRate); err != nil {
			return err
		}
		row.Invitations, row.People, row.FirstOpens, row.Answered = int64(sent), int64(people), int64(opens), int64(answered)
		row.Accepted, row.Declined, row.Cancelled, row.Unanswered = int64(acc), int64(dec), int64(cancel), unanswered
		o.FunnelByPath = append(o.FunnelByPath, row)
		return nil
	}, from, to, "", "", "", "")
}

// scanToolMisuse reads the tool-call stats summed per hour and tool, from the rollup
// (outcome_tool_misuse) or recomputed from the raw table (recompute_tool_misuse).
func scanToolMisuse(ctx context.Context, ch driver.Conn, query string, o *outcome.Outcome) error {
	return each(ctx, ch, query, func(r driver.Rows) error {
		var (
			row                                    outcome.ToolMisuse
			hour                                   time.Time
			calls, errors, validation, unknownTool uint64
		)
		if err := r.Scan(&hour, &row.ToolName, &calls, &errors, &validation, &unknownTool); err != nil {
			return err
		}
		row.Hour = hour.UTC().Format(hourFormat)
		row.Calls, row.Errors, row.ValidationErrors, row.UnknownToolCalls = int64(calls), int64(errors), int64(validation), int64(unknownTool)
		o.ToolMisuse = append(o.ToolMisuse, row)
		return nil
	})
}

// Recompute derives every rollup row from the deduplicated raw tables (the sql/ queries named
// recompute_*), independently of the materialized views, so a check can hold each rollup
// equal to its recomputation (DESIGN.md §4).
func Recompute(ctx context.Context, ch driver.Conn) (*outcome.Outcome, error) {
	o := &outcome.Outcome{}
	if err := readRollups(ctx, ch, "recompute", o); err != nil {
		return nil, err
	}
	if err := scanToolMisuse(ctx, ch, "recompute_tool_misuse", o); err != nil {
		return nil, err
	}
	o.Normalize()
	return o, nil
}

// readRollups fills o's rollup rows from the four queries named prefix_ignored_key_rates,
// prefix_ignored_keys, prefix_gate_reasons and prefix_funnel, which share column layouts.
func readRollups(ctx context.Context, ch driver.Conn, prefix string, o *outcome.Outcome) error {
	err := each(ctx, ch, prefix+"_ignored_key_rates", func(r driver.Rows) error {
		var (
			row  outcome.IgnoredKeyRate
			hour time.Time
			s, w uint64
		)
		if err := r.Scan(&hour, &row.ToolName, &row.ClientName, &s, &w); err != nil {
			return err
		}
		row.Hour, row.SuccessfulCalls, row.CallsWithIgnoredKeys = hour.UTC().Format(hourFormat), int64(s), int64(w)
		o.IgnoredKeyRates = append(o.IgnoredKeyRates, row)
		return nil
	})
	if err != nil {
		return err
	}
	err = each(ctx, ch, prefix+"_ignored_keys", func(r driver.Rows) error {
		var (
			row  outcome.IgnoredKey
			hour time.Time
			n    uint64
		)
		if err := r.Scan(&hour, &row.ToolName, &row.KeyPath, &n); err != nil {
			return err
		}
		row.Hour, row.Occurrences = hour.UTC().Format(hourFormat), int64(n)
		o.IgnoredKeys = append(o.IgnoredKeys, row)
		return nil
	})
	if err != nil {
		return err
	}
	err = each(ctx, ch, prefix+"_gate_reasons", func(r driver.Rows) error {
		var (
			row           outcome.GateReason
			hour          time.Time
			calls, people uint64
		)
		if err := r.Scan(&hour, &row.CampaignID, &row.Reason, &row.ClientName, &row.URLSupported, &row.FormSupported, &calls, &people); err != nil {
			return err
		}
		row.Hour, row.Calls, row.People = hour.UTC().Format(hourFormat), int64(calls), int64(people)
		o.GateReasons = append(o.GateReasons, row)
		return nil
	})
	if err != nil {
		return err
	}
	err = each(ctx, ch, prefix+"_funnel", func(r driver.Rows) error {
		var (
			row                                  outcome.FunnelDay
			day                                  time.Time
			inv, people, opens, acc, dec, cancel uint64
			unanswered                           int64
		)
		if err := r.Scan(&day, &row.CampaignID, &row.FeatureFlag, &inv, &people, &opens, &acc, &dec, &cancel, &unanswered); err != nil {
			return err
		}
		row.Day = day.Format(dayFormat)
		row.Invitations, row.People, row.FirstOpens = int64(inv), int64(people), int64(opens)
		row.Accepted, row.Declined, row.Cancelled, row.Unanswered = int64(acc), int64(dec), int64(cancel), unanswered
		o.Funnel = append(o.Funnel, row)
		return nil
	})
	if err != nil {
		return err
	}
	return nil
}

// RecomputedRollups are the rollups that RollupMismatches checks: each has a query
// outcome_NAME reading its view and a query recompute_NAME deriving the same columns from the
// deduplicated raw tables.
var RecomputedRollups = []string{"tool_call_stats", "ignored_key_paths", "gate_reasons", "events_by_name"}

// RollupMismatches compares every row of each of RecomputedRollups with its recomputation from
// the raw tables and describes each difference (nil when every rollup equals its
// recomputation). Errors are ClickHouse's.
func RollupMismatches(ctx context.Context, ch driver.Conn) ([]string, error) {
	var out []string
	for _, name := range RecomputedRollups {
		have, err := rowStrings(ctx, ch, "outcome_"+name)
		if err != nil {
			return nil, err
		}
		want, err := rowStrings(ctx, ch, "recompute_"+name)
		if err != nil {
			return nil, err
		}
		for row, n := range want {
			if have[row] != n {
				out = append(out, fmt.Sprintf("%s: row %s: %d in the rollup, %d recomputed from the raw tables", name, row, have[row], n))
			}
		}
		for row, n := range have {
			if _, ok := want[row]; !ok {
				out = append(out, fmt.Sprintf("%s: row %s: %d in the rollup, none recomputed from the raw tables", name, row, n))
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// rowStrings runs a query and counts its rows, each written as its values joined by " | ".
func rowStrings(ctx context.Context, ch driver.Conn, query string) (map[string]int, error) {
	out := map[string]int{}
	err := each(ctx, ch, query, func(r driver.Rows) error {
		types := r.ColumnTypes()
		vals := make([]any, len(types))
		for i, ct := range types {
			vals[i] = reflect.New(ct.ScanType()).Interface()
		}
		if err := r.Scan(vals...); err != nil {
			return err
		}
		parts := make([]string, len(vals))
		for i, v := range vals {
			x := reflect.ValueOf(v).Elem().Interface()
			if p := reflect.ValueOf(x); p.Kind() == reflect.Pointer {
				// A Nullable column scans into a pointer: compare values, not addresses.
				if p.IsNil() {
					x = "NULL"
				} else {
					x = p.Elem().Interface()
				}
			}
			if t, ok := x.(time.Time); ok {
				x = t.UTC().Format(hourFormat)
			}
			parts[i] = fmt.Sprint(x)
		}
		out[strings.Join(parts, " | ")]++
		return nil
	})
	return out, err
}
