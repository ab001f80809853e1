-- Closed hours sealed into cells without the Kafka partition (docs/pipeline.md, "Sealed hours
-- and people per gate reason").
-- The consumer's rollup rows are per (partition, cell) (migration 0015): a cell seen in every
-- partition takes one row per partition, and the rows of the long-tailed dimensions (ignored
-- key paths, gate-reason combinations) keep filling the partitions × hours × dimensions as the
-- events grow. A closed hour needs no partition: nothing continues its totals but late events.
--
-- The seal (consumers/rollup.SealClosedHours, run by the scheduler) recomputes each closed hour
-- that needs it from the deduplicated raw table:
--   1. the hour's tool calls (count());
--   2. then its ignored key paths (ignored_key_paths_sealed) and its gate-reason cells' calls
--      and distinct people (gate_reason_people_sealed, migration 0034), stamped sealed_at;
--   3. then one row of rollup_sealed_hours: the hour's tool calls of step 1, the tool calls the
--      rollups counted in the hour when the seal began (events_by_name_hourly's $mcp_tool_call
--      events, summed over partitions) and the sum of those rows' versions, and sealed_at;
--   4. then it deletes the hour's per-partition rows of ignored_key_paths_hourly and
--      gate_reason_calls_hourly.
--
-- From step 3 on, readers never take a sealed hour's cells from the per-partition rows: rows a
-- late event writes there after step 4 are not read, and the next seal deletes them. A sealed
-- hour is current while its tool calls equal those events_by_name_hourly (kept per partition,
-- never deleted) counts in the hour, and no batch has written the hour's rows there since the
-- seal began (the sum of their versions is the seal's); readers then take its cells from the
-- sealed tables, those of its newest seal only. Otherwise (a late event arrived, a batch's raw
-- rows were stored before its rollup rows when the seal counted them, or a replay stored a call
-- again derived otherwise, its count unchanged: the ignored keys a served schema yields depend
-- on the schemas seen) readers recompute the hour from the raw rows, and the next seal (which
-- takes every hour whose rollup rows changed since its seal) seals it again. Step 1 comes
-- before step 2, so the cells of a current seal count at least every call the rollup counts.
--
-- tool_call_stats_hourly and events_by_name_hourly keep their per-partition rows: every cell of
-- the first is used within a few hours, and the second is a few rows per hour.

CREATE TABLE IF NOT EXISTS mcpulse.rollup_sealed_hours
(
    hour DateTime('UTC'),
    tool_calls UInt64,
    rollup_calls UInt64,
    rollup_versions UInt64,
    sealed_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(sealed_at)
ORDER BY hour;

CREATE TABLE IF NOT EXISTS mcpulse.ignored_key_paths_sealed
(
    hour DateTime('UTC'),
    tool_name String,
    server_name String,
    server_version String,
    key_path String,
    occurrences UInt64,
    sealed_at DateTime('UTC')
)
ENGINE = ReplacingMergeTree(sealed_at)
ORDER BY (hour, tool_name, server_name, server_version, key_path);

-- Every sealed hour, its newest seal, and whether it is current: its tool calls equal those the
-- rollups count in the hour now (events_by_name_hourly's $mcp_tool_call events, summed over
-- partitions: a few rows per hour), and those rows are the ones the seal saw (their versions'
-- sum, which wraps: every row a batch writes has a higher version than the one it replaces).
CREATE VIEW IF NOT EXISTS mcpulse.v_rollup_sealed_hours
AS SELECT
    hour,
    tool_calls,
    rollup_calls AS rollup_calls_at_seal,
    rollup_calls_now,
    (tool_calls = rollup_calls_now AND rollup_versions = rollup_versions_now) AS current,
    sealed_at
FROM
(
    SELECT hour, tool_calls, rollup_calls, rollup_versions, sealed_at
    FROM mcpulse.rollup_sealed_hours FINAL
) AS sealed
ANY LEFT JOIN
(
    SELECT hour, sum(events) AS rollup_calls_now, sum(version) AS rollup_versions_now
    FROM mcpulse.events_by_name_hourly FINAL
    WHERE event = '$mcp_tool_call'
    GROUP BY hour
) AS counted USING (hour);

-- The hours in which the rollups count tool calls and which have no current seal: readers take
-- their people (and, for an out-of-date seal, their cells) from the raw rows.
CREATE VIEW IF NOT EXISTS mcpulse.v_rollup_unsealed_hours
AS SELECT DISTINCT hour
FROM mcpulse.events_by_name_hourly
WHERE event = '$mcp_tool_call' AND events > 0
    AND hour NOT IN (SELECT hour FROM mcpulse.v_rollup_sealed_hours WHERE current);

-- Same columns as before (migration 0015): unsealed hours from the per-partition rows, current
-- seals from ignored_key_paths_sealed, out-of-date seals from the raw rows of their hours (as
-- sql/queries/recompute_ignored_key_paths.sql counts them).
DROP TABLE IF EXISTS mcpulse.v_ignored_keys_hourly;
DROP TABLE IF EXISTS mcpulse.v_ignored_key_paths_hourly;

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_key_paths_hourly
AS SELECT
    hour,
    tool_name,
    server_name,
    server_version,
    key_path,
    sum(occurrences) AS occurrences
FROM
(
    SELECT hour, tool_name, server_name, server_version, key_path, occurrences
    FROM mcpulse.ignored_key_paths_hourly FINAL
    WHERE hour NOT IN (SELECT hour FROM mcpulse.rollup_sealed_hours)
    UNION ALL
    SELECT hour, tool_name, server_name, server_version, key_path, occurrences
    FROM mcpulse.ignored_key_paths_sealed FINAL
    WHERE (hour, sealed_at) IN (SELECT hour, sealed_at FROM mcpulse.v_rollup_sealed_hours WHERE current)
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, tool_name, server_name, server_version, key_path, toUInt64(1) AS occurrences
    FROM mcpulse.tool_calls FINAL
    ARRAY JOIN arrayDistinct(counted_ignored_keys) AS key_path
    WHERE is_error = 0 AND ignored_keys_source != 'not_measurable'
        AND timestamp >= (SELECT min(hour) FROM mcpulse.v_rollup_sealed_hours WHERE NOT current)
        AND timestamp < (SELECT max(hour) FROM mcpulse.v_rollup_sealed_hours WHERE NOT current) + 3600
        AND toStartOfHour(timestamp) IN (SELECT hour FROM mcpulse.v_rollup_sealed_hours WHERE NOT current)
)
GROUP BY hour, tool_name, server_name, server_version, key_path
HAVING occurrences > 0;

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_keys_hourly
AS SELECT
    hour,
    tool_name,
    key_path,
    sum(occurrences) AS occurrences
FROM mcpulse.v_ignored_key_paths_hourly
GROUP BY hour, tool_name, key_path
HAVING occurrences > 0;

-- The calls of every gate-reason cell with calls, support as stored (2: unknown): unsealed
-- hours from the per-partition rows, current seals from gate_reason_people_sealed, out-of-date
-- seals from the raw rows of their hours. The panels that need no people read this.
CREATE VIEW IF NOT EXISTS mcpulse.v_gate_reason_calls_hourly
AS SELECT
    hour,
    campaign_id,
    reason,
    client_name,
    url_support,
    form_support,
    sum(calls) AS calls
FROM
(
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls
    FROM mcpulse.gate_reason_calls_hourly FINAL
    WHERE hour NOT IN (SELECT hour FROM mcpulse.rollup_sealed_hours)
    UNION ALL
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls
    FROM mcpulse.gate_reason_people_sealed FINAL
    WHERE (hour, sealed_at) IN (SELECT hour, sealed_at FROM mcpulse.v_rollup_sealed_hours WHERE current)
    UNION ALL
    SELECT toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason AS reason, client_name,
        ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support, toUInt64(1) AS calls
    FROM mcpulse.tool_calls FINAL
    WHERE recruitment_reason != ''
        AND timestamp >= (SELECT min(hour) FROM mcpulse.v_rollup_sealed_hours WHERE NOT current)
        AND timestamp < (SELECT max(hour) FROM mcpulse.v_rollup_sealed_hours WHERE NOT current) + 3600
        AND toStartOfHour(timestamp) IN (SELECT hour FROM mcpulse.v_rollup_sealed_hours WHERE NOT current)
)
GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
HAVING calls > 0;

-- Same columns as before (migrations 0003, 0015 and 0034). Current seals give calls and people;
-- every other hour counts its people from the raw rows of its hour (distinct_id is the same in
-- every copy of a redelivered row, so no FINAL is needed for it), its calls as
-- v_gate_reason_calls_hourly does.
DROP TABLE IF EXISTS mcpulse.v_gate_reasons_hourly;
DROP TABLE IF EXISTS mcpulse.v_gate_reason_unsealed_hours;

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
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls, people
    FROM mcpulse.gate_reason_people_sealed FINAL
    WHERE (hour, sealed_at) IN (SELECT hour, sealed_at FROM mcpulse.v_rollup_sealed_hours WHERE current) AND calls > 0
    UNION ALL
    SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls, raw_people AS people
    FROM
    (
        SELECT hour, campaign_id, reason, client_name, url_support, form_support, calls
        FROM mcpulse.v_gate_reason_calls_hourly
        WHERE hour NOT IN (SELECT hour FROM mcpulse.v_rollup_sealed_hours WHERE current)
    ) AS counted
    ANY LEFT JOIN
    (
        SELECT toStartOfHour(timestamp) AS hour, campaign_id, recruitment_reason AS reason, client_name,
            ifNull(url_supported, 2) AS url_support, ifNull(form_supported, 2) AS form_support,
            uniqExact(distinct_id) AS raw_people
        FROM mcpulse.tool_calls
        WHERE recruitment_reason != ''
            AND timestamp >= (SELECT min(hour) FROM mcpulse.v_rollup_unsealed_hours)
            AND timestamp < (SELECT max(hour) FROM mcpulse.v_rollup_unsealed_hours) + 3600
            AND toStartOfHour(timestamp) IN (SELECT hour FROM mcpulse.v_rollup_unsealed_hours)
        GROUP BY hour, campaign_id, reason, client_name, url_support, form_support
    ) AS unsealed USING (hour, campaign_id, reason, client_name, url_support, form_support)
);
