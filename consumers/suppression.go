package consumers

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/ingest"
)

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

// ResponseKey is the Redis key of an identity's suppression record. The braces are a Redis
// Cluster hash tag, so every key of one identity lives in one slot.
func ResponseKey(identityHash string) string { return "mcp:interview:{" + identityHash + "}:response" }

// ResetKey is the Redis key of an identity's last ops reset (JSON {"reset_at","actor","reason"}).
func ResetKey(identityHash string) string { return "mcp:interview:{" + identityHash + "}:reset" }

// StateFor maps an invitation response ("accept", "decline", "cancel") to its record state.
func StateFor(response string) string {
	switch response {
	case ingest.ResponseAccept:
		return StateAccepted
	case ingest.ResponseDecline:
		return StateDeclined
	}
	return StateCooldown
}

// Record is the JSON value of a ResponseKey, shared with the MCP servers.
type Record struct {
	DistinctID  string `json:"distinct_id"`
	CampaignID  string `json:"campaign_id"`
	Response    string `json:"response"`
	RespondedAt string `json:"responded_at"`
}

// FormatTime writes a time the way JavaScript's Date.prototype.toISOString does
// (2026-11-29T10:00:00.000Z), the format the MCP servers write and the Lua script reads.
func FormatTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// Outcomes of ApplyResponse.
const (
	ApplyWritten       = "written"        // the record was created or replaced
	ApplyOlder         = "older"          // not newer than the record held (replays land here)
	ApplyKeptPermanent = "kept_permanent" // a cooldown never replaces accepted or declined
	ApplyExpired       = "expired"        // a cooldown whose end has already passed
	ApplyBeforeReset   = "before_reset"   // responded at or before the identity's ops reset
)

// suppressionScript applies one response to an identity's record atomically. The precedence
// rules (DESIGN.md §3), with "newer" meaning a later responded_at whatever the arrival order:
// a permanent state (accepted, declined) is never replaced by a cooldown; a permanent state
// replaces a cooldown, and a newer permanent state an older one; a newer cooldown replaces an
// older cooldown; a cooldown whose end has passed is not written; a response at or before the
// reset watermark changes nothing; an equal responded_at (a replay) changes nothing.
//
// KEYS[1] response key, KEYS[2] reset key.
// ARGV: record JSON, responded_at (ms since epoch), permanent ("1"/"0"), now (ms), cooldown (ms).
var suppressionScript = redis.NewScript(`
local function epoch_ms(s)
  if type(s) ~= 'string' then return nil end
  local y, mo, d, h, mi, sec, rest = string.match(s, '^(%d%d%d%d)-(%d%d)-(%d%d)[Tt ](%d%d):(%d%d):(%d%d)(.*)$')
  if not y then return nil end
  local frac = 0
  local f = string.match(rest, '^%.(%d+)')
  if f then
    frac = tonumber(string.sub(f .. '000', 1, 3))
    rest = string.sub(rest, #f + 2)
  end
  local offset = 0
  if rest ~= 'Z' and rest ~= 'z' and rest ~= '' then
    local sign, oh, om = string.match(rest, '^([+-])(%d%d):?(%d%d)$')
    if not sign then return nil end
    offset = (tonumber(oh) * 60 + tonumber(om)) * 60
    if sign == '-' then offset = -offset end
  end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  -- days from civil (proleptic Gregorian), 1970-01-01 = 0
  if mo <= 2 then y = y - 1 end
  local era = math.floor(y / 400)
  local yoe = y - era * 400
  local mp = (mo + 9) % 12
  local doy = math.floor((153 * mp + 2) / 5) + d - 1
  local doe = yoe * 365 + math.floor(yoe / 4) - math.floor(yoe / 100) + doy
  local days = era * 146097 + doe - 719468
  return ((days * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(sec)) - offset) * 1000 + frac
end

local record, at, permanent = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local now, cooldown = tonumber(ARGV[4]), tonumber(ARGV[5])

local reset = redis.call('GET', KEYS[2])
if reset then
  local ok, r = pcall(cjson.decode, reset)
  local reset_at = ok and type(r) == 'table' and epoch_ms(r['reset_at']) or nil
  if reset_at and at <= reset_at then return 'before_reset' end
end

if not permanent and at + cooldown <= now then return 'expired' end

local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, c = pcall(cjson.decode, cur)
  if ok and type(c) == 'table' then
    local cur_at = epoch_ms(c['responded_at'])
    local cur_permanent = c['response'] ~= 'cooldown'
    if cur_at then
      if permanent then
        if cur_permanent and at <= cur_at then return 'older' end
      else
        if cur_permanent then return 'kept_permanent' end
        if at <= cur_at then return 'older' end
      end
    end
  end
end

if permanent then
  redis.call('SET', KEYS[1], record)
else
  redis.call('SET', KEYS[1], record, 'PX', at + cooldown - now)
end
return 'written'
`)

// ApplyResponse applies one invitation response to the identity's suppression record in one
// atomic Lua script and returns one of the Apply* outcomes. now decides whether a cooldown
// has already ended and sets its TTL (responded_at + CooldownPeriod − now).
func ApplyResponse(ctx context.Context, rdb redis.Scripter, identityHash string, rec Record, respondedAt time.Time, now time.Time) (string, error) {
	cmd := applyResponseCmd(ctx, rdb, identityHash, rec, respondedAt, now)
	return cmd.Text()
}

func applyResponseCmd(ctx context.Context, rdb redis.Scripter, identityHash string, rec Record, respondedAt, now time.Time) *redis.Cmd {
	call := suppressionCall(identityHash, rec, respondedAt, now)
	return suppressionScript.Run(ctx, rdb, call.keys, call.args...)
}

// suppressionCall is the suppression script's keys and arguments for one response.
func suppressionCall(identityHash string, rec Record, respondedAt, now time.Time) scriptCall {
	value, _ := json.Marshal(rec) // a struct of strings always marshals
	return scriptCall{
		keys: []string{ResponseKey(identityHash), ResetKey(identityHash)},
		args: []any{string(value), respondedAt.UnixMilli(), permanentArg(rec), now.UnixMilli(), CooldownPeriod.Milliseconds()},
	}
}

// ReadRecord returns an identity's suppression record, or nil when it has none.
func ReadRecord(ctx context.Context, rdb redis.Cmdable, identityHash string) (*Record, error) {
	data, err := rdb.Get(ctx, ResponseKey(identityHash)).Bytes()
	if err == redis.Nil {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var rec Record
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, fmt.Errorf("suppression record %s: %w", ResponseKey(identityHash), err)
	}
	return &rec, nil
}

func permanentArg(rec Record) string {
	if rec.Response == StateCooldown {
		return "0"
	}
	return "1"
}
