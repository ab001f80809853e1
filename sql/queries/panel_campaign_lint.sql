-- Per campaign (variant of mcp-interview-recruitment), its latest campaign flag lint in the
-- range (campaign_lint_runs: the scheduler's campaigns_lint job, `mcpulse campaigns lint
-- --store`): when it ran, its state (flag disabled, exclusion missing, cannot recruit,
-- warnings or ok, the first that holds), whether the MCP server would invite anyone for it,
-- whether every release condition that can select it excludes the shared exclusion cohort, its
-- error and warning counts and problem codes, and since when its payload version (the latest
-- flag_payload_versions row first seen by the range's end) is in force. Parameters, in order:
-- from, to (DateTime UTC: runs from..to, both included), campaign twice (String, '' = all), to
-- (DateTime UTC: the payload version in force then).
SELECT
    l.campaign_id AS campaign_id,
    l.checked_at AS checked_at,
    l.lint_state AS lint_state,
    l.recruits AS recruits,
    l.exclusion_held AS exclusion_held,
    l.lint_errors AS lint_errors,
    l.lint_warnings AS lint_warnings,
    l.problems AS problems,
    v.payload_since AS payload_since
FROM
(
    SELECT
        variant AS campaign_id,
        max(run_at) AS checked_at,
        argMax(multiIf(active = 0, 'flag disabled', exclusion_ok = 0, 'exclusion missing', will_recruit = 0, 'cannot recruit',
            warnings > 0, 'warnings', 'ok'), run_at) AS lint_state,
        argMax(will_recruit, run_at) AS recruits,
        argMax(exclusion_ok, run_at) AS exclusion_held,
        argMax(errors, run_at) AS lint_errors,
        argMax(warnings, run_at) AS lint_warnings,
        argMax(arrayStringConcat(problem_codes, ', '), run_at) AS problems
    FROM mcpulse.campaign_lint_runs
    WHERE flag_key = 'mcp-interview-recruitment' AND variant != '' AND run_at >= ? AND run_at <= ?
        AND (? = '' OR variant = ?)
    GROUP BY variant
) AS l
ALL LEFT JOIN
(
    SELECT
        variant AS campaign_id,
        max(first_seen) AS payload_since
    FROM mcpulse.flag_payload_versions FINAL
    WHERE flag_key = 'mcp-interview-recruitment' AND first_seen <= ?
    GROUP BY variant
) AS v USING campaign_id
ORDER BY campaign_id
