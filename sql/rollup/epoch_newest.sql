-- The newest epoch any consumer took (0 before the first); the table was rollup_epochs before
-- migration 0036.
SELECT max(epoch) FROM mcpulse.rollup_epochs_taken
