-- Analyst views (DESIGN.md §4): the columns are a contract; the storage behind them may change.

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_key_rates_hourly
AS SELECT
    hour,
    tool_name,
    client_name,
    uniqExactMerge(successful_calls) AS successful_calls,
    uniqExactMerge(calls_with_ignored_keys) AS calls_with_ignored_keys,
    if(successful_calls = 0, 0., calls_with_ignored_keys / successful_calls) AS ignored_key_rate
FROM mcpulse.ignored_key_rates_hourly
GROUP BY hour, tool_name, client_name;

CREATE VIEW IF NOT EXISTS mcpulse.v_ignored_keys_hourly
AS SELECT
    hour,
    tool_name,
    key_path,
    uniqExactMerge(occurrences) AS occurrences
FROM mcpulse.ignored_keys_hourly
GROUP BY hour, tool_name, key_path;

CREATE VIEW IF NOT EXISTS mcpulse.v_gate_reasons_hourly
AS SELECT
    hour,
    campaign_id,
    reason,
    client_name,
    if(url_support = 2, NULL, url_support) AS url_supported,
    if(form_support = 2, NULL, form_support) AS form_supported,
    uniqExactMerge(calls) AS calls,
    uniqExactMerge(people) AS people
FROM mcpulse.gate_reasons_hourly
GROUP BY hour, campaign_id, reason, client_name, url_support, form_support;

CREATE VIEW IF NOT EXISTS mcpulse.v_recruitment_funnel_daily
AS SELECT
    day,
    campaign_id,
    feature_flag,
    uniqExactMerge(invitations) AS invitations,
    uniqExactMerge(people) AS people,
    uniqExactMerge(first_opens) AS first_opens,
    uniqExactMerge(accepted) AS accepted,
    uniqExactMerge(declined) AS declined,
    uniqExactMerge(cancelled) AS cancelled,
    invitations - uniqExactMerge(answered) AS unanswered
FROM mcpulse.recruitment_funnel_daily
GROUP BY day, campaign_id, feature_flag;
