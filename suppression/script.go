package suppression

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// luaEpochMs is the script's reader of stored times (ParseTime is its Go twin): ISO 8601 /
// RFC 3339 text to milliseconds since the epoch, nil when unreadable.
const luaEpochMs = `
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
`

// luaISOMs is FormatTime in Lua: milliseconds since the epoch to 2026-11-29T10:00:00.000Z
// (civil date from days, proleptic Gregorian).
const luaISOMs = `
local function iso_ms(ms)
  local s = math.floor(ms / 1000)
  local days = math.floor(s / 86400)
  local sod = s - days * 86400
  local z = days + 719468
  local era = math.floor(z / 146097)
  local doe = z - era * 146097
  local yoe = math.floor((doe - math.floor(doe / 1460) + math.floor(doe / 36524) - math.floor(doe / 146096)) / 365)
  local doy = doe - (365 * yoe + math.floor(yoe / 4) - math.floor(yoe / 100))
  local mp = math.floor((5 * doy + 2) / 153)
  local d = doy - math.floor((153 * mp + 2) / 5) + 1
  local m = mp < 10 and mp + 3 or mp - 9
  local y = yoe + era * 400
  if m <= 2 then y = y + 1 end
  return string.format('%04d-%02d-%02dT%02d:%02d:%02d.%03dZ', y, m, d,
    math.floor(sod / 3600), math.floor(sod % 3600 / 60), sod % 60, ms - s * 1000)
end
`

// applyScript applies one response to an identity's record atomically: Held.Apply, in Lua.
// Ties compare the record texts byte by byte (Lua's own string comparison follows the
// server's collation locale).
//
// KEYS[1] response key, KEYS[2] reset key.
// ARGV: record JSON, responded_at (ms since epoch), permanent ("1"/"0"), now (ms), cooldown (ms),
// reset margin (ms, ResetMargin). Returns an Outcome.
var applyScript = redis.NewScript(luaEpochMs + `
local function bytes_above(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return #a > #b
end

local record, at, permanent = ARGV[1], tonumber(ARGV[2]), ARGV[3] == '1'
local now, cooldown, margin = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

local reset = redis.call('GET', KEYS[2])
if reset then
  local ok, r = pcall(cjson.decode, reset)
  local reset_at = ok and type(r) == 'table' and epoch_ms(r['reset_at']) or nil
  if reset_at and at <= reset_at + margin then return 'before_reset' end
end

if not permanent and at + cooldown <= now then return 'expired' end

local cur = redis.call('GET', KEYS[1])
if cur then
  local ok, c = pcall(cjson.decode, cur)
  if ok and type(c) == 'table' then
    local cur_at = epoch_ms(c['responded_at'])
    local cur_permanent = c['response'] ~= 'cooldown'
    if cur_at then
      local above = at > cur_at or (at == cur_at and bytes_above(record, cur))
      if permanent then
        if cur_permanent and not above then return 'older' end
      else
        if cur_permanent then return 'kept_permanent' end
        if not above then return 'older' end
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

// ApplyScript is the script ApplyCall's keys and arguments are for. A caller that batches
// responses runs it with EVALSHA (falling back to EVAL on NOSCRIPT) in a pipeline: its result
// does not depend on the order responses are applied in.
func ApplyScript() *redis.Script { return applyScript }

// ApplyCall is the keys and arguments of ApplyScript for applying r to an identity's record
// at now (now decides whether a cooldown has ended, and sets its TTL).
func ApplyCall(identityHash string, r Response, now time.Time) (keys []string, args []any) {
	permanent := "0"
	if Permanent(r.Record.Response) {
		permanent = "1"
	}
	return []string{ResponseKey(identityHash), ResetKey(identityHash)},
		[]any{r.Value(), r.At.UnixMilli(), permanent, now.UnixMilli(), CooldownPeriod.Milliseconds(), ResetMargin.Milliseconds()}
}

// ApplyResponse applies one response to an identity's record in one atomic script run and
// returns its Outcome. A cooldown's TTL is responded_at + CooldownPeriod − now.
func ApplyResponse(ctx context.Context, rdb redis.Scripter, identityHash string, r Response, now time.Time) (Outcome, error) {
	keys, args := ApplyCall(identityHash, r, now)
	out, err := applyScript.Run(ctx, rdb, keys, args...).Text()
	return Outcome(out), err
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
