-- The contact-policy audit's further kinds (DESIGN.md §8, "Contact policy, complete"): what
-- each violation found besides its kind. detail is a one-line, escaped explanation;
-- evaluation_id the request id two invitations shared (two_invitations_one_evaluation);
-- recounted_* the warm-up the audit recounted from the stored tool calls, min_* the thresholds
-- in force, reported_* the server's own counters when they disagree with the recount
-- (invited_before_thresholds). NULL where a kind has no such value.
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN detail String;
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN evaluation_id String;
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN recounted_calls Nullable(Int64);
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN recounted_age_seconds Nullable(Float64);
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN min_completed_calls Nullable(Int64);
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN min_session_age_seconds Nullable(Int64);
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN reported_calls Nullable(Int64);
ALTER TABLE mcpulse.contact_policy_violations ADD COLUMN reported_age_seconds Nullable(Float64);
