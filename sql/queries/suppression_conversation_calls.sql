-- The tool calls the contact-policy audit recounts an invitation's warm-up from: every stored
-- call (deduplicated by uuid) that names a conversation and whose distinct_id some invitation
-- went to; the audit keeps those under an invitation's own client and conversation. at_s is
-- the call's time in whole seconds since the epoch; tool_name is the effective tool (DESIGN.md
-- §4), exec_verb the exec command ('' for a direct call). No parameters.
SELECT
    distinct_id,
    client_name,
    conversation_id,
    tool_name,
    exec_verb,
    is_error,
    toInt64(toUInt32(timestamp)) AS at_s
FROM mcpulse.tool_calls FINAL
WHERE conversation_id != ''
    AND distinct_id IN (SELECT distinct_id FROM mcpulse.recruitment_events WHERE kind = 'invitation_sent')
