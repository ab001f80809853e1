-- When each campaign's payload changed: every payload version of a variant of
-- mcp-interview-recruitment first seen in the range (flag_payload_versions, stored by the
-- campaign flag lint), newest first: when it was first and last seen by a lint run, the first
-- 12 hex digits of its SHA-256 (of the payload's canonical JSON; empty without a payload), and
-- whether the version records the variant's removal. Parameters, in order: from, to (DateTime
-- UTC: first seen from..to, both included), campaign twice (String, '' = all), limit (UInt64:
-- rows shown).
SELECT
    variant AS campaign_id,
    first_seen,
    last_seen AS version_last_seen,
    substring(payload_sha256, 1, 12) AS payload_hash,
    removed AS payload_removed
FROM mcpulse.flag_payload_versions FINAL
WHERE flag_key = 'mcp-interview-recruitment' AND first_seen >= ? AND first_seen <= ?
    AND (? = '' OR variant = ?)
ORDER BY first_seen DESC, campaign_id
LIMIT ?
