package consumers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/testkit/testenv"
)

// The consumer judges a response's date by Redis's clock, the one reset_at is stamped with, not
// by its host's: with a host clock 10 minutes fast, a response dated 8 minutes after Redis's clock
// is dead-lettered (the host's clock would have let it through and outranked a reset made now),
// and one dated 4 minutes after it is accepted.
func TestTheReceivingClockIsRedisNotTheHost(t *testing.T) {
	e := testenv.New(t, testenv.Options{})
	ctx := context.Background()
	c, err := New(Config{Brokers: e.Stack.KafkaBrokers, Redis: e.Redis, ClickHouse: e.ClickHouse, DeadLetters: e.Publisher})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.hostNow = func() time.Time { return time.Now().Add(10 * time.Minute) }
	if err := c.syncClock(ctx); err != nil {
		t.Fatal(err)
	}
	redisNow, err := e.Redis.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	if d := c.now().Sub(redisNow); d < -5*time.Second || d > 5*time.Second {
		t.Fatalf("receiving clock %s is %s from Redis's %s", c.now(), d, redisNow)
	}

	msg := func(offset int64, at time.Time) kafka.Message {
		v := fmt.Sprintf(`{"uuid":"0190c5a4-58a4-7b8e-9c3d-%012x","event":%q,"distinct_id":"clock@example.com","timestamp":%q,`+
			`"properties":{"campaign_id":"c","invitation_id":"i-%d","feature_flag":"f","response":"decline","responded_at":%q}}`,
			offset, ingest.EventInvitationResponse, at.Format(time.RFC3339Nano), offset, at.Format(time.RFC3339Nano))
		return kafka.Message{Topic: ingest.TopicRecruitment, Partition: 0, Offset: offset, Value: []byte(v), Time: time.Now()}
	}
	ahead8, ahead4 := redisNow.Add(8*time.Minute), redisNow.Add(4*time.Minute)
	if ingest.MaxResponseClockSkew != 5*time.Minute || !ahead8.Before(c.hostNow().Add(ingest.MaxResponseClockSkew)) {
		t.Fatal("test premise: the host's clock would accept a response 8 minutes ahead of Redis's")
	}
	p := c.prepare([]kafka.Message{msg(1, ahead8), msg(2, ahead4)})
	if len(p.bad) != 1 || len(p.kept) != 1 {
		t.Fatalf("prepared %d events and %d dead letters, want 1 and 1: %+v", len(p.kept), len(p.bad), p.bad)
	}
	if kept := p.msgs[p.kept[0].msg].Offset; p.bad[0].ID != ingest.TopicRecruitment+"/0/1" || kept != 2 {
		t.Errorf("dead-lettered %s and kept offset %d; want the 8-minutes-ahead response (offset 1) refused", p.bad[0].ID, kept)
	}
}
