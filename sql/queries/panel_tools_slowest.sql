-- The slowest tools in the range by p95 duration, among the tools with at least the minimum
-- calls. Durations come from the rollup's histogram (bounds in v_duration_bucket_bounds), interpolated
-- within their bucket. The ignored-key rate divides by the successful calls whose ignored keys
-- could be measured (NULL, shown "not measured", when none could: not 0%).
-- Reads v_tool_call_stats_hourly.
-- Parameters, in order: from, to (DateTime UTC: the hours starting from..to, both included),
-- client twice, tool twice (String, '' = all), min_calls (UInt64: rows with fewer calls are left
-- out), limit (UInt64: how many rows).
SELECT tool_name, calls, p50_ms, p95_ms
FROM
(
    WITH (SELECT bounds FROM mcpulse.v_duration_bucket_bounds) AS bounds
    SELECT
        *,
        errors / calls AS error_rate,
        if(measurable = 0, NULL, with_ignored / measurable) AS ignored_key_rate,
        if(successful = 0, NULL, measurable / successful) AS measured_share,
        validation / calls AS validation_error_rate,
        unknown AS unknown_tool_calls,
        (with_ignored + validation + unknown) / calls AS misuse_rate,
        arrayCumSum(b) AS cum,
        arraySum(b) AS timed,
        arrayFirstIndex(c -> c >= 0.5 * timed, cum) AS i50,
        arrayFirstIndex(c -> c >= 0.95 * timed, cum) AS i95,
        if(timed = 0, NULL, if(isInfinite(bounds[i50]), bounds[i50 - 1],
            bounds[i50 - 1] + (bounds[i50] - bounds[i50 - 1]) * (0.5 * timed - cum[i50 - 1]) / b[i50])) AS p50_ms,
        if(timed = 0, NULL, if(isInfinite(bounds[i95]), bounds[i95 - 1],
            bounds[i95 - 1] + (bounds[i95] - bounds[i95 - 1]) * (0.95 * timed - cum[i95 - 1]) / b[i95])) AS p95_ms
    FROM
    (
        SELECT
            tool_name,
            sum(calls) AS calls,
            sum(errors) AS errors,
            sum(successful_calls) AS successful,
            sum(measurable_calls) AS measurable,
            sum(calls_with_ignored_keys) AS with_ignored,
            sum(validation_errors) AS validation,
            sum(unknown_tool_calls) AS unknown,
            sumForEach(duration_buckets) AS b
        FROM mcpulse.v_tool_call_stats_hourly
        WHERE hour >= ? AND hour <= ?
            AND (? = '' OR client_name = ?)
            AND (? = '' OR tool_name = ?)
        GROUP BY tool_name
        HAVING calls >= ? AND sum(duration_count) > 0
    )
)
ORDER BY p95_ms DESC, calls DESC, tool_name
LIMIT ?
