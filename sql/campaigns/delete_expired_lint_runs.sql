-- Deletes the lint runs older than the retention (a mutation; campaigns.Record, 30 days by
-- default). {table} is where campaign_lint_runs' mutations run (migrations.Target.Name: the
-- table, or on the sharded layout its local table ON CLUSTER), filled by package campaigns.
-- Parameters, in order: before (DateTime UTC: rows with run_at before it go).
ALTER TABLE {table} DELETE WHERE run_at < ?
