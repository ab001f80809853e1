package suppression

import (
	"encoding/json"
	"time"
)

// Outcome is what applying one response to an identity's record did.
type Outcome string

// Outcomes of Held.Apply and of the script (ApplyResponse), in the order the rules are checked.
const (
	BeforeReset   Outcome = "before_reset"   // covered by the identity's ops reset (ResetCovers)
	Expired       Outcome = "expired"        // a cooldown whose end has already passed
	KeptPermanent Outcome = "kept_permanent" // a cooldown never replaces accepted or declined
	Older         Outcome = "older"          // not above the record held (replays land here)
	Written       Outcome = "written"        // the record was created or replaced
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{Written, Older, KeptPermanent, Expired, BeforeReset}

// Response is one invitation response as the rules see it: the record it would write and its
// responded_at, cut to milliseconds (the script's unit).
type Response struct {
	Record Record
	At     time.Time
}

// NewResponse is the Response of an invitation response event: response is "accept",
// "decline" or "cancel" (ingest.Response*), respondedAt its responded_at.
func NewResponse(distinctID, campaignID, response string, respondedAt time.Time) Response {
	at := time.UnixMilli(respondedAt.UnixMilli()).UTC()
	return Response{At: at, Record: Record{DistinctID: distinctID, CampaignID: campaignID,
		Response: StateFor(response), RespondedAt: FormatTime(at)}}
}

// Value is the record's JSON text: what the script stores, and the tie-breaker between two
// responses at the same millisecond.
func (r Response) Value() string {
	data, _ := json.Marshal(r.Record) // a struct of strings always marshals
	return string(data)
}

// TTL is how long the record r writes lives at now: CooldownPeriod from responded_at for a
// cooldown, 0 (no TTL) for a permanent state.
func (r Response) TTL(now time.Time) time.Duration {
	if Permanent(r.Record.Response) {
		return 0
	}
	return time.Duration(r.At.UnixMilli()+CooldownPeriod.Milliseconds()-now.UnixMilli()) * time.Millisecond
}

// Held is what Redis holds for one identity, as the precedence rules read it.
type Held struct {
	// Record is the :response value as stored ("" when there is none). It need not be a
	// Record this package wrote: a value that is not a JSON object with a readable
	// responded_at (ParseTime) is replaced by any response.
	Record string
	// ResetAt is the reset_at of the identity's :reset watermark, nil when there is none or
	// it cannot be read (ParseResetValue).
	ResetAt *time.Time
}

// Apply is the precedence rule of DESIGN.md §3 for one response, the Go twin of the script
// (script.go), checked against it over one table of cases (testdata/precedence.yaml). It
// updates h.Record when the response is written. In order:
//
//  1. a response covered by the reset (ResetCovers) changes nothing: BeforeReset;
//  2. a cooldown that has ended by now (CooldownEnded) is not written: Expired;
//  3. a cooldown never replaces a permanent state (accepted, declined): KeptPermanent;
//  4. otherwise the response is written if it is above the held record: a permanent state is
//     above a cooldown, and within a class a later responded_at is above an earlier one; at
//     the same millisecond the greater record text (Value) is above, so an identical replay
//     is not: Older.
//
// The rules keep the maximum of a total order, so the record an identity ends with does not
// depend on the order its responses arrive in (Fold).
func (h *Held) Apply(r Response, now time.Time) Outcome {
	if h.ResetAt != nil && ResetCovers(*h.ResetAt, r.At) {
		return BeforeReset
	}
	permanent := Permanent(r.Record.Response)
	if !permanent && CooldownEnded(r.At, now) {
		return Expired
	}
	if h.Record != "" {
		if curState, curAt, ok := readHeld(h.Record); ok {
			above := r.At.After(curAt) || (r.At.Equal(curAt) && r.Value() > h.Record)
			switch {
			case permanent && Permanent(curState) && !above:
				return Older
			case !permanent && Permanent(curState):
				return KeptPermanent
			case !permanent && !above:
				return Older
			}
		}
	}
	h.Record = r.Value()
	return Written
}

// readHeld reads a stored :response value the way the script does: a JSON object whose
// responded_at is a string ParseTime reads; its state is its "response" when that is a string.
func readHeld(raw string) (state string, at time.Time, ok bool) {
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return "", time.Time{}, false
	}
	s, isString := m["responded_at"].(string)
	if !isString {
		return "", time.Time{}, false
	}
	if at, ok = ParseTime(s); !ok {
		return "", time.Time{}, false
	}
	state, _ = m["response"].(string)
	return state, at, true
}

// ParseResetValue reads a :reset value the way the script does: the reset_at of a JSON
// object, or nil when it has none or it is not a time ParseTime reads (such a watermark
// covers nothing).
func ParseResetValue(raw string) *time.Time {
	var m map[string]any
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	s, ok := m["reset_at"].(string)
	if !ok {
		return nil
	}
	t, ok := ParseTime(s)
	if !ok {
		return nil
	}
	return &t
}

// Fold applies responses, in any order, to an identity that holds no record and whose last
// reset was at resetAt (nil: never reset), at now, and returns the index of the response whose
// record the identity ends with, or -1 when it ends with none. Reconcile, the contact-policy
// audit and the demo's expected outcome all decide suppression with it.
func Fold(resetAt *time.Time, responses []Response, now time.Time) int {
	h, win := Held{ResetAt: resetAt}, -1
	for i, r := range responses {
		if h.Apply(r, now) == Written {
			win = i
		}
	}
	return win
}
