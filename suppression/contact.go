package suppression

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/consumers"
	"github.com/mcpulse/mcpulse/ingest"
)

// Contact-policy violation kinds.
const (
	// ViolationSentWhileSuppressed is an invitation sent while the identity had accepted or
	// declined, or was in a cooldown: a gate that failed in the MCP server.
	ViolationSentWhileSuppressed = "sent_while_suppressed"
	// ViolationRepeatWithin7Days is an invitation sent less than 7 days after the identity's
	// previous one.
	ViolationRepeatWithin7Days = "repeat_within_7_days"
)

// RepeatWindow is how soon a second invitation to the same identity counts as a repeat.
const RepeatWindow = 7 * 24 * time.Hour

// Violation is one invitation that broke the contact policy.
type Violation struct {
	Kind                 string    `json:"kind"`
	InvitationID         string    `json:"invitation_id"`
	SentAt               time.Time `json:"sent_at"`
	CampaignID           string    `json:"campaign_id"`
	IdentityHash         string    `json:"identity_hash"`
	DistinctID           string    `json:"distinct_id"`
	StateAtSend          string    `json:"state_at_send,omitempty"`          // for sent_while_suppressed
	PreviousInvitationID string    `json:"previous_invitation_id,omitempty"` // for repeat_within_7_days
}

// CampaignViolations counts one campaign's violations.
type CampaignViolations struct {
	Invitations         int `json:"invitations"`
	SentWhileSuppressed int `json:"sent_while_suppressed"`
	RepeatWithin7Days   int `json:"repeat_within_7_days"`
}

// ContactAudit is the result of AuditContactPolicy.
type ContactAudit struct {
	Since       time.Time                     `json:"since"`
	Invitations int                           `json:"invitations"`
	Violations  []Violation                   `json:"violations"`
	ByCampaign  map[string]CampaignViolations `json:"by_campaign"`
}

// contactEvent is one step of an identity's history, in time order.
type contactEvent struct {
	at                                 time.Time
	kind                               string // "invitation", "response", "reset"
	state, invitationID, campaign, did string
}

// AuditContactPolicy replays the event log to check that suppression was honoured: every
// invitation sent at or after since is judged against the identity's state at that moment
// (its responses and resets before it, whenever they happened) and against its previous
// invitation. The violations are stored in table contact_policy_violations (re-running
// replaces them) unless dryRun.
func AuditContactPolicy(ctx context.Context, ch driver.Conn, since, now time.Time, dryRun bool) (*ContactAudit, error) {
	histories := map[string][]contactEvent{}
	rows, err := ch.Query(ctx, `SELECT identity_hash, kind, `+eventAtMs+`, `+respondedAtMs+`, response, invitation_id, campaign_id, distinct_id
FROM mcpulse.recruitment_events FINAL WHERE kind IN ('invitation_sent', 'response')`)
	if err != nil {
		return nil, fmt.Errorf("read recruitment events: %w", err)
	}
	for rows.Next() {
		var (
			h, kind, response, inv, campaign, did string
			tsMs, respondedMs                     int64
		)
		if err := rows.Scan(&h, &kind, &tsMs, &respondedMs, &response, &inv, &campaign, &did); err != nil {
			rows.Close()
			return nil, err
		}
		e := contactEvent{at: time.UnixMilli(tsMs).UTC(), kind: "invitation", invitationID: inv, campaign: campaign, did: did}
		if kind == ingest.KindInvitationResponse.String() {
			e = contactEvent{at: time.UnixMilli(respondedMs).UTC(), kind: "response", state: consumers.StateFor(response)}
		}
		histories[h] = append(histories[h], e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	// Every reset, not only the last, lifts the suppression in force at its time.
	allResets, err := ch.Query(ctx, `SELECT identity_hash, `+auditAtMs+` FROM mcpulse.suppression_audit FINAL WHERE action = ?`, ingest.AuditActionReset)
	if err != nil {
		return nil, fmt.Errorf("read resets: %w", err)
	}
	for allResets.Next() {
		var (
			h  string
			ms int64
		)
		if err := allResets.Scan(&h, &ms); err != nil {
			allResets.Close()
			return nil, err
		}
		histories[h] = append(histories[h], contactEvent{at: time.UnixMilli(ms).UTC(), kind: "reset"})
	}
	allResets.Close()

	audit := &ContactAudit{Since: since, ByCampaign: map[string]CampaignViolations{}, Violations: []Violation{}}
	for h, events := range histories {
		// Responses and resets take effect before an invitation at the same instant.
		order := map[string]int{"reset": 0, "response": 1, "invitation": 2}
		sort.SliceStable(events, func(i, j int) bool {
			if !events[i].at.Equal(events[j].at) {
				return events[i].at.Before(events[j].at)
			}
			return order[events[i].kind] < order[events[j].kind]
		})
		var (
			permanent    string
			cooldownEnds time.Time
			lastInvite   *contactEvent
		)
		for i := range events {
			e := &events[i]
			switch e.kind {
			case "reset":
				permanent, cooldownEnds = "", time.Time{}
			case "response":
				if e.state == consumers.StateCooldown {
					if end := e.at.Add(consumers.CooldownPeriod); end.After(cooldownEnds) {
						cooldownEnds = end
					}
				} else {
					permanent = e.state
				}
			case "invitation":
				if !e.at.Before(since) {
					c := audit.ByCampaign[e.campaign]
					c.Invitations++
					audit.Invitations++
					state := permanent
					if state == "" && e.at.Before(cooldownEnds) {
						state = consumers.StateCooldown
					}
					if state != "" {
						c.SentWhileSuppressed++
						audit.Violations = append(audit.Violations, Violation{Kind: ViolationSentWhileSuppressed, InvitationID: e.invitationID,
							SentAt: e.at, CampaignID: e.campaign, IdentityHash: h, DistinctID: e.did, StateAtSend: state})
					}
					if lastInvite != nil && e.at.Sub(lastInvite.at) < RepeatWindow && lastInvite.invitationID != e.invitationID {
						c.RepeatWithin7Days++
						audit.Violations = append(audit.Violations, Violation{Kind: ViolationRepeatWithin7Days, InvitationID: e.invitationID,
							SentAt: e.at, CampaignID: e.campaign, IdentityHash: h, DistinctID: e.did, PreviousInvitationID: lastInvite.invitationID})
					}
					audit.ByCampaign[e.campaign] = c
				}
				lastInvite = e
			}
		}
	}
	sort.Slice(audit.Violations, func(i, j int) bool {
		a, b := audit.Violations[i], audit.Violations[j]
		if !a.SentAt.Equal(b.SentAt) {
			return a.SentAt.Before(b.SentAt)
		}
		return a.Kind+a.InvitationID < b.Kind+b.InvitationID
	})
	if dryRun || len(audit.Violations) == 0 {
		return audit, nil
	}
	batch, err := ch.PrepareBatch(ctx, `INSERT INTO mcpulse.contact_policy_violations (kind, invitation_id, sent_at, campaign_id,
identity_hash, distinct_id, state_at_send, previous_invitation_id, detected_at)`)
	if err != nil {
		return nil, fmt.Errorf("store violations: %w", err)
	}
	for _, v := range audit.Violations {
		if err := batch.Append(v.Kind, v.InvitationID, v.SentAt, v.CampaignID, v.IdentityHash, v.DistinctID, v.StateAtSend, v.PreviousInvitationID, now.UTC()); err != nil {
			_ = batch.Abort()
			return nil, fmt.Errorf("BUG: append violation: %w", err)
		}
	}
	if err := batch.Send(); err != nil {
		return nil, fmt.Errorf("store violations: %w", err)
	}
	return audit, nil
}
