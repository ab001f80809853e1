-- How many lint runs are older than the retention (campaigns.Record deletes them only when
-- there are some, so a run leaves no needless mutation). Parameters, in order: before (DateTime
-- UTC: rows with run_at before it are expired).
SELECT count() AS expired
FROM mcpulse.campaign_lint_runs
WHERE run_at < ?
