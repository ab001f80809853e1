-- Intent prompt trials (DESIGN.md §8, "Intent prompt trials").
--
-- The identifying details the consumer found in a tool call's intent ($mcp_intent), by kind
-- (package intents/details: email, ip_address, phone, url_credentials, api_key, id, home_path;
-- each kind at most once, in the table's order), and the intent with each detail replaced by
-- its kind's placeholder ('[email]', ...): what the dashboards show, never the intent itself.
-- Rows written before this migration hold [] and ''.
ALTER TABLE mcpulse.tool_calls ADD COLUMN intent_details Array(String);
ALTER TABLE mcpulse.tool_calls ADD COLUMN intent_masked String;

-- One row per $mcp_tools_list event that asked for a listing's first page (no cursor): when a
-- user's client listed the server's tools, so a tool call can be attributed to the intent
-- prompt the client's cached tool schemas carry (the version in force at its latest listing).
-- client_name is the SDK's $mcp_client_name, bounded as tool_calls.client_name is.
CREATE TABLE IF NOT EXISTS mcpulse.tools_list_events
(
    uuid UUID,
    listed_at DateTime('UTC'),
    distinct_id String,
    client_name String,
    client_version String,
    server_name String,
    server_version String,
    session_id String,
    kafka_partition Int32,
    kafka_offset Int64
)
ENGINE = ReplacingMergeTree()
PARTITION BY toYYYYMM(listed_at)
ORDER BY (distinct_id, client_name, listed_at, uuid);
