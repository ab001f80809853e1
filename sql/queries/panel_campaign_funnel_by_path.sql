-- The recruitment funnel split by the invitation's protocol path and MCP client: invitations
-- sent, people reached, first opens of the booking link, the invitations answered within 10
-- minutes and how they ended (accept, decline, cancel, or no answer within 10 minutes), counted
-- once per invitation, with the conversions from the invitations sent. The path is read from
-- the invitation's own `$mcp_protocol_version` (its properties column: the SDK's session
-- property, no column of its own), and this multiIf is the one place it is mapped (DESIGN.md §8):
-- 2026-07-28 and later date-shaped revisions answer with an `input_required` result
-- (input_required); the earlier revisions the MCP servers invite on send an SSE
-- `elicitation/create` request (sse_elicitation_create); anything else, or none, is unknown.
-- The client is the invitation's `$mcp_client_name` ('unknown' when it has none). Opens and
-- responses take their invitation's path and client (joined by invitation_id), so every
-- invitation, open and response falls in exactly one row and the rows' counts sum to
-- panel_campaign_funnel's (an open or response whose invitation is not stored is in the
-- unknown path, client 'unknown', by its own day); people are distinct per row, so a person
-- reached on two paths or clients counts in each. Cohort by the invitation's UTC send day, as
-- panel_campaign_funnel. The raw table is read without FINAL: every figure is a distinct count
-- of ids or a least value, which a row stored twice (same uuid, same event) changes nothing
-- of, and FINAL doubled the time (DESIGN.md §8). Parameters, in order: from, to (DateTime
-- UTC: the days starting from..to, both included), campaign twice, client twice (String, ''
-- = all).
SELECT
    multiIf(
        match(protocol_version, '^[0-9]{4}-[0-9]{2}-[0-9]{2}$') AND protocol_version >= '2026-07-28', 'input_required',
        protocol_version IN ('2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'), 'sse_elicitation_create',
        'unknown') AS path,
    if(invitation_client = '', 'unknown', invitation_client) AS client,
    uniqExactIf(invitation_id, kind = 'invitation_sent') AS sent,
    uniqExactIf(distinct_id, kind = 'invitation_sent') AS people,
    uniqExactIf(invitation_id, kind = 'link_opened') AS first_opens,
    uniqExactIf(invitation_id, kind = 'response' AND has_invitation
        AND ifNull(responded_at, timestamp) <= sent_at + 600) AS answered,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'accept') AS accepted,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'decline') AS declined,
    uniqExactIf(invitation_id, kind = 'response' AND response = 'cancel') AS cancelled,
    toInt64(sent) - toInt64(answered) AS unanswered,
    if(sent = 0, NULL, answered / sent) AS answer_rate,
    if(sent = 0, NULL, accepted / sent) AS accept_rate,
    if(sent = 0, NULL, first_opens / sent) AS open_rate
FROM
(
    SELECT kind, timestamp, campaign_id, invitation_id, distinct_id, response, responded_at
    FROM mcpulse.recruitment_events
) AS events
ANY LEFT JOIN
(
    SELECT
        invitation_id,
        min(timestamp) AS sent_at,
        1 AS has_invitation,
        argMin(visitParamExtractString(properties, '$mcp_protocol_version'), timestamp) AS protocol_version,
        argMin(visitParamExtractString(properties, '$mcp_client_name'), timestamp) AS invitation_client
    FROM mcpulse.recruitment_events
    WHERE kind = 'invitation_sent'
    GROUP BY invitation_id
) AS invitations USING invitation_id
WHERE toDateTime(toDate(if(has_invitation, sent_at, timestamp)), 'UTC') >= ?
    AND toDateTime(toDate(if(has_invitation, sent_at, timestamp)), 'UTC') <= ?
    AND (? = '' OR campaign_id = ?)
    AND (? = '' OR invitation_client = ?)
GROUP BY path, client
ORDER BY path, sent DESC, client
