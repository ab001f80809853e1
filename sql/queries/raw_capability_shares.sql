-- panel_capability_shares computed from the deduplicated raw table tool_calls. Same
-- parameters.
SELECT
    capability,
    count() AS diagnosed_calls,
    countIf(ifNull(flag, 2) = 1) / diagnosed_calls AS supported,
    countIf(ifNull(flag, 2) = 0) / diagnosed_calls AS not_supported,
    countIf(isNull(flag)) / diagnosed_calls AS unknown
FROM
(
    SELECT url_supported, form_supported
    FROM mcpulse.tool_calls FINAL
    WHERE recruitment_reason != ''
        AND toStartOfHour(timestamp) >= ? AND toStartOfHour(timestamp) <= ?
        AND (? = '' OR campaign_id = ?)
        AND (? = '' OR client_name = ?)
)
ARRAY JOIN ['URL elicitation', 'Form elicitation'] AS capability, [url_supported, form_supported] AS flag
GROUP BY capability
ORDER BY capability DESC
