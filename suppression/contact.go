package suppression

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	sqlq "github.com/mcpulse/mcpulse/sql"
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

// contactHistory is one identity's recruitment history: invitations, responses and resets.
type contactHistory struct {
	invitations []contactInvitation
	responses   []Response
	resets      []time.Time
}

type contactInvitation struct {
	at                          time.Time
	invitationID, campaign, did string
}

// AuditContactPolicy replays the event log to check that suppression was honoured: every
// invitation sent at or after since is judged against the identity's state at that moment
// and against its previous invitation. The state at an invitation is the Fold of the
// identity's responses dated at or before it, under its last reset at or before it, at the
// invitation's time (so a cooldown ending exactly then no longer holds); responses and resets
// at the same instant as the invitation count before it. The violations are stored in table
// contact_policy_violations (re-running replaces them) unless dryRun.
func AuditContactPolicy(ctx context.Context, ch driver.Conn, since, now time.Time, dryRun bool) (*ContactAudit, error) {
	histories := map[string]*contactHistory{}
	history := func(h string) *contactHistory {
		if histories[h] == nil {
			histories[h] = &contactHistory{}
		}
		return histories[h]
	}
	if err := eachResponse(ctx, ch, func(h string, r Response) {
		history(h).responses = append(history(h).responses, r)
	}); err != nil {
		return nil, err
	}
	// Every reset, not only the last, lifts the suppression in force at its time.
	if err := eachReset(ctx, ch, func(h string, m resetMark) {
		history(h).resets = append(history(h).resets, m.at)
	}); err != nil {
		return nil, err
	}
	rows, err := ch.Query(ctx, sqlq.Query("suppression_invitations"))
	if err != nil {
		return nil, fmt.Errorf("read invitations: %w", err)
	}
	for rows.Next() {
		var (
			h  string
			ms int64
			i  contactInvitation
		)
		if err := rows.Scan(&h, &i.did, &i.campaign, &i.invitationID, &ms); err != nil {
			rows.Close()
			return nil, fmt.Errorf("read invitations: %w", err)
		}
		i.at = time.UnixMilli(ms).UTC()
		history(h).invitations = append(history(h).invitations, i)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read invitations: %w", err)
	}

	audit := &ContactAudit{Since: since, ByCampaign: map[string]CampaignViolations{}, Violations: []Violation{}}
	for h, hist := range histories {
		sort.SliceStable(hist.invitations, func(i, j int) bool { return hist.invitations[i].at.Before(hist.invitations[j].at) })
		sort.SliceStable(hist.responses, func(i, j int) bool { return hist.responses[i].At.Before(hist.responses[j].At) })
		var lastInvite *contactInvitation
		for i := range hist.invitations {
			e := &hist.invitations[i]
			if !e.at.Before(since) {
				c := audit.ByCampaign[e.campaign]
				c.Invitations++
				audit.Invitations++
				if state := hist.stateAt(e.at); state != "" {
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

// stateAt is the identity's suppression state at t ("" when none): the Fold of its responses
// dated at or before t under its last reset at or before t. responses must be sorted by time.
func (hist *contactHistory) stateAt(t time.Time) string {
	var reset *time.Time
	for i := range hist.resets {
		if r := &hist.resets[i]; !r.After(t) && (reset == nil || r.After(*reset)) {
			reset = r
		}
	}
	n := sort.Search(len(hist.responses), func(i int) bool { return hist.responses[i].At.After(t) })
	if win := Fold(reset, hist.responses[:n], t); win >= 0 {
		return hist.responses[win].Record.Response
	}
	return ""
}
