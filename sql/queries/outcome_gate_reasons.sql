-- Every row of the gate reasons rollup; NULL capability flags mean unknown.
SELECT hour, campaign_id, reason, client_name, url_supported, form_supported, calls, people
FROM mcpulse.v_gate_reasons_hourly
