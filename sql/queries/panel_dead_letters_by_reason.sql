-- Dead letters by reason class, most frequent first. The stored reason is free text (e.g.
-- "line 7: timestamp: not RFC 3339 with an offset: \"yesterday\""); its class is the first
-- problem it names with the publishing line number dropped, quoted values masked as "..."
-- (or '...') and other numbers as N, cut to 120 characters, so the classes stay few however
-- varied the input. example is the reason of the latest dead letter of the class.
-- Parameters, in order: from, to (DateTime UTC: recorded from..to, both included), limit
-- (UInt64: how many classes).
SELECT
    reason_class,
    count() AS dead_letters,
    argMax(reason, (received_at, dead_letter_id)) AS example,
    max(received_at) AS last_seen
FROM
(
    SELECT
        dead_letter_id,
        reason,
        received_at,
        substring(
            replaceAll(
                replaceRegexpAll(
                    replaceRegexpAll(
                        replaceRegexpAll(
                            replaceRegexpOne(replaceRegexpOne(reason, '^line [0-9]+: ', ''), '; .*$', ''),
                            '"(\\\\.|[^"\\\\])*"', '"..."'),
                        '\\x27[^\\x27]*\\x27', '\x27...\x27'),
                    '[0-9]+', 'N'),
                'RFC N', 'RFC 3339'),
            1, 120) AS reason_class
    FROM mcpulse.dead_letters FINAL
    WHERE received_at >= ? AND received_at <= ?
)
GROUP BY reason_class
ORDER BY dead_letters DESC, reason_class
LIMIT ?
