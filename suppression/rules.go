package suppression

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// The rules of interview suppression (DESIGN.md §3): the Redis key formats shared with the MCP
// servers, the record states, the cooldown, and the reset rule. The precedence fold that uses
// them is fold.go; its Lua twin, which the consumers run in Redis, is script.go.

// Suppression record values of the `response` field (DESIGN.md §3; PostHog's MCP guide).
const (
	StateAccepted = "booking_link_accepted" // accept: never invite again
	StateDeclined = "do_not_ask_again"      // decline: never invite again
	StateCooldown = "cooldown"              // cancel: no invitation for CooldownPeriod
)

// CooldownPeriod is how long a cancelled invitation suppresses new ones, counted from
// responded_at (PostHog's MCP guide: "Canceling or abandoning the invitation starts a
// seven-day cooldown").
const CooldownPeriod = 7 * 24 * time.Hour

// Key formats. The braces are a Redis Cluster hash tag: every key of one identity lives in one
// slot, so one Lua script may touch them all. The hash is ingest.IdentityHash (64 hex digits),
// so nothing in a key needs glob escaping.
const (
	keyPrefix      = "mcp:interview:{"
	responseSuffix = "}:response"
	// ResponseKeyPattern is the SCAN MATCH pattern of every :response key. '*' also spans ':',
	// so a scan must still check each key with IdentityOfResponseKey.
	ResponseKeyPattern = "mcp:interview:*:response"
	// pendingInfix follows an identity's response key in its pending continuation keys.
	pendingInfix = ":mcp-interview:"
)

// ResponseKey is the Redis key of an identity's suppression record (JSON Record).
func ResponseKey(identityHash string) string { return keyPrefix + identityHash + responseSuffix }

// ResetKey is the Redis key of an identity's last ops reset (JSON {"reset_at","actor","reason"}).
func ResetKey(identityHash string) string { return keyPrefix + identityHash + "}:reset" }

// PendingKey is the MCP server's pending continuation key of one invitation (10-minute TTL;
// an ops reset deletes them).
func PendingKey(identityHash, invitationID string) string {
	return ResponseKey(identityHash) + pendingInfix + invitationID
}

// PendingKeyPattern is the SCAN MATCH pattern of an identity's pending continuation keys.
func PendingKeyPattern(identityHash string) string {
	return ResponseKey(identityHash) + pendingInfix + "*"
}

// IdentityOfResponseKey returns the identity hash of a :response key, and false for any other
// key (a pending key, a reset key, a hash that is not 64 lowercase hex digits).
func IdentityOfResponseKey(key string) (string, bool) {
	if len(key) != len(keyPrefix)+64+len(responseSuffix) || !strings.HasPrefix(key, keyPrefix) || !strings.HasSuffix(key, responseSuffix) {
		return "", false
	}
	h := key[len(keyPrefix) : len(keyPrefix)+64]
	return h, IsIdentityHash(h)
}

// IsIdentityHash reports whether s has the form of ingest.IdentityHash: 64 lowercase hex digits.
func IsIdentityHash(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// StateFor maps an invitation response (ingest.ResponseAccept, ResponseDecline,
// ResponseCancel) to its record state.
func StateFor(response string) string {
	switch response {
	case ingest.ResponseAccept:
		return StateAccepted
	case ingest.ResponseDecline:
		return StateDeclined
	}
	return StateCooldown
}

// Permanent reports whether a record state never expires (anything but StateCooldown, as the
// script reads a stored record).
func Permanent(state string) bool { return state != StateCooldown }

// Record is the JSON value of a ResponseKey, shared with the MCP servers.
type Record struct {
	DistinctID  string `json:"distinct_id"`
	CampaignID  string `json:"campaign_id"`
	Response    string `json:"response"`
	RespondedAt string `json:"responded_at"`
}

// FormatTime writes a time the way JavaScript's Date.prototype.toISOString does
// (2026-11-29T10:00:00.000Z), the format the MCP servers write and the script reads.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// storedTime is the grammar the script accepts for a stored time: a date, 'T', 't' or a space,
// a time with optional fraction, and Z, z, nothing (UTC) or a ±hh[:]mm offset.
var storedTime = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(Z|z|[+-]\d{2}:?\d{2})?$`)

// ParseTime reads a stored responded_at or reset_at exactly as the Lua script does (its
// epoch_ms): the fraction is cut to milliseconds, and out-of-range fields are not refused but
// carried arithmetically (proleptic Gregorian days from civil, as the script computes them).
// ok is false for anything else.
func ParseTime(s string) (t time.Time, ok bool) {
	m := storedTime.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, false
	}
	n := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	y, mo, d, h, mi, sec := n(m[1]), n(m[2]), n(m[3]), n(m[4]), n(m[5]), n(m[6])
	var frac int64
	if m[7] != "" {
		frac = n((m[7] + "000")[:3])
	}
	var offset int64
	if z := m[8]; len(z) > 1 {
		offset = (n(z[1:3])*60 + n(z[len(z)-2:])) * 60
		if z[0] == '-' {
			offset = -offset
		}
	}
	// days from civil, 1970-01-01 = 0 (the script's arithmetic, floored divisions)
	if mo <= 2 {
		y--
	}
	era := floorDiv(y, 400)
	yoe := y - era*400
	mp := (mo + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	days := era*146097 + doe - 719468
	return time.UnixMilli((days*86400+h*3600+mi*60+sec-offset)*1000 + frac).UTC(), true
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// CooldownEnded reports whether a cooldown that began at respondedAt is over at now: its end,
// respondedAt + CooldownPeriod, is at or before now (milliseconds).
func CooldownEnded(respondedAt, now time.Time) bool {
	return respondedAt.UnixMilli()+CooldownPeriod.Milliseconds() <= now.UnixMilli()
}

// ResetMargin is how far after an ops reset a response may be dated and still be covered by
// it: the clock rule's acceptance margin (ingest.MaxResponseClockSkew), because a response
// received before the reset may be dated up to that far ahead of the clock that received it.
const ResetMargin = ingest.MaxResponseClockSkew

// ResetCovers is the reset rule: an ops reset at resetAt covers a response dated respondedAt,
// which then never counts again, when respondedAt <= resetAt + ResetMargin (milliseconds).
//
// Why the margin: a response is accepted only when it is dated at most ResetMargin after the
// clock that receives it (ingest.CheckClock, at the gateway and again at the consumer), and
// the reset instant is read from Redis (TIME on the identity's node, in the reset script), a
// server clock like the receiving ones. So every response received before the reset is dated
// at most resetAt + ResetMargin, whatever the client claimed; and since the rule looks only
// at the date, every later copy of it (a redelivery, a replay under a new uuid, the row
// reconcile folds from ClickHouse) is covered too. The price: a response genuinely given
// within ResetMargin after a reset is taken as one from before it. DESIGN.md §3 has the
// argument in full.
func ResetCovers(resetAt, respondedAt time.Time) bool {
	return respondedAt.UnixMilli() <= resetAt.UnixMilli()+ResetMargin.Milliseconds()
}
