package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

// errRunElsewhere means another scheduler replica ran (or is running) this period's run.
var errRunElsewhere = errors.New("another scheduler replica has this run")

// runGuard makes each scheduled run of one job happen once across scheduler replicas sharing a
// Redis, the guard every job runs behind (cron.SkipIfStillRunning only keeps one replica's runs
// from overlapping):
//
//   - a lock, mcpulse:job:{<name>}:lock, taken with SET NX and expiring after the run's
//     timeout, keeps a second replica from starting while a run is going on anywhere;
//   - the last start, mcpulse:job:{<name>}:last (milliseconds, kept for one period), keeps a
//     replica whose own schedule fires a little later (a clock behind, a slow start) from
//     running the same period again: a start less than half a period after the last is
//     skipped.
type runGuard struct {
	rdb     redis.UniversalClient // nil: no guard (a single scheduler)
	name    string
	timeout time.Duration
	now     func() time.Time
}

// releaseLock deletes a lock only while it still holds the owner's token.
var releaseLock = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)

// claim takes this period's run: it returns release (to call when the run ends), or
// errRunElsewhere when another replica has it, or Redis' error.
func (g runGuard) claim(ctx context.Context, period time.Duration) (release func(), err error) {
	base := "mcpulse:job:{" + g.name + "}"
	lock, last := base+":lock", base+":last"
	token := uuid.NewString()
	ok, err := g.rdb.SetNX(ctx, lock, token, g.timeout).Result()
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, errRunElsewhere
	}
	release = func() { _ = releaseLock.Run(context.Background(), g.rdb, []string{lock}, token).Err() }
	now := g.now()
	if prev, err := g.rdb.Get(ctx, last).Int64(); err == nil && now.Sub(time.UnixMilli(prev)) < period/2 {
		release()
		return nil, errRunElsewhere
	}
	if err := g.rdb.Set(ctx, last, strconv.FormatInt(now.UnixMilli(), 10), period).Err(); err != nil {
		release()
		return nil, err
	}
	return release, nil
}

// guarded is the cron entry of one job: it claims the run (runGuard; the period is the time
// from now to the schedule's next run), runs it, and releases the claim. It returns errSkipped
// when another replica has the run; when Redis cannot be asked it logs that and runs anyway (a
// double run is better than none). A panic is left to cron.Recover.
func guarded(g runGuard, sched cron.Schedule, log *slog.Logger, run func() error) func() error {
	return func() error {
		if g.rdb != nil {
			now := g.now()
			period := sched.Next(now).Sub(now)
			if period <= 0 {
				period = g.timeout
			}
			release, err := g.claim(context.Background(), period)
			switch {
			case errors.Is(err, errRunElsewhere):
				log.Debug("another scheduler replica has this run", "job", g.name)
				return errSkipped
			case err != nil:
				log.Error("run guard failed; running anyway", "job", g.name, "err", err)
			default:
				defer release()
			}
		}
		return run()
	}
}
