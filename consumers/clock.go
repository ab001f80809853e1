package consumers

import (
	"context"
	"sync/atomic"
	"time"
)

// The receiving clock. The consumer judges an event's dates (the clock rule: a response may be
// dated at most ingest.MaxResponseClockSkew ahead of receipt) and cooldown ends by Redis's clock
// (TIME), the clock the reset script stamps reset_at with, so every member and every ops reset
// share one clock: a reset then covers every response received before it, whatever this host's
// clock says (DESIGN.md §3, the reset rule). The offset between this host's clock and Redis's is
// sampled before each batch is prepared; a failed sample keeps the last offset.

// now returns the receiving clock: Config.Now when set (tests pin it), else this host's clock
// corrected by the last sampled offset to Redis's.
func (c *Consumer) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return c.hostNow().Add(time.Duration(c.redisOffset.Load()))
}

// syncClock samples the offset of Redis's clock from this host's, taking the middle of the
// round trip as the moment Redis read its clock. It does nothing when Config.Now is set.
func (c *Consumer) syncClock(ctx context.Context) error {
	if c.cfg.Now != nil {
		return nil
	}
	before := c.hostNow()
	t, err := c.cfg.Redis.Time(ctx).Result()
	if err != nil {
		return err
	}
	after := c.hostNow()
	mid := before.Add(after.Sub(before) / 2)
	c.redisOffset.Store(int64(t.Sub(mid)))
	return nil
}

// redisOffsetT is the type of Consumer.redisOffset: nanoseconds Redis's clock is ahead of this
// host's.
type redisOffsetT = atomic.Int64
