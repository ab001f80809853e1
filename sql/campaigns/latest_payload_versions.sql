-- The latest stored payload version of every variant of the checked flags (migration 0041,
-- flag_payload_versions): the row with the greatest first_seen per (flag_key, variant), with its
-- payload hash and whether it records the variant's removal. campaigns.Record reads it before
-- each run to keep a version's first_seen while its hash is unchanged. No parameters.
SELECT
    flag_key,
    variant,
    max(first_seen) AS latest_first_seen,
    argMax(payload_sha256, first_seen) AS latest_sha256,
    argMax(removed, first_seen) AS latest_removed
FROM mcpulse.flag_payload_versions FINAL
GROUP BY flag_key, variant
ORDER BY flag_key, variant
