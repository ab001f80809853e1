-- The rows of one lint run (campaigns.Record, a batch of rows): per checked flag one row with
-- variant '' (the flag's own problems), then one row per variant. Columns: run_at, flag_key,
-- variant, active, will_recruit, exclusion_ok, payload_sha256, errors, warnings, problem_codes,
-- problem_severities, problem_messages.
INSERT INTO mcpulse.campaign_lint_runs (run_at, flag_key, variant, active, will_recruit, exclusion_ok, payload_sha256, errors, warnings, problem_codes, problem_severities, problem_messages)
