-- The raw tables that no materialized view reads, partitioned by Kafka partition as well as by
-- month (DESIGN.md §5, "Replays dedup at insert"). ClickHouse drops an inserted part whose rows
-- are exactly those of a part it stored before (18.16: replicated tables). A part holds the
-- rows of one partition of one INSERT, so with the Kafka partition in the partition key a batch
-- read again after a crash writes, for each Kafka partition, the part it wrote the first time,
-- whatever other partitions share the INSERT: the replay is dropped even when a rebalance gave
-- the partitions to other members. Partitioned by month only, a part mixed the rows of every
-- partition a member read, and a replay mixed differently was stored again until a merge
-- collapsed it.
--
-- tool_calls and recruitment_events keep their month partitions: materialized views read them
-- (the cardinality overflow and the funnel), and 18.16 skips every view of an INSERT whose last
-- part it dropped as a duplicate, new rows of its other parts included; with parts per Kafka
-- partition a replay would often hold some parts stored before and some not (a sparse table's
-- rows of one partition fit in one chunk), and the views would lose those rows. By month, a
-- replay is dropped whole (the same batch read again as recorded) or not at all.
--
-- A replicated table remembers the blocks of its last replicated_deduplication_window inserted
-- parts (100 by default on 18.16): a part per Kafka partition and month for every batch of every
-- member, so 1,000 keeps a replay within reach for minutes at a busy member's batch rate.
--
-- Each table is rebuilt (ClickHouse cannot change a partition key in place) with the same
-- columns and sort key, its rows copied collapsed (FINAL), then swapped in by RENAME; no view
-- reads them.

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
