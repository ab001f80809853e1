-- Millisecond times beside the DateTime columns (ClickHouse 18.16 has no DateTime64): the
-- suppression precedence and the reset watermark compare responded_at and reset_at to the
-- millisecond in Redis, so the reconcile job and the contact-policy audit must read them at
-- the same precision, or a decline made 1 ms after a reset would look older than it. Rows
-- written before this migration hold 0 / NULL here; readers fall back to the DateTime columns.
ALTER TABLE mcpulse.recruitment_events ADD COLUMN timestamp_ms Int64;
ALTER TABLE mcpulse.recruitment_events ADD COLUMN responded_at_ms Nullable(Int64);
ALTER TABLE mcpulse.suppression_audit ADD COLUMN at_ms Int64;
