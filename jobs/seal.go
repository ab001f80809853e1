package jobs

import (
	"context"
	"fmt"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/migrations"
)

// IgnoredKeyRatesRollup is the rollup column value of mcpulse.rollup_seals for the sealed
// ignored-key rates (migration 0007): the name of the rollup table they seal.
const IgnoredKeyRatesRollup = "ignored_key_rates_hourly"

// SealResult is what one SealIgnoredKeyRates run did.
type SealResult struct {
	// SealedThrough is the watermark recorded (UTC, on the hour): every hour before it now
	// reads from mcpulse.ignored_key_rates_hourly_sealed.
	SealedThrough time.Time
	// SealedAt is the seal's time (UTC, whole seconds), the version of the rows it wrote.
	SealedAt time.Time
}

// sealIgnoredKeyRatesSQL recomputes the hours in [from, to) (second and third parameters; to
// is at most the watermark) from the rollup's uniqExact states, stamped with the seal time
// (first parameter).
const sealIgnoredKeyRatesSQL = `INSERT INTO mcpulse.ignored_key_rates_hourly_sealed
    (hour, tool_name, client_name, successful_calls, calls_with_ignored_keys, sealed_at)
SELECT
    hour,
    tool_name,
    client_name,
    uniqExactMerge(successful_calls),
    uniqExactMerge(calls_with_ignored_keys),
    toDateTime(?, 'UTC')
FROM mcpulse.ignored_key_rates_hourly
WHERE hour >= toDateTime(?, 'UTC') AND hour < toDateTime(?, 'UTC')
GROUP BY hour, tool_name, client_name`

// sealMonthsSQL lists the months (first day, UTC) holding hours before the watermark.
const sealMonthsSQL = `SELECT DISTINCT toStartOfMonth(hour) AS month
FROM mcpulse.ignored_key_rates_hourly
WHERE hour < toDateTime(?, 'UTC')
ORDER BY month`

// SealIgnoredKeyRates seals the closed hours of mcpulse.ignored_key_rates_hourly into plain
// exact counts (migration 0007), so the tool-diagnostics panels stop unpacking a uuid set per
// hour, tool and client. The watermark W is the start of the hour before now's (so an hour is
// sealed once it has been over for at least an hour, leaving time for in-flight events):
//
//  1. every (hour, tool_name, client_name) with hour < W is recomputed from the rollup's
//     uniqExact states (still replay-safe) and inserted into ignored_key_rates_hourly_sealed
//     with sealed_at = now; ReplacingMergeTree(sealed_at) keeps the newest seal of each key, so
//     a run is idempotent and a late event for a sealed hour shows once the next seal runs;
//  2. only after that insert succeeded, the row (IgnoredKeyRatesRollup, W, now) goes into
//     mcpulse.rollup_seals, so a reader never sees a watermark whose hours are not sealed.
//
// Readers (sql/queries/panel_*ignored_key*.sql) take sealed counts for hours before the newest
// watermark and the states from it on. now is truncated to whole seconds (DateTime). Errors
// are ClickHouse's, wrapped; after a failed first step no watermark is written.
func SealIgnoredKeyRates(ctx context.Context, conn driver.Conn, now time.Time) (SealResult, error) {
	now = now.UTC().Truncate(time.Second)
	res := SealResult{SealedThrough: now.Truncate(time.Hour).Add(-time.Hour), SealedAt: now}
	// DateTime parameters bind as Unix seconds, the same on ClickHouse 18.16 and current.
	at, through := now.Unix(), res.SealedThrough.Unix()
	if err := sealByMonths(ctx, conn, at, through); err != nil {
		return SealResult{}, fmt.Errorf("seal ignored-key rates through %s: %w", res.SealedThrough.Format(time.RFC3339), err)
	}
	if err := conn.Exec(ctx, `INSERT INTO mcpulse.rollup_seals (rollup, sealed_through, sealed_at)
SELECT ?, toDateTime(?, 'UTC'), toDateTime(?, 'UTC')`, IgnoredKeyRatesRollup, through, at); err != nil {
		return SealResult{}, fmt.Errorf("record the ignored-key rates seal through %s: %w", res.SealedThrough.Format(time.RFC3339), err)
	}
	return res, nil
}

// sealByMonths runs sealIgnoredKeyRatesSQL once per run of at most
// migrations.MaxPartitionsPerInsert months (the sealed table is partitioned by month, and
// current ClickHouse refuses an INSERT into more partitions than that).
func sealByMonths(ctx context.Context, conn driver.Conn, at, through int64) error {
	rows, err := conn.Query(ctx, sealMonthsSQL, through)
	if err != nil {
		return err
	}
	var months []time.Time
	for rows.Next() {
		var m time.Time
		if err := rows.Scan(&m); err != nil {
			rows.Close()
			return err
		}
		months = append(months, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(months) == 0 {
		// Nothing to seal; the insert still runs, so a missing or broken sealed table fails
		// the seal before its watermark is written.
		return conn.Exec(ctx, sealIgnoredKeyRatesSQL, at, int64(0), through)
	}
	for i := 0; i < len(months); i += migrations.MaxPartitionsPerInsert {
		from := time.Date(months[i].Year(), months[i].Month(), 1, 0, 0, 0, 0, time.UTC)
		to := through
		if j := i + migrations.MaxPartitionsPerInsert; j < len(months) {
			to = time.Date(months[j].Year(), months[j].Month(), 1, 0, 0, 0, 0, time.UTC).Unix()
		}
		if err := conn.Exec(ctx, sealIgnoredKeyRatesSQL, at, from.Unix(), to); err != nil {
			return err
		}
	}
	return nil
}

// SealOnce runs one SealIgnoredKeyRates at cfg.Now() and logs its watermark; the error is also
// logged.
func SealOnce(cfg SchedulerConfig) error {
	cfg.setDefaults()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Timeout)
	defer cancel()
	start := time.Now()
	res, err := SealIgnoredKeyRates(ctx, cfg.ClickHouse, cfg.Now())
	if err != nil {
		cfg.Logger.Error("rollup seal failed", "err", err, "took", time.Since(start))
		return err
	}
	cfg.Logger.Info("rollup seal", "rollup", IgnoredKeyRatesRollup, "sealed_through", res.SealedThrough, "took", time.Since(start))
	return nil
}
