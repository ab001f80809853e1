-- Alert instances firing now (the tip of their chain is a firing transition; migration 0029),
-- longest firing first, with the value and summary of the transition. The range does not
-- apply: always now. No parameters.
SELECT rule, labels, firing_since, value_text, summary
FROM mcpulse.alert_state FINAL
WHERE state = 'firing'
ORDER BY firing_since, rule, labels
