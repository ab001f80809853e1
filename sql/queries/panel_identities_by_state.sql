-- Invited identities by suppression state, derived from ClickHouse the way the reconcile job
-- (suppression) rebuilds Redis: responses at or before the identity's last reset are
-- ignored; the latest permanent response (accept, decline) wins; otherwise the latest cancel
-- is a cooldown until responded_at + 7 days ('cooldown ended' after that); an identity reset
-- with no response since is 'reset'; one that never answered is 'no response'. Times are
-- compared to the millisecond (migration 0006). Only max and argMax fold the rows, which a
-- re-inserted row cannot change, so the raw tables are read without FINAL. No parameters.
SELECT
    multiIf(
        permanent_ms > 0, if(permanent_response = 'accept', 'accepted', 'declined'),
        cancel_ms > 0 AND cancel_ms + 604800000 > toInt64(toUInt32(now())) * 1000, 'cooldown',
        cancel_ms > 0, 'cooldown ended',
        reset_mark > 0, 'reset',
        'no response') AS state,
    count() AS identities
FROM
(
    SELECT
        identity_hash,
        argMaxIf(response, at_ms, kind = 'response' AND response != 'cancel' AND at_ms > reset_ms) AS permanent_response,
        maxIf(at_ms, kind = 'response' AND response != 'cancel' AND at_ms > reset_ms) AS permanent_ms,
        maxIf(at_ms, kind = 'response' AND response = 'cancel' AND at_ms > reset_ms) AS cancel_ms,
        max(reset_ms) AS reset_mark
    FROM
    (
        SELECT
            identity_hash,
            kind,
            response,
            ifNull(responded_at_ms, ifNull(toInt64(toUInt32(responded_at)) * 1000,
                if(timestamp_ms = 0, toInt64(toUInt32(timestamp)) * 1000, timestamp_ms))) AS at_ms
        FROM mcpulse.recruitment_events
    ) AS responses
    ANY LEFT JOIN
    (
        SELECT identity_hash, max(if(at_ms = 0, toInt64(toUInt32(at)) * 1000, at_ms)) AS reset_ms
        FROM mcpulse.suppression_audit
        WHERE action = 'suppression_reset'
        GROUP BY identity_hash
    ) AS resets USING identity_hash
    GROUP BY identity_hash
)
GROUP BY state
ORDER BY identities DESC, state
