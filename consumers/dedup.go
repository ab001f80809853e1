package consumers

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Deduplication by uuid (DESIGN.md §5). The first message that carries a uuid claims it in
// Redis with its own position (topic/partition/offset); a later message with the same uuid at
// another position is a duplicate and is dropped. A message that finds its own claim (it was
// claimed, then the consumer crashed before committing) is processed again: that keeps a crash
// between claim and store from losing the event, and the stores' own idempotency (uniqExact
// rollups, ReplacingMergeTree raw tables, precedence in the suppression script) keeps the
// replay from counting twice.
//
// Claims live in one Redis hash per UTC hour of the event timestamp (an exact duplicate has the
// same timestamp, so it lands in the same hash), expiring DedupWindow after the hash was
// created. Memory is about 90 bytes per event in the window (measured in the benchmark); the
// hash-tag braces keep each hash in one Redis Cluster slot.

// DedupKey is the Redis hash holding the uuid claims for one UTC hour.
func DedupKey(hour time.Time) string {
	return "mcpulse:dedup:{" + hour.UTC().Format("2006010215") + "}"
}

// claimScript: KEYS[1] the hour's hash; ARGV[1] TTL seconds, then (uuid, position) pairs.
// Returns 1 for each uuid this position owns (new claim or its own earlier claim), else 0.
var claimScript = redis.NewScript(`
local out = {}
local n = 0
for i = 2, #ARGV, 2 do
  n = n + 1
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if not cur then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
    out[n] = 1
  elseif cur == ARGV[i + 1] then
    out[n] = 1
  else
    out[n] = 0
  end
end
if redis.call('TTL', KEYS[1]) < 0 then
  redis.call('EXPIRE', KEYS[1], ARGV[1])
end
return out
`)

// claim is one uuid to claim for the message at pos.
type claim struct {
	uuid [16]byte
	pos  string
	hour time.Time
}

// claimAll claims every uuid, one script call per hour bucket, pipelined, and returns which
// claims this consumer owns (same order as claims).
func claimAll(ctx context.Context, rdb redis.UniversalClient, window time.Duration, claims []claim) ([]bool, error) {
	byHour := map[time.Time][]int{}
	var hours []time.Time
	for i, c := range claims {
		h := c.hour.Truncate(time.Hour)
		if _, ok := byHour[h]; !ok {
			hours = append(hours, h)
		}
		byHour[h] = append(byHour[h], i)
	}
	ttl := strconv.FormatInt(int64(window/time.Second), 10)
	calls := make([]scriptCall, len(hours))
	for j, h := range hours {
		idx := byHour[h]
		args := make([]any, 0, 1+2*len(idx))
		args = append(args, ttl)
		for _, i := range idx {
			args = append(args, string(claims[i].uuid[:]), claims[i].pos)
		}
		calls[j] = scriptCall{keys: []string{DedupKey(h)}, args: args}
	}
	cmds, err := runScripts(ctx, rdb, claimScript, calls)
	if err != nil {
		return nil, fmt.Errorf("dedup claims: %w", err)
	}
	owned := make([]bool, len(claims))
	for j, h := range hours {
		res, err := cmds[j].Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("dedup claims: %w", err)
		}
		for k, i := range byHour[h] {
			owned[i] = res[k] == 1
		}
	}
	return owned, nil
}

// scriptCall is one invocation of a Lua script: its keys and arguments.
type scriptCall struct {
	keys []string
	args []any
}

// runScripts runs script once per call in one pipelined round trip and returns the commands
// (same order as calls), each holding its reply; the error is the first failed call's.
//
// It sends EVALSHA, and re-sends as EVAL (the script's source), in a second pipeline, exactly
// the calls a server answered NOSCRIPT: a call that got NOSCRIPT did not run, so nothing runs
// twice. It does not SCRIPT LOAD first. On a Redis Cluster the pipeline is split by slot
// across the masters, and a node's script cache is empty after a restart or on a replica
// promoted by a failover, at any moment between a load and the EVALSHA; and go-redis'
// ClusterClient.ScriptLoad visits every node, replicas included, so one unreachable replica
// failed every batch until the cluster marked it failed. EVAL caches the script on the node
// that ran it, so the next batch's EVALSHA finds it there.
func runScripts(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, calls []scriptCall) ([]*redis.Cmd, error) {
	cmds := make([]*redis.Cmd, len(calls))
	if len(calls) == 0 {
		return cmds, nil
	}
	pipe := rdb.Pipeline()
	for i, c := range calls {
		cmds[i] = script.EvalSha(ctx, pipe, c.keys, c.args...)
	}
	if _, err := pipe.Exec(ctx); err == nil {
		return cmds, nil
	}
	var missing []int
	for i, cmd := range cmds {
		switch err := cmd.Err(); {
		case err == nil:
		case isNoScript(err):
			missing = append(missing, i)
		default:
			return cmds, err
		}
	}
	pipe = rdb.Pipeline()
	for _, i := range missing {
		cmds[i] = script.Eval(ctx, pipe, calls[i].keys, calls[i].args...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return cmds, err
	}
	return cmds, nil
}

func isNoScript(err error) bool {
	return errors.Is(err, redis.ErrNoScript) || redis.HasErrorPrefix(err, "NOSCRIPT")
}
