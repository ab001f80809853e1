-- panel_tools_diagnostics computed from the deduplicated raw table tool_calls, each measure
-- derived as the rollup derives it (sql/queries/recompute_tool_call_stats.sql), durations put
-- in the same buckets: the dashboards benchmark's peer and a check of the panel. Same
-- parameters. (timed_calls, in HAVING, reads duration_ms outside the bucket lambda: 18.16 drops
-- a subquery column that only a lambda reads.)
SELECT tool_name, calls, error_rate, p50_ms, p95_ms, ignored_key_rate, measured_share, validation_error_rate, unknown_tool_calls
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
        -- The duration bucket of each call is found here, over the rows the subquery read: 18.16
        -- sends a scalar subquery inside a lambda to a Distributed table's shards as a column
        -- they lack (the sharded layout), while this level runs where the query was sent.
        WITH (SELECT bounds FROM mcpulse.v_duration_bucket_bounds) AS bounds
        SELECT
            tool_name,
            count() AS calls,
            countIf(is_error = 1) AS errors,
            countIf(is_error = 0) AS successful,
            countIf(is_error = 0 AND ignored_keys_source != 'not_measurable') AS measurable,
            countIf(is_error = 0 AND ignored_keys_source != 'not_measurable' AND notEmpty(counted_ignored_keys)) AS with_ignored,
            countIf(startsWith(error_class, 'validation_')) AS validation,
            countIf(unknown_tool = 1 OR error_class = 'unknown_tool') AS unknown,
            sumForEach(arrayMap(i -> toUInt64(isNotNull(duration_ms) AND i = arrayFirstIndex(x -> ifNull(duration_ms, 0.) <= x, bounds)),
                arrayEnumerate(bounds))) AS b,
            count(duration_ms) AS timed_calls
        FROM
        (
            SELECT
                tool_name, is_error, ignored_keys_source, counted_ignored_keys, error_class, unknown_tool, duration_ms
            FROM mcpulse.tool_calls FINAL
            WHERE toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
                AND (? = '' OR client_name = ?)
                AND (? = '' OR tool_name = ?)
        )
        GROUP BY tool_name
        HAVING calls >= ? AND timed_calls >= 0
    )
)
ORDER BY calls DESC, tool_name
LIMIT ?
