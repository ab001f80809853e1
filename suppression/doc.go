// Package suppression is the one home of interview suppression (DESIGN.md §3).
//
// The rules: the Redis key formats shared with the MCP servers (ResponseKey, ResetKey,
// PendingKey), the record states and their JSON Record, the cooldown, the reset rule
// (ResetCovers), and the precedence fold (Held.Apply, Fold) with its Lua twin, the script the
// consumers run for every response (ApplyCall, ApplyResponse). The fold and the script are
// checked against each other over one table of cases (testdata/precedence.yaml).
//
// The ops side: inspecting and resetting one identity's records (Show, Reset), listing
// records with SCAN (List), rebuilding Redis from the ClickHouse response history and reset
// audit (Reconcile), and checking in the event log that suppression was honoured
// (AuditContactPolicy). Reconcile and the audit decide with the same Fold.
package suppression
