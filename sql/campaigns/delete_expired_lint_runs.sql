-- Deletes the lint runs older than the retention (a mutation; campaigns.Record, 30 days by
-- default). Parameters, in order: before (DateTime UTC: rows with run_at before it go).
ALTER TABLE mcpulse.campaign_lint_runs DELETE WHERE run_at < ?
