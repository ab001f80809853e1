package consumers

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"
)

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
