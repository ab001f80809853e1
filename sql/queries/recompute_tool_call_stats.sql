-- v_tool_call_stats_hourly recomputed from the deduplicated raw table, to check the rollup: the
-- same columns in the same order, each measure derived as package consumers/rollup derives it.
-- Measurable: a successful call whose ignored keys could be measured (ignored_keys_source is not
-- 'not_measurable'; '' for calls stored before the derivation existed). Not measurable because
-- truncated: the SDK cut or redacted the arguments or the schema. Unknown tool: not listed by
-- the server version, or refused by it as unknown. Durations: the sum in whole microseconds of
-- each call's duration (capped at 1e12 ms), the buckets by v_duration_bucket_bounds, found at this
-- level over the rows the subquery read: 18.16 sends a scalar subquery inside a lambda to a
-- Distributed table's shards as a column they lack (the sharded layout).
WITH (SELECT bounds FROM mcpulse.v_duration_bucket_bounds) AS bounds
SELECT
    hour,
    tool_name,
    client_name,
    server_name,
    server_version,
    count() AS calls,
    countIf(is_error = 1) AS errors,
    countIf(is_error = 0) AS successful_calls,
    countIf(measurable) AS measurable_calls,
    countIf(measurable AND notEmpty(counted_ignored_keys)) AS calls_with_ignored_keys,
    countIf(is_error = 0 AND ignored_keys_source = 'reported') AS keys_reported,
    countIf(is_error = 0 AND ignored_keys_source = 'response') AS keys_from_response,
    countIf(is_error = 0 AND ignored_keys_source = 'schema') AS keys_from_schema,
    countIf(not_measured AND ignored_keys_reason = 'no_schema') AS not_measurable_no_schema,
    countIf(not_measured AND ignored_keys_reason IN ('arguments_truncated', 'arguments_redacted', 'schema_truncated')) AS not_measurable_truncated,
    countIf(not_measured AND ignored_keys_reason NOT IN ('no_schema', 'arguments_truncated', 'arguments_redacted', 'schema_truncated')) AS not_measurable_other,
    countIf(startsWith(error_class, 'validation_')) AS validation_errors,
    countIf(unknown_tool = 1 OR error_class = 'unknown_tool') AS unknown_tool_calls,
    countIf(isNotNull(duration_ms)) AS duration_count,
    sum(toUInt64(least(ifNull(duration_ms, 0.), 1e12) * 1000)) / 1000 AS duration_sum_ms,
    sumForEach(arrayMap(i -> toUInt64(isNotNull(duration_ms) AND i = arrayFirstIndex(x -> ifNull(duration_ms, 0.) <= x, bounds)),
        arrayEnumerate(bounds))) AS duration_buckets
FROM
(
    SELECT
        toStartOfHour(timestamp) AS hour,
        tool_name,
        client_name,
        server_name,
        server_version,
        is_error,
        is_error = 0 AND ignored_keys_source != 'not_measurable' AS measurable,
        is_error = 0 AND ignored_keys_source = 'not_measurable' AS not_measured,
        ignored_keys_source,
        ignored_keys_reason,
        error_class,
        unknown_tool,
        counted_ignored_keys,
        duration_ms
    FROM mcpulse.tool_calls FINAL
)
GROUP BY hour, tool_name, client_name, server_name, server_version
