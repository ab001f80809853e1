-- Per campaign of mcp-interview-recruitment, for the alert rules campaign-cannot-recruit and
-- campaign-lost-exclusion: the state the latest lint run in the window (campaign_lint_runs,
-- stored by the scheduler's campaigns_lint job and by `mcpulse campaigns lint --store`) found.
--   cannot_recruit: the flag active, a release condition able to select the campaign and an
--     error that stops it recruiting (its payload missing or invalid: the MCP server skips it
--     without a word) (1), or not (0). A campaign parked on purpose (the flag disabled, or no
--     condition selecting it) does not fire.
--   lost_exclusion: the flag active and a release condition able to select the campaign
--     without the shared exclusion cohort, or selecting it (exclusion_missing,
--     exclusion_inverted: people who asked never to be contacted can be invited) (1), or not (0).
--   problems: that run's problem codes.
-- Only the campaigns of the flag's latest run in the window are returned, so a campaign since
-- removed resolves. Parameters, in order: from, to (DateTime UTC: runs from..to, both
-- included), then from, to again (the flag's latest run).
SELECT
    variant AS campaign_id,
    toFloat64(argMax(active = 1 AND will_recruit = 0 AND errors > 0 AND NOT has(problem_codes, 'variant_unreachable'), run_at)) AS cannot_recruit,
    toFloat64(argMax(active = 1 AND exclusion_ok = 0, run_at)) AS lost_exclusion,
    argMax(arrayStringConcat(problem_codes, ', '), run_at) AS problems
FROM mcpulse.campaign_lint_runs
WHERE flag_key = 'mcp-interview-recruitment' AND variant != '' AND run_at >= ? AND run_at <= ?
GROUP BY variant
HAVING max(run_at) = (
    SELECT max(run_at)
    FROM mcpulse.campaign_lint_runs
    WHERE flag_key = 'mcp-interview-recruitment' AND run_at >= ? AND run_at <= ?
)
ORDER BY campaign_id
