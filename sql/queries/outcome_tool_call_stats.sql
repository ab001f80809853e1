-- Every row of the tool-call stats rollup, in recompute_tool_call_stats' columns.
SELECT hour, tool_name, client_name, server_name, server_version, calls, errors, successful_calls,
    measurable_calls, calls_with_ignored_keys, keys_reported, keys_from_response, keys_from_schema,
    not_measurable_no_schema, not_measurable_truncated, not_measurable_other, validation_errors,
    unknown_tool_calls, duration_count, duration_sum_ms, duration_buckets
FROM mcpulse.v_tool_call_stats_hourly
