-- The materialized views that read tool_calls and recruitment_events (the cardinality overflow
-- and the funnel) read Null feed tables instead, and those two raw tables are partitioned by
-- Kafka partition as well as by month, as migration 0044 did to the others (DESIGN.md §5,
-- "Replays dedup at insert"), so that a replicated server drops a replayed batch of them too.
--
-- ClickHouse 18.16 skips every view of an INSERT whose part it drops as a duplicate, whatever
-- the views received the first time: when the first INSERT's part committed and its view
-- insert failed (ZooKeeper lost mid-INSERT), a replay dropped as a duplicate never fed the
-- views, which lost its rows. So these two tables were stored again on every replay
-- (insert_deduplicate = 0) and kept their month partitions. A view over a Null table is fed by
-- every INSERT into it, which drops nothing: the consumer inserts a batch's rows the views need
-- into the feed, then into the raw table, so a raw part never commits before the views were
-- fed, and a replay feeds them again, which changes nothing (their states count distinct ids).
-- tool_calls_feed gets only the calls with a folded value (the overflow views filter on them),
-- recruitment_events_feed every event.
--
-- The feeds have their raw table's columns (AS): the consumer inserts a batch's rows into both
-- with one column list, so a column a later migration adds to tool_calls or recruitment_events
-- must be added to its feed too (migrations TestViewFeedsHaveTheirRawTablesColumns).
--
-- The views are dropped and made again, identical but for their source; rows the consumer
-- stores between the two (a consumer left running through the migration) reach no view. Then
-- each raw table is rebuilt as 0044 rebuilt the others: the same columns and sort key,
-- partitioned by (toYYYYMM(timestamp), kafka_partition), replicated_deduplication_window =
-- 1000, its rows copied collapsed (FINAL), then swapped in by RENAME; no view reads them any
-- more.

CREATE TABLE IF NOT EXISTS mcpulse.tool_calls_feed AS mcpulse.tool_calls
ENGINE = Null;

CREATE TABLE IF NOT EXISTS mcpulse.recruitment_events_feed AS mcpulse.recruitment_events
ENGINE = Null;

DROP TABLE IF EXISTS mcpulse.cardinality_overflow_tools_mv;

DROP TABLE IF EXISTS mcpulse.cardinality_overflow_clients_mv;

DROP TABLE IF EXISTS mcpulse.cardinality_overflow_key_paths_mv;

DROP TABLE IF EXISTS mcpulse.recruitment_funnel_daily_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.cardinality_overflow_tools_mv
TO mcpulse.cardinality_overflow_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    server_name,
    'tool' AS dimension,
    uniqState(folded_tool_name) AS folded_values,
    uniqState(toString(uuid)) AS folded_calls
FROM mcpulse.tool_calls_feed
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
FROM mcpulse.tool_calls_feed
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
FROM mcpulse.tool_calls_feed
ARRAY JOIN folded_key_paths AS key_path
WHERE notEmpty(folded_key_paths)
GROUP BY hour, server_name;

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
FROM mcpulse.recruitment_events_feed
GROUP BY day, campaign_id, feature_flag;

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
