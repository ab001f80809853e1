-- Records that a consumer took an epoch (the table was rollup_epochs before migration 0036).
-- Parameters: the epoch.
INSERT INTO mcpulse.rollup_epochs_taken (name, epoch, taken_at) SELECT 'rollups', ?, now()
