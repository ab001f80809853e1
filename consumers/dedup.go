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
// Claims live in Redis hashes named by the UTC day the consumer claimed them (not the event's
// own timestamp: a duplicate must be caught even when a producer re-stamped it) and by one of
// DedupShards shards of the uuid. A claim is looked up in the current day's hash and the ones
// before it back to DedupWindow, and written to the current one; each hash expires DedupWindow
// plus a day after it was created, so memory holds about DedupWindow (rounded up to whole days)
// of claims: about 90 bytes per event in the window. The shard is a Redis Cluster hash tag, so
// every hash a lookup reads lives in one slot and one script call serves a shard.

// DedupShards is how many Redis Cluster slots the claims are spread over.
const DedupShards = 16

const dedupPeriod = 24 * time.Hour

// DedupKey is the Redis hash holding one shard's uuid claims made on one UTC day.
func DedupKey(shard int, day time.Time) string {
	return "mcpulse:dedup:{" + strconv.Itoa(shard) + "}:" + day.UTC().Format("20060102")
}

// dedupShard picks a uuid's shard from its last byte (random in UUID v4 and v7).
func dedupShard(id [16]byte) int { return int(id[15]) % DedupShards }

// claimScript: KEYS[1] the current day's hash, KEYS[2..] earlier days' hashes of the same
// shard; ARGV[1] TTL seconds of a new hash, then (uuid, position) pairs. Returns 1 for each
// uuid this position owns (a new claim, or its own earlier claim), else 0.
var claimScript = redis.NewScript(`
local out = {}
local n = 0
for i = 2, #ARGV, 2 do
  n = n + 1
  local cur = false
  for k = 1, #KEYS do
    cur = redis.call('HGET', KEYS[k], ARGV[i])
    if cur then break end
  end
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
}

// claimAll claims every uuid at time now, one script call per shard, pipelined, and returns
// which claims this consumer owns (same order as claims).
func claimAll(ctx context.Context, rdb redis.UniversalClient, window time.Duration, now time.Time, claims []claim) ([]bool, error) {
	byShard := map[int][]int{}
	var shards []int
	for i, c := range claims {
		sh := dedupShard(c.uuid)
		if _, ok := byShard[sh]; !ok {
			shards = append(shards, sh)
		}
		byShard[sh] = append(byShard[sh], i)
	}
	today := now.UTC().Truncate(dedupPeriod)
	lookback := int((window + dedupPeriod - 1) / dedupPeriod) // whole days, rounded up
	ttl := strconv.FormatInt(int64((window+dedupPeriod)/time.Second), 10)
	calls := make([]scriptCall, len(shards))
	for j, sh := range shards {
		keys := make([]string, 0, lookback+1)
		for d := 0; d <= lookback; d++ {
			keys = append(keys, DedupKey(sh, today.Add(-time.Duration(d)*dedupPeriod)))
		}
		idx := byShard[sh]
		args := make([]any, 0, 1+2*len(idx))
		args = append(args, ttl)
		for _, i := range idx {
			args = append(args, string(claims[i].uuid[:]), claims[i].pos)
		}
		calls[j] = scriptCall{keys: keys, args: args}
	}
	cmds, err := runScripts(ctx, rdb, claimScript, calls)
	if err != nil {
		return nil, fmt.Errorf("dedup claims: %w", err)
	}
	owned := make([]bool, len(claims))
	for j, sh := range shards {
		res, err := cmds[j].Int64Slice()
		if err != nil {
			return nil, fmt.Errorf("dedup claims: %w", err)
		}
		for k, i := range byShard[sh] {
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
