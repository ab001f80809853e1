-- Prompts use per prompt name ($mcp_prompt_get, mcp_resource_prompt_events), the most used
-- first: how many times a client got the prompt, in how many sessions, how many failed, and
-- the clients (one that sent no name as "unknown", as the per-client panel names it).
-- Listings ($mcp_prompts_list) name no prompt and are left out. A prompt name is the client's
-- text: untrusted, shown escaped. Parameters, in order: from, to (DateTime UTC:
-- requests at from..to, both included), client twice (String, '' = all), limit (UInt64: how
-- many rows).
SELECT
    name AS prompt,
    count() AS gets,
    uniqExact(session_id) AS sessions,
    sum(is_error) AS failed_gets,
    arrayStringConcat(arraySort(groupUniqArray(if(client_name = '', 'unknown', client_name))), ', ') AS clients,
    max(timestamp) AS last_seen
FROM mcpulse.mcp_resource_prompt_events FINAL
WHERE timestamp >= ? AND timestamp <= ?
    AND kind = 'prompt_get'
    AND (? = '' OR client_name = ?)
GROUP BY name
ORDER BY gets DESC, prompt
LIMIT ?
