-- Rollups as plain counts, written idempotently (docs/pipeline.md, "Rollups as cumulative
-- totals"). The uniqExact states of migration 0002 held every event's uuid, so their storage
-- (and every merge of it) grew with the events. These tables grow with hours × dimensions:
--
-- The consumer writes, for each Kafka partition it reads (kafka_topic, kafka_partition) and each
-- rollup cell a batch touches, the cell's CUMULATIVE totals over that partition's events up to
-- offset as_of (exclusive). "The total of a cell as of offset o" is a fact about the partition's
-- log, so every row ever written is true, and a replayed batch writes the same facts again.
-- ReplacingMergeTree(version) keeps each (partition, cell)'s newest row; readers take it (FINAL)
-- and sum over partitions. version rises across consumer-group generations (rollup_epochs), so
-- a replay always supersedes what it replays. `before` and before_as_of keep the totals the row
-- replaced (measures in column order, then the array measure's elements): when a member takes a
-- partition over, a row whose as_of is beyond the committed offset was written by a batch that
-- was never committed, and its `before` is the committed total to continue from (or to reset to,
-- when the replay does not touch the cell again).
--
-- Storage: one row per (partition, cell) after merges. Sort keys start with the partition, so a
-- member reads its partitions' cells through the primary index. Hours are UTC. The tables have
-- no partition key: they are small (hours × dimensions, not events), and one INSERT may write at
-- most 100 partitions on current ClickHouse, which a monthly key would make a limit on how many
-- months one batch (or this migration's backfill) may span.

CREATE TABLE IF NOT EXISTS mcpulse.tool_call_stats_hourly
(
    kafka_topic String,
    kafka_partition Int32,
    hour DateTime('UTC'),
    tool_name String,
    client_name String,
    server_name String,
    server_version String,
    calls UInt64,
    errors UInt64,
    successful_calls UInt64,
    measurable_calls UInt64,
    calls_with_ignored_keys UInt64,
    keys_reported UInt64,
    keys_from_response UInt64,
    keys_from_schema UInt64,
    not_measurable_no_schema UInt64,
    not_measurable_truncated UInt64,
    not_measurable_other UInt64,
    validation_errors UInt64,
    unknown_tool_calls UInt64,
    duration_count UInt64,
    duration_sum_us UInt64,
    duration_buckets Array(UInt64),
    as_of Int64,
    before Array(UInt64),
    before_as_of Int64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (kafka_topic, kafka_partition, hour, tool_name, client_name, server_name, server_version);

CREATE TABLE IF NOT EXISTS mcpulse.ignored_key_paths_hourly
(
    kafka_topic String,
    kafka_partition Int32,
    hour DateTime('UTC'),
    tool_name String,
    server_name String,
    server_version String,
    key_path String,
    occurrences UInt64,
    as_of Int64,
    before Array(UInt64),
    before_as_of Int64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (kafka_topic, kafka_partition, hour, tool_name, server_name, server_version, key_path);

CREATE TABLE IF NOT EXISTS mcpulse.gate_reason_calls_hourly
(
    kafka_topic String,
    kafka_partition Int32,
    hour DateTime('UTC'),
    campaign_id String,
    reason String,
    client_name String,
    url_support UInt8,
    form_support UInt8,
    calls UInt64,
    as_of Int64,
    before Array(UInt64),
    before_as_of Int64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (kafka_topic, kafka_partition, hour, campaign_id, reason, client_name, url_support, form_support);

CREATE TABLE IF NOT EXISTS mcpulse.events_by_name_hourly
(
    kafka_topic String,
    kafka_partition Int32,
    hour DateTime('UTC'),
    event String,
    events UInt64,
    as_of Int64,
    before Array(UInt64),
    before_as_of Int64,
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (kafka_topic, kafka_partition, hour, event);

-- People per gate reason cell: a set, so not a count the consumer can add up. A bounded sketch
-- (uniq: exact below 65,536 distinct ids per state, then an adaptive sample of that size) over
-- distinct_id, filled by a materialized view from tool_calls: adding an id twice changes
-- nothing, so a replayed insert counts once.
CREATE TABLE IF NOT EXISTS mcpulse.gate_reason_people_hourly
(
    hour DateTime('UTC'),
    campaign_id String,
    reason String,
    client_name String,
    url_support UInt8,
    form_support UInt8,
    people AggregateFunction(uniq, String)
)
ENGINE = AggregatingMergeTree()
ORDER BY (hour, campaign_id, reason, client_name, url_support, form_support);

CREATE MATERIALIZED VIEW IF NOT EXISTS mcpulse.gate_reason_people_hourly_mv
TO mcpulse.gate_reason_people_hourly
AS SELECT
    toStartOfHour(timestamp) AS hour,
    campaign_id,
    recruitment_reason AS reason,
    client_name,
    ifNull(url_supported, 2) AS url_support,
    ifNull(form_supported, 2) AS form_support,
    uniqState(distinct_id) AS people
FROM mcpulse.tool_calls
WHERE recruitment_reason != ''
GROUP BY hour, campaign_id, reason, client_name, url_support, form_support;

-- The epoch of each consumer-group generation a member stored in: the high 32 bits of every
-- rollup row's version. A member takes max(epoch) + 1 when a generation starts and records it
-- before it writes, so its rows supersede every row written before the rebalance that gave it
-- its partitions (Kafka's own generation ids restart when a group's state is lost).
CREATE TABLE IF NOT EXISTS mcpulse.rollup_epochs
(
    name String,
    epoch UInt64,
    taken_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(epoch)
ORDER BY name;

-- Before a batch's rollup rows, the consumer records per partition the batch's end offset and
-- the hours its rows fall in (one row per partition and batch; ReplacingMergeTree keeps the
-- newest). A member that takes the partition over at a committed offset below as_of resets the
-- cells of those hours whose newest row is beyond it: the batch was stored but not committed.
CREATE TABLE IF NOT EXISTS mcpulse.rollup_writes
(
    kafka_topic String,
    kafka_partition Int32,
    as_of Int64,
    hours Array(DateTime('UTC')),
    version UInt64
)
ENGINE = ReplacingMergeTree(version)
ORDER BY (kafka_topic, kafka_partition);

-- The upper bounds of the duration buckets, in milliseconds (the last is +inf): bucket i of
-- duration_buckets counts the calls with bounds[i-1] < duration_ms <= bounds[i]. The consumer
-- holds the same list (rollup.DurationBucketBoundsMs; a test compares them).
CREATE VIEW IF NOT EXISTS mcpulse.v_duration_bucket_bounds
AS SELECT [5., 10., 25., 50., 100., 250., 500., 1000., 2500., 5000., 10000., 30000., 60000., inf] AS bounds;

-- Today's rollups, recomputed from the deduplicated raw table as the pseudo-partition -1 of
-- topic '' (as_of 0, version 0), so the views keep their history. Stop the consumers while this
-- migration runs: an event stored before it and replayed after it would be counted twice.
INSERT INTO mcpulse.tool_call_stats_hourly (kafka_topic, kafka_partition, hour, tool_name, client_name,
    server_name, server_version, calls, errors, successful_calls, measurable_calls, calls_with_ignored_keys,
    keys_reported, keys_from_response, keys_from_schema, not_measurable_no_schema, not_measurable_truncated,
    not_measurable_other, validation_errors, unknown_tool_calls, duration_count, duration_sum_us,
    duration_buckets, as_of, before, before_as_of, version)
SELECT '', -1, hour, tool_name, client_name, server_name, server_version,
    count(),
    countIf(is_error = 1),
    countIf(is_error = 0),
    countIf(measurable),
    countIf(measurable AND notEmpty(counted_ignored_keys)),
    countIf(is_error = 0 AND ignored_keys_source = 'reported'),
    countIf(is_error = 0 AND ignored_keys_source = 'response'),
    countIf(is_error = 0 AND ignored_keys_source = 'schema'),
    countIf(not_measured AND ignored_keys_reason = 'no_schema'),
    countIf(not_measured AND ignored_keys_reason IN ('arguments_truncated', 'arguments_redacted', 'schema_truncated')),
    countIf(not_measured AND ignored_keys_reason NOT IN ('no_schema', 'arguments_truncated', 'arguments_redacted', 'schema_truncated')),
    countIf(startsWith(error_class, 'validation_')),
    countIf(unknown_tool = 1 OR error_class = 'unknown_tool'),
    countIf(isNotNull(duration_ms)),
    sum(toUInt64(least(ifNull(duration_ms, 0.), 1e12) * 1000)),
    sumForEach(buckets), 0, [], 0, 0
FROM
(
    SELECT toStartOfHour(timestamp) AS hour, tool_name, client_name, server_name, server_version, is_error,
        is_error = 0 AND ignored_keys_source != 'not_measurable' AS measurable,
        is_error = 0 AND ignored_keys_source = 'not_measurable' AS not_measured,
        ignored_keys_source, ignored_keys_reason, error_class, unknown_tool, counted_ignored_keys, duration_ms,
        arrayMap(i -> toUInt64(isNotNull(duration_ms) AND i = arrayFirstIndex(b -> ifNull(duration_ms, 0.) <= b,
            (SELECT bounds FROM mcpulse.v_duration_bucket_bounds))), arrayEnumerate((SELECT bounds FROM mcpulse.v_duration_bucket_bounds))) AS buckets
    FROM mcpulse.tool_calls FINAL
)
GROUP BY hour, tool_name, client_name, server_name, server_version;

INSERT INTO mcpulse.ignored_key_paths_hourly (kafka_topic, kafka_partition, hour, tool_name, server_name,
    server_version, key_path, occurrences, as_of, before, before_as_of, version)
SELECT '', -1, toStartOfHour(timestamp) AS hour, tool_name, server_name, server_version, key_path, count(), 0, [], 0, 0
FROM
(
    SELECT timestamp, tool_name, server_name, server_version, arrayDistinct(counted_ignored_keys) AS keys
    FROM mcpulse.tool_calls FINAL
    WHERE is_error = 0 AND ignored_keys_source != 'not_measurable'
)
ARRAY JOIN keys AS key_path
GROUP BY hour, tool_name, server_name, server_version, key_path;

INSERT INTO mcpulse.gate_reason_calls_hourly (kafka_topic, kafka_partition, hour, campaign_id, reason,
    client_name, url_support, form_support, calls, as_of, before, before_as_of, version)
SELECT '', -1, toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason, client_name,
    ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support, count(), 0, [], 0, 0
FROM mcpulse.tool_calls FINAL
WHERE recruitment_reason != ''
GROUP BY hour, campaign_id, recruitment_reason, client_name, url_support, form_support;

INSERT INTO mcpulse.gate_reason_people_hourly (hour, campaign_id, reason, client_name, url_support, form_support, people)
SELECT toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason, client_name,
    ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support, uniqState(distinct_id)
FROM mcpulse.tool_calls FINAL
WHERE recruitment_reason != ''
GROUP BY hour, campaign_id, recruitment_reason, client_name, url_support, form_support;

INSERT INTO mcpulse.events_by_name_hourly (kafka_topic, kafka_partition, hour, event, events, as_of, before, before_as_of, version)
SELECT '', -1, hour, event, count(), 0, [], 0, 0
FROM
(
    SELECT toStartOfHour(timestamp) AS hour, '$mcp_tool_call' AS event FROM mcpulse.tool_calls FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, multiIf(kind = 'invitation_sent', 'mcp interview invitation sent',
        kind = 'link_opened', 'mcp interview booking link opened', 'mcp interview invitation responded') AS event
    FROM mcpulse.recruitment_events FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, '$mcp_initialize' AS event FROM mcpulse.mcp_initialize_events FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, '$exception' AS event FROM mcpulse.mcp_exceptions FINAL
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, event FROM mcpulse.other_events FINAL
)
GROUP BY hour, event;

-- The uniqExact rollups, their materialized views and the seal of closed hours (0007) give way.
DROP TABLE IF EXISTS mcpulse.ignored_key_rates_hourly_mv;
DROP TABLE IF EXISTS mcpulse.ignored_keys_hourly_mv;
DROP TABLE IF EXISTS mcpulse.gate_reasons_hourly_mv;
DROP TABLE IF EXISTS mcpulse.v_ignored_key_rates_hourly;
DROP TABLE IF EXISTS mcpulse.v_ignored_keys_hourly;
DROP TABLE IF EXISTS mcpulse.v_gate_reasons_hourly;
DROP TABLE IF EXISTS mcpulse.v_ignored_key_rate_counts_hourly;
DROP TABLE IF EXISTS mcpulse.ignored_key_rates_hourly;
DROP TABLE IF EXISTS mcpulse.ignored_keys_hourly;
DROP TABLE IF EXISTS mcpulse.gate_reasons_hourly;
DROP TABLE IF EXISTS mcpulse.ignored_key_rates_hourly_sealed;
DROP TABLE IF EXISTS mcpulse.rollup_seals;

-- The views readers use: plain summed columns, one row per cell with any event. Each takes the
-- newest row of every (partition, cell) with FINAL, then sums over partitions.

CREATE VIEW IF NOT EXISTS mcpulse.v_tool_call_stats_hourly
AS SELECT
    hour,
    tool_name,
    client_name,
    server_name,
    server_version,
    sum(calls) AS calls,
    sum(errors) AS errors,
    sum(successful_calls) AS successful_calls,
    sum(measurable_calls) AS measurable_calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    sum(keys_reported) AS keys_reported,
    sum(keys_from_response) AS keys_from_response,
    sum(keys_from_schema) AS keys_from_schema,
    sum(not_measurable_no_schema) AS not_measurable_no_schema,
    sum(not_measurable_truncated) AS not_measurable_truncated,
    sum(not_measurable_other) AS not_measurable_other,
    sum(validation_errors) AS validation_errors,
    sum(unknown_tool_calls) AS unknown_tool_calls,
    sum(duration_count) AS duration_count,
    sum(duration_sum_us) / 1000 AS duration_sum_ms,
    sumForEach(duration_buckets) AS duration_buckets,
    if(measurable_calls = 0, NULL, calls_with_ignored_keys / measurable_calls) AS ignored_key_rate
FROM mcpulse.tool_call_stats_hourly FINAL
GROUP BY hour, tool_name, client_name, server_name, server_version
HAVING calls > 0;

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_key_paths_hourly
AS SELECT
    hour,
    tool_name,
    server_name,
    server_version,
    key_path,
    sum(occurrences) AS occurrences
FROM mcpulse.ignored_key_paths_hourly FINAL
GROUP BY hour, tool_name, server_name, server_version, key_path
HAVING occurrences > 0;

CREATE VIEW IF NOT EXISTS mcpulse.v_events_by_name_hourly
AS SELECT
    hour,
    event,
    sum(events) AS events
FROM mcpulse.events_by_name_hourly FINAL
GROUP BY hour, event
HAVING events > 0;

-- The analyst views of migration 0003 (and 0008), same columns, over the new tables. The
-- ignored-key rate divides by the calls whose ignored keys could be measured.
CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_key_rates_hourly
AS SELECT
    hour,
    tool_name,
    client_name,
    sum(successful_calls) AS successful_calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys,
    if(sum(measurable_calls) = 0, 0., calls_with_ignored_keys / sum(measurable_calls)) AS ignored_key_rate
FROM mcpulse.tool_call_stats_hourly FINAL
GROUP BY hour, tool_name, client_name
HAVING sum(calls) > 0;

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_key_rate_counts_hourly
AS SELECT
    hour,
    tool_name,
    client_name,
    sum(successful_calls) AS successful_calls,
    sum(calls_with_ignored_keys) AS calls_with_ignored_keys
FROM mcpulse.tool_call_stats_hourly FINAL
GROUP BY hour, tool_name, client_name
HAVING sum(calls) > 0;

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_keys_hourly
AS SELECT
    hour,
    tool_name,
    key_path,
    sum(occurrences) AS occurrences
FROM mcpulse.ignored_key_paths_hourly FINAL
GROUP BY hour, tool_name, key_path
HAVING occurrences > 0;

CREATE VIEW IF NOT EXISTS mcpulse.v_gate_reasons_hourly
AS SELECT
    hour,
    campaign_id,
    reason,
    client_name,
    if(url_support = 2, NULL, url_support) AS url_supported,
    if(form_support = 2, NULL, form_support) AS form_supported,
    calls,
    people
FROM
(
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, sum(calls) AS calls
    FROM mcpulse.gate_reason_calls_hourly FINAL
    GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
    HAVING calls > 0
) AS counted
ANY LEFT JOIN
(
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, uniqMerge(people) AS people
    FROM mcpulse.gate_reason_people_hourly
    GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
) AS sketched USING (hour, campaign_id, reason, client_name, url_support, form_support);
