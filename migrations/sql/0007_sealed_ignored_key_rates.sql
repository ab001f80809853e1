-- Sealed ignored-key rates (DESIGN.md §4, dashboards/README.md): the exact counts of every
-- closed hour of ignored_key_rates_hourly, written by the scheduler's seal job
-- (jobs.SealIgnoredKeyRates), so the dashboards read plain numbers for those hours instead of
-- unpacking a uniqExact state of every tool call's uuid. Each seal recomputes every hour
-- before its watermark from the rollup's states (still replay-safe), then records the
-- watermark in rollup_seals; readers take sealed counts below the newest watermark and states
-- from it on. ReplacingMergeTree(sealed_at) keeps the newest seal of each key, so read FINAL.

CREATE TABLE IF NOT EXISTS mcpulse.ignored_key_rates_hourly_sealed
(
    hour DateTime('UTC'),
    tool_name String,
    client_name String,
    successful_calls UInt64,
    calls_with_ignored_keys UInt64,
    sealed_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(sealed_at)
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, tool_name, client_name);

-- One row per seal: rollup is the rollup table's name, sealed_through the watermark (every
-- hour before it is sealed). The newest seal of a rollup is its max(sealed_through).
CREATE TABLE IF NOT EXISTS mcpulse.rollup_seals
(
    rollup String,
    sealed_through DateTime('UTC'),
    sealed_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(sealed_at)
ORDER BY rollup;
