-- Campaign flag lint results (DESIGN.md §8, "Campaign flag lint"), written by the scheduler's
-- campaigns_lint job and by `mcpulse campaigns lint --store`.
--
-- Every payload version seen of every variant of the checked flags (mcp-interview-recruitment,
-- mcp-intent-prompt): one row per (flag_key, variant, first_seen), first_seen being the first
-- lint run that saw payload_sha256 (the SHA-256 of the payload's canonical JSON text) and
-- last_seen the latest run that still saw it; each run re-inserts the version in force with a
-- later last_seen, so the latest row wins. A variant that disappears gets a row with removed = 1
-- and an empty payload. The version in force at time t is the row with the greatest
-- first_seen <= t (sql/campaigns/payload_version_at.sql reads it that way).
CREATE TABLE IF NOT EXISTS mcpulse.flag_payload_versions
(
    flag_key String,
    variant String,
    first_seen DateTime('UTC'),
    last_seen DateTime('UTC'),
    payload_sha256 String,
    payload String,
    removed UInt8
)
ENGINE = ReplacingMergeTree(last_seen)
ORDER BY (flag_key, variant, first_seen);

-- One row per lint run, flag and variant (variant '' for the flag's own problems): whether the
-- campaign will recruit, whether every release condition carries the exclusion cohort, and its
-- problems as parallel arrays (code, severity, message; messages are escaped by the lint).
-- Runs older than the retention (30 days by default) are deleted by the job.
CREATE TABLE IF NOT EXISTS mcpulse.campaign_lint_runs
(
    run_at DateTime('UTC'),
    flag_key String,
    variant String,
    active UInt8,
    will_recruit UInt8,
    exclusion_ok UInt8,
    payload_sha256 String,
    errors UInt32,
    warnings UInt32,
    problem_codes Array(String),
    problem_severities Array(String),
    problem_messages Array(String)
)
ENGINE = MergeTree()
PARTITION BY toYYYYMM(run_at)
ORDER BY (flag_key, variant, run_at);
