-- Exact ignored-key counts per hour, tool and client, cheap to read (DESIGN.md §8): hours below
-- the newest watermark in rollup_seals come from ignored_key_rates_hourly_sealed (plain counts,
-- the newest seal of each key by FINAL); later hours (all of them before the first seal, when
-- the watermark reads 1970-01-01) come from the uniqExact states, merged per hour, tool and
-- client. A tool call's uuid has one hour, tool and client, so the keys' sets are disjoint and
-- their counts add up across keys (jobs.SealIgnoredKeyRates).
CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_key_rate_counts_hourly
AS SELECT
    hour,
    tool_name,
    client_name,
    successful_calls,
    calls_with_ignored_keys
FROM mcpulse.ignored_key_rates_hourly_sealed FINAL
WHERE hour < (SELECT max(sealed_through) FROM mcpulse.rollup_seals FINAL WHERE rollup = 'ignored_key_rates_hourly')
UNION ALL
SELECT
    hour,
    tool_name,
    client_name,
    uniqExactMerge(successful_calls) AS successful_calls,
    uniqExactMerge(calls_with_ignored_keys) AS calls_with_ignored_keys
FROM mcpulse.ignored_key_rates_hourly
WHERE hour >= (SELECT max(sealed_through) FROM mcpulse.rollup_seals FINAL WHERE rollup = 'ignored_key_rates_hourly')
GROUP BY hour, tool_name, client_name;
