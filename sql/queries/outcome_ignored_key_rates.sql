-- Every row of the ignored-key rates rollup (used to compare a run with its expected outcome).
SELECT hour, tool_name, client_name, successful_calls, calls_with_ignored_keys
FROM mcpulse.v_ignored_key_rates_hourly
