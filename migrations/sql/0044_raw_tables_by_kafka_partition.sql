-- Raw tables partitioned by Kafka partition as well as by month (DESIGN.md §5, "Replays dedup at
-- insert"). ClickHouse drops an inserted part whose rows are exactly those of a part it stored
-- before (replicated tables always, on both 18.16 and current releases; non-replicated ones on
-- current releases within non_replicated_deduplication_window, which migrate up sets where the
-- server knows it). A part holds the rows of one partition of one INSERT, so with the Kafka
-- partition in the partition key a batch read again after a crash writes, for each Kafka
-- partition, the part it wrote the first time, whatever other partitions share the INSERT:
-- the replay is dropped by the server, even when a rebalance gave the partitions to other
-- members. Partitioned by month only, a part mixed the rows of every partition a member read,
-- and a replay mixed differently was stored again until a merge collapsed it.
--
-- A replicated table remembers the blocks of its last replicated_deduplication_window inserted
-- parts (100 by default on 18.16): a part per Kafka partition and month for every batch of every
-- member, so 1,000 keeps a replay within reach for minutes at a busy member's batch rate.
--
-- Each table is rebuilt (ClickHouse cannot change a partition key in place) with the same
-- columns and sort key, its rows copied collapsed (FINAL), then swapped in by RENAME. The
-- materialized views reading tool_calls and recruitment_events are made again over the new
-- tables: a view follows the table it was made over by name on 18.16 but by identity on
-- current releases, so they are dropped first and created after the swap, as migrations 0002
-- and 0040 made them.

DROP TABLE IF EXISTS mcpulse.recruitment_funnel_daily_mv;
DROP TABLE IF EXISTS mcpulse.cardinality_overflow_tools_mv;
DROP TABLE IF EXISTS mcpulse.cardinality_overflow_clients_mv;
DROP TABLE IF EXISTS mcpulse.cardinality_overflow_key_paths_mv;

CREATE TABLE IF NOT EXISTS mcpulse.tool_calls_by_stream AS mcpulse.tool_calls
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (tool_name, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.tool_calls_by_stream SELECT * FROM mcpulse.tool_calls FINAL;

RENAME TABLE mcpulse.tool_calls TO mcpulse.tool_calls_by_month, mcpulse.tool_calls_by_stream TO mcpulse.tool_calls;

DROP TABLE IF EXISTS mcpulse.tool_calls_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.recruitment_events_by_stream AS mcpulse.recruitment_events
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (campaign_id, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.recruitment_events_by_stream SELECT * FROM mcpulse.recruitment_events FINAL;

RENAME TABLE mcpulse.recruitment_events TO mcpulse.recruitment_events_by_month, mcpulse.recruitment_events_by_stream TO mcpulse.recruitment_events;

DROP TABLE IF EXISTS mcpulse.recruitment_events_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.mcp_initialize_events_by_stream AS mcpulse.mcp_initialize_events
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (server_name, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.mcp_initialize_events_by_stream SELECT * FROM mcpulse.mcp_initialize_events FINAL;

RENAME TABLE mcpulse.mcp_initialize_events TO mcpulse.mcp_initialize_events_by_month, mcpulse.mcp_initialize_events_by_stream TO mcpulse.mcp_initialize_events;

DROP TABLE IF EXISTS mcpulse.mcp_initialize_events_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.mcp_exceptions_by_stream AS mcpulse.mcp_exceptions
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (tool_name, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.mcp_exceptions_by_stream SELECT * FROM mcpulse.mcp_exceptions FINAL;

RENAME TABLE mcpulse.mcp_exceptions TO mcpulse.mcp_exceptions_by_month, mcpulse.mcp_exceptions_by_stream TO mcpulse.mcp_exceptions;

DROP TABLE IF EXISTS mcpulse.mcp_exceptions_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.other_events_by_stream AS mcpulse.other_events
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (event, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.other_events_by_stream SELECT * FROM mcpulse.other_events FINAL;

RENAME TABLE mcpulse.other_events TO mcpulse.other_events_by_month, mcpulse.other_events_by_stream TO mcpulse.other_events;

DROP TABLE IF EXISTS mcpulse.other_events_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.mcp_feedback_by_stream AS mcpulse.mcp_feedback
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (kind, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.mcp_feedback_by_stream SELECT * FROM mcpulse.mcp_feedback FINAL;

RENAME TABLE mcpulse.mcp_feedback TO mcpulse.mcp_feedback_by_month, mcpulse.mcp_feedback_by_stream TO mcpulse.mcp_feedback;

DROP TABLE IF EXISTS mcpulse.mcp_feedback_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.mcp_resource_prompt_events_by_stream AS mcpulse.mcp_resource_prompt_events
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (kind, name, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.mcp_resource_prompt_events_by_stream SELECT * FROM mcpulse.mcp_resource_prompt_events FINAL;

RENAME TABLE mcpulse.mcp_resource_prompt_events TO mcpulse.mcp_resource_prompt_events_by_month, mcpulse.mcp_resource_prompt_events_by_stream TO mcpulse.mcp_resource_prompt_events;

DROP TABLE IF EXISTS mcpulse.mcp_resource_prompt_events_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.mcp_identify_events_by_stream AS mcpulse.mcp_identify_events
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(timestamp), kafka_partition)
ORDER BY (distinct_id, timestamp, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.mcp_identify_events_by_stream SELECT * FROM mcpulse.mcp_identify_events FINAL;

RENAME TABLE mcpulse.mcp_identify_events TO mcpulse.mcp_identify_events_by_month, mcpulse.mcp_identify_events_by_stream TO mcpulse.mcp_identify_events;

DROP TABLE IF EXISTS mcpulse.mcp_identify_events_by_month;

CREATE TABLE IF NOT EXISTS mcpulse.tools_list_events_by_stream AS mcpulse.tools_list_events
ENGINE = ReplacingMergeTree()
PARTITION BY (toYYYYMM(listed_at), kafka_partition)
ORDER BY (distinct_id, client_name, listed_at, uuid)
SETTINGS replicated_deduplication_window = 1000;

INSERT INTO mcpulse.tools_list_events_by_stream SELECT * FROM mcpulse.tools_list_events FINAL;

RENAME TABLE mcpulse.tools_list_events TO mcpulse.tools_list_events_by_month, mcpulse.tools_list_events_by_stream TO mcpulse.tools_list_events;

DROP TABLE IF EXISTS mcpulse.tools_list_events_by_month;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.recruitment_funnel_daily_mv
TO mcpulse.recruitment_funnel_daily
AS SELECT
    toDate(ifNull(invitation_sent_at, timestamp)) AS day,
    campaign_id,
    feature_flag,
    uniqExactStateIf(invitation_id, kind = 'invitation_sent') AS invitations,
    uniqExactStateIf(distinct_id, kind = 'invitation_sent') AS people,
    uniqExactStateIf(invitation_id, kind = 'link_opened') AS first_opens,
    uniqExactStateIf(invitation_id, kind = 'response' AND response = 'accept') AS accepted,
    uniqExactStateIf(invitation_id, kind = 'response' AND response = 'decline') AS declined,
    uniqExactStateIf(invitation_id, kind = 'response' AND response = 'cancel') AS cancelled,
    uniqExactStateIf(invitation_id, kind = 'response'
        AND isNotNull(invitation_sent_at)
        AND ifNull(responded_at, timestamp) <= ifNull(invitation_sent_at, timestamp) + 600) AS answered
FROM mcpulse.recruitment_events
GROUP BY day, campaign_id, feature_flag;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_tools_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'tool' AS dimension,
    uniqState(folded_tool_name) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls
WHERE folded_tool_name != ''
GROUP BY hour, server_name;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_clients_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'client' AS dimension,
    uniqState(folded_client_name) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls
WHERE folded_client_name != ''
GROUP BY hour, server_name;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_key_paths_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'key_path' AS dimension,
    uniqState(key_path) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls
ARRAY JOIN folded_key_paths AS key_path
WHERE notEmpty(folded_key_paths)
GROUP BY hour, server_name;
