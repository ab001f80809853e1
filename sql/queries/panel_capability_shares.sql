-- Shares of the tool calls that carried a gate reason by what the client said it supports:
-- URL elicitation and form elicitation, each yes, no or unknown (the request carried no
-- capability metadata: NULL in the events and in v_gate_reasons_hourly, stored as 2 in the
-- view read here; not the same as "no"). Parameters, in order: from, to (DateTime
-- UTC: the hours starting from..to, both included), campaign twice, client twice (String,
-- '' = all).
SELECT
    capability,
    sum(support_calls) AS diagnosed_calls,
    sumIf(support_calls, support = 1) / diagnosed_calls AS supported,
    sumIf(support_calls, support = 0) / diagnosed_calls AS not_supported,
    sumIf(support_calls, support = 2) / diagnosed_calls AS unknown
FROM
(
    -- Plain counts per cell (v_gate_reason_calls_hourly: sealed, or summed over partitions).
    SELECT url_support, form_support, sum(calls) AS support_calls
    FROM mcpulse.v_gate_reason_calls_hourly
    WHERE hour >= ? AND hour <= ?
        AND (? = '' OR campaign_id = ?)
        AND (? = '' OR client_name = ?)
    GROUP BY url_support, form_support
)
ARRAY JOIN ['URL elicitation', 'Form elicitation'] AS capability, [url_support, form_support] AS support
GROUP BY capability
ORDER BY capability DESC
