-- Payload versions of one lint run (campaigns.Record, a batch of rows): a version still in force
-- keeps its first_seen and gets the run's time as last_seen (ReplacingMergeTree(last_seen) keeps
-- the newest), a new hash starts a row with first_seen = last_seen = the run's time (or the
-- second after the previous version's first_seen, when the run falls in that same second, so
-- the two versions keep distinct keys), a removed variant gets a row with removed = 1 and an
-- empty payload. Columns: flag_key, variant,
-- first_seen, last_seen, payload_sha256, payload, removed.
INSERT INTO mcpulse.flag_payload_versions (flag_key, variant, first_seen, last_seen, payload_sha256, payload, removed)
