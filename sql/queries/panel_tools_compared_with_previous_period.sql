-- Each tool in the compared period beside the previous period of the same length (the page's
-- range, or the 24 hours before its end when it sets no start; dashboards.Filters.Previous):
-- calls and their change, the error rate and ignored-key rate and their change, and the change
-- of the p95 duration and validation-error rate (rates in percentage points, calls and p95
-- relative), the busiest tools first. A change is NULL where either period has no call
-- (shown "new" for calls), and a rate's or p95's change also where either period has nothing
-- to compute it from (no measurable call, no timed call): engines differ on anyIf over NULLs. The
-- ignored-key rate divides by the successful calls whose ignored keys could be measured;
-- durations come from the rollup's histogram (v_duration_bucket_bounds). Reads
-- v_tool_call_stats_hourly. Parameters, in order: period_from, period_to (DateTime UTC: the
-- hours of the compared period), the same two again, prev_from, prev_to (the previous
-- period's hours), client twice, tool twice (String, '' = all), min_calls (UInt64: tools with
-- fewer calls in both periods together are left out), limit (UInt64: how many tools).
SELECT
    tool_name,
    sumIf(period_calls, compared) AS calls,
    if(sumIf(period_calls, NOT compared) = 0, NULL, calls / sumIf(period_calls, NOT compared) - 1) AS calls_change,
    anyIf(period_error_rate, compared) AS error_rate,
    if(calls = 0 OR sumIf(period_calls, NOT compared) = 0, NULL, error_rate - anyIf(period_error_rate, NOT compared)) AS error_rate_change,
    if(sumIf(period_timed, compared) = 0 OR sumIf(period_timed, NOT compared) = 0, NULL,
        anyIf(period_p95_ms, compared) / anyIf(period_p95_ms, NOT compared) - 1) AS p95_change,
    if(sumIf(period_measurable, compared) = 0, NULL, anyIf(period_ignored_key_rate, compared)) AS ignored_key_rate,
    if(sumIf(period_measurable, compared) = 0 OR sumIf(period_measurable, NOT compared) = 0, NULL,
        ignored_key_rate - anyIf(period_ignored_key_rate, NOT compared)) AS ignored_key_rate_change,
    if(calls = 0 OR sumIf(period_calls, NOT compared) = 0, NULL,
        anyIf(period_validation_error_rate, compared) - anyIf(period_validation_error_rate, NOT compared)) AS validation_error_rate_change
FROM
(
    WITH (SELECT bounds FROM mcpulse.v_duration_bucket_bounds) AS bounds
    SELECT
        tool_name,
        compared,
        n AS period_calls,
        errors / n AS period_error_rate,
        measurable AS period_measurable,
        if(measurable = 0, NULL, with_ignored / measurable) AS period_ignored_key_rate,
        validation / n AS period_validation_error_rate,
        arrayCumSum(b) AS cum,
        arraySum(b) AS timed,
        timed AS period_timed,
        arrayFirstIndex(c -> c >= 0.95 * timed, cum) AS i95,
        if(timed = 0, NULL, if(isInfinite(bounds[i95]), bounds[i95 - 1],
            bounds[i95 - 1] + (bounds[i95] - bounds[i95 - 1]) * (0.95 * timed - cum[i95 - 1]) / b[i95])) AS period_p95_ms
    FROM
    (
        SELECT
            tool_name,
            hour >= ? AND hour <= ? AS compared,
            sum(calls) AS n,
            sum(errors) AS errors,
            sum(measurable_calls) AS measurable,
            sum(calls_with_ignored_keys) AS with_ignored,
            sum(validation_errors) AS validation,
            sumForEach(duration_buckets) AS b
        FROM mcpulse.v_tool_call_stats_hourly
        WHERE ((hour >= ? AND hour <= ?) OR (hour >= ? AND hour <= ?))
            AND (? = '' OR client_name = ?)
            AND (? = '' OR tool_name = ?)
        GROUP BY tool_name, compared
    )
)
GROUP BY tool_name
HAVING sum(period_calls) >= ?
ORDER BY calls DESC, tool_name
LIMIT ?
