package alerts

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/sql"
)

// Notification status values of alert_notifications.
const (
	statusSent   = "sent"
	statusFailed = "failed"
)

// claimKey is the Redis key of one delivery: the transition id in a hash tag, so the key maps
// to one Redis Cluster slot whatever the receiver.
func claimKey(transitionID, receiver string) string {
	return "mcpulse:alert:{" + transitionID + "}:" + receiver
}

// Lua scripts on a claim: act only while the claim is still this replica's token.
var (
	markSentScript = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('SET', KEYS[1], 'sent', 'PX', ARGV[2]) end return 0`)
	releaseScript  = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// deliver sends the notifications due: for every rule's receivers, the tip of each instance
// that changed within RetryWindow and was not delivered to that receiver yet.
func (e *Evaluator) deliver(ctx context.Context, tips map[string]map[string]tip, now time.Time, rep *Report) {
	for _, r := range e.Rules {
		for _, instance := range slices.Sorted(maps.Keys(tips[r.Name])) {
			t := tips[r.Name][instance]
			if t.At.Before(now.Add(-e.RetryWindow)) {
				continue
			}
			for _, name := range r.Receivers {
				recv, ok := e.Receivers.byName(name)
				if !ok {
					continue
				}
				e.deliverOne(ctx, r, t.Transition, recv, now, rep)
			}
		}
	}
}

// deliverOne claims, checks, sends and records one notification (see Evaluator).
func (e *Evaluator) deliverOne(ctx context.Context, r Rule, t Transition, recv Receiver, now time.Time, rep *Report) {
	key, token := claimKey(t.ID, recv.Name), uuid.NewString()
	log := e.Logger.With("rule", r.Name, "state", t.State, "receiver", recv.Name, "transition", t.ID[:12])
	if e.Redis != nil {
		ok, err := e.Redis.SetNX(ctx, key, token, e.Lease).Result()
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("alert %s → %s: claim: %w (retried at the next evaluation)", r.Name, recv.Name, err))
			log.Error("alert delivery could not be claimed; retried at the next evaluation", "err", err)
			return
		}
		if !ok {
			rep.Skipped++ // another replica has it, or it was sent
			return
		}
	}
	release := func() {
		if e.Redis != nil {
			_ = releaseScript.Run(context.WithoutCancel(ctx), e.Redis, []string{key}, token).Err()
		}
	}
	markSent := func() {
		if e.Redis != nil {
			_ = markSentScript.Run(context.WithoutCancel(ctx), e.Redis, []string{key}, token, strconv.FormatInt(SentMarkerTTL.Milliseconds(), 10)).Err()
		}
	}
	done, err := e.delivered(ctx, t.ID)
	if err != nil {
		release()
		rep.Errors = append(rep.Errors, fmt.Errorf("alert %s → %s: reading deliveries: %w", r.Name, recv.Name, err))
		return
	}
	if done[recv.Name] {
		markSent()
		rep.Skipped++
		return
	}
	var body []byte
	switch recv.Kind {
	case KindSlack:
		body = encode(slackMessage(r, t, e.Receivers.ExternalURL))
	default:
		body = encode(alertmanagerMessage(r, t, recv.Name, e.Receivers.ExternalURL))
	}
	attempts, sendErr := e.send(ctx, recv, body)
	status, errText := statusSent, ""
	if sendErr != nil {
		status, errText = statusFailed, sendErr.Error()
	}
	recErr := e.ClickHouse.Exec(context.WithoutCancel(ctx), `INSERT INTO mcpulse.alert_notifications (transition_id, receiver, status, rule, instance,
state, kind, attempts, error, at, sent_by) SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, toDateTime(?, 'UTC'), ?`,
		t.ID, recv.Name, status, r.Name, t.Instance, t.State, recv.Kind, uint32(attempts), errText, now.Unix(), e.Replica)
	if sendErr != nil {
		release()
		rep.Failed++
		rep.Errors = append(rep.Errors, fmt.Errorf("alert %s → %s: %w (retried at the next evaluation)", r.Name, recv.Name, sendErr))
		log.Warn("alert notification failed; retried at the next evaluation", "err", sendErr)
		return
	}
	// Sent: the marker stops every other claim even when the record below failed.
	markSent()
	rep.Sent++
	log.Info("alert notification sent", "attempts", attempts)
	if recErr != nil {
		rep.Errors = append(rep.Errors, fmt.Errorf("alert %s → %s: sent, but recording it failed: %w", r.Name, recv.Name, recErr))
	}
}

// delivered returns the receivers a transition was delivered to.
func (e *Evaluator) delivered(ctx context.Context, transitionID string) (map[string]bool, error) {
	rows, err := e.ClickHouse.Query(ctx, sql.Query("alert_delivered"), transitionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			return nil, err
		}
		out[r] = true
	}
	return out, rows.Err()
}
