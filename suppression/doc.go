// Package suppression holds the ops side of interview suppression (DESIGN.md §3): inspecting
// and resetting one identity's records, listing records with SCAN, rebuilding Redis from the
// ClickHouse response history and reset audit (reconcile), and checking in the event log that
// suppression was honoured (the contact-policy audit). The consumers keep the records current;
// the key formats and the precedence script live in package consumers.
package suppression
