package alerts

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/dashboards"
	"github.com/mcpulse/mcpulse/sql"
)

// Evaluator evaluates rules and notifies their receivers. Any number of evaluators (one per
// scheduler replica) may run against the same ClickHouse and Redis, at any times: each
// transition is recorded once and notified once per receiver.
//
// Why two replicas never send twice:
//
//  1. Transition ids are deterministic. An instance's transitions form a chain (seq 1, 2, ...)
//     alternating firing and resolved; the id of seq n+1 is a hash of the rule, the instance,
//     n+1, its state and the id of seq n (transitionID). A node therefore has exactly one
//     possible successor id: two replicas that see the same change, even from a stale read of
//     the chain, compute the same id, and their two inserts of it collapse
//     (ReplacingMergeTree on the id's key). No insert decides anything, so no race between
//     inserts on ClickHouse 18.16 or current releases can split a chain.
//  2. A notification is one (transition id, receiver) pair, and only the replica holding its
//     Redis claim sends it: SET key NX PX lease is atomic in Redis, so at most one replica
//     holds the claim at a time. The holder first checks ClickHouse for a 'sent' record of
//     the pair (so a claim lost with a Redis restart cannot send again), then sends, records
//     'sent' in alert_notifications, and replaces its claim with a "sent" marker kept for
//     SentMarkerTTL (only if the claim is still its own). A failed send records 'failed' and
//     deletes the claim, so the next evaluation retries it.
//
// The claim's lease outlasts a send (SendAttempts × SendTimeout plus the backoff), so a
// claim expires during a send only if the holder stalls longer than that (a paused VM); a
// replica that dies between sending and recording sends again after the lease (at least once,
// never lost). Without Redis (a single replica) the ClickHouse record alone prevents repeats.
type Evaluator struct {
	Rules      []Rule
	Dashboards []dashboards.Dashboard
	Receivers  ReceiversConfig
	ClickHouse driver.Conn
	// Redis holds the delivery claims; nil for a single replica.
	Redis redis.UniversalClient
	// Replica names this evaluator in the rows it records. Default: hostname:pid.
	Replica string
	// RetryWindow is how long a transition's undelivered notifications are retried; older
	// ones are given up (logged). Default: DefaultRetryWindow.
	RetryWindow time.Duration
	// Lease is how long a delivery claim holds. Default: DefaultLease.
	Lease  time.Duration
	Logger *slog.Logger
	// send posts one payload (post; tests may replace it).
	send func(ctx context.Context, r Receiver, body []byte) (int, error)
}

// Defaults of Evaluator.
const (
	DefaultRetryWindow = time.Hour
	DefaultLease       = SendAttempts*(SendTimeout+10*time.Second) + 30*time.Second
	// SentMarkerTTL is how long Redis remembers a delivered notification (ClickHouse keeps
	// the record for good).
	SentMarkerTTL = 7 * 24 * time.Hour
)

// Report is what one evaluation did.
type Report struct {
	// Instances is how many alert instances were evaluated, Firing how many fire now.
	Instances, Firing int
	// Transitions are the changes recorded (by this replica; another may have recorded them
	// too).
	Transitions []Transition
	// Sent, Failed and Skipped count deliveries: sent by this replica, failed, and skipped
	// because another replica had them or they were sent already.
	Sent, Failed, Skipped int
	// Errors are the rules that could not be evaluated and deliveries that could not be
	// claimed or recorded; the other rules were evaluated.
	Errors []error
}

func (e *Evaluator) setDefaults() {
	if e.Replica == "" {
		host, _ := os.Hostname()
		e.Replica = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if e.RetryWindow == 0 {
		e.RetryWindow = DefaultRetryWindow
	}
	if e.Lease == 0 {
		e.Lease = DefaultLease
	}
	if e.Logger == nil {
		e.Logger = slog.New(slog.DiscardHandler)
	}
	if e.send == nil {
		e.send = post
	}
}

// Validate reports rules naming receivers the configuration lacks, and a missing ClickHouse.
// Such rules are still evaluated and their transitions recorded; they are sent nowhere.
func (e *Evaluator) Validate() error {
	var errs []error
	if e.ClickHouse == nil {
		errs = append(errs, errors.New("alerts: no ClickHouse connection"))
	}
	for _, r := range e.Rules {
		for _, name := range r.Receivers {
			if _, ok := e.Receivers.byName(name); !ok {
				errs = append(errs, fmt.Errorf("alert rule %s: receiver %q is not configured (its transitions are recorded, not sent)", r.Name, name))
			}
		}
	}
	return errors.Join(errs...)
}

// tip is the newest transition of an instance, as stored.
type tip struct {
	Transition
	labelsText, valueText string
}

// instanceRow is one instance's figures in the evaluated window.
type instanceRow struct {
	labels     map[string]string
	value      *float64
	volume     *float64
	baseline   *float64
	baseVolume *float64
	details    []string
}

// Evaluate evaluates every rule at now, records the transitions and delivers the
// notifications due (new transitions, and recent ones not yet delivered). A rule whose query
// fails is reported in Report.Errors and changes nothing (its alerts neither fire nor
// resolve); the error returned is ClickHouse's when the alert state could not be read or
// recorded at all.
func (e *Evaluator) Evaluate(ctx context.Context, now time.Time) (Report, error) {
	e.setDefaults()
	now = now.UTC().Truncate(time.Second)
	var rep Report
	tips, err := e.readTips(ctx)
	if err != nil {
		return rep, fmt.Errorf("alerts: reading the alert state: %w", err)
	}
	var changes []Transition
	for _, r := range e.Rules {
		rows, err := e.figures(ctx, r, now)
		if err != nil {
			rep.Errors = append(rep.Errors, fmt.Errorf("alert rule %s: %w", r.Name, err))
			e.Logger.Error("alert rule could not be evaluated", "rule", r.Name, "err", err)
			continue
		}
		rep.Instances += len(rows)
		seen := map[string]bool{}
		for instance, row := range rows {
			seen[instance] = true
			firing := r.fires(row)
			if firing {
				rep.Firing++
			}
			last, known := tips[r.Name][instance]
			switch {
			case firing && (!known || last.State == StateResolved):
				changes = append(changes, e.transition(r, instance, &row, last, known, StateFiring, now))
			case !firing && known && last.State == StateFiring:
				changes = append(changes, e.transition(r, instance, &row, last, known, StateResolved, now))
			}
		}
		// A firing instance without a row any more resolves.
		for instance, last := range tips[r.Name] {
			if !seen[instance] && last.State == StateFiring {
				changes = append(changes, e.transition(r, instance, nil, last, true, StateResolved, now))
			}
		}
	}
	slices.SortFunc(changes, func(a, b Transition) int {
		return cmp.Or(cmp.Compare(a.Rule, b.Rule), cmp.Compare(a.Instance, b.Instance))
	})
	if err := e.record(ctx, changes); err != nil {
		return rep, fmt.Errorf("alerts: recording %d transitions: %w", len(changes), err)
	}
	rep.Transitions = changes
	for _, t := range changes {
		e.Logger.Info("alert "+t.State, "rule", t.Rule, "labels", t.Labels, "summary", t.Summary)
		if tips[t.Rule] == nil {
			tips[t.Rule] = map[string]tip{}
		}
		tips[t.Rule][t.Instance] = tip{Transition: t}
	}
	e.deliver(ctx, tips, now, &rep)
	return rep, nil
}

// readTips reads the tip of every instance: rule -> instance -> tip.
func (e *Evaluator) readTips(ctx context.Context) (map[string]map[string]tip, error) {
	rows, err := e.ClickHouse.Query(ctx, sql.Query("alert_tips"))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]map[string]tip{}
	for rows.Next() {
		var t tip
		if err := rows.Scan(&t.Rule, &t.Instance, &t.Seq, &t.ID, &t.State, &t.labelsText, &t.Value, &t.valueText, &t.Summary, &t.At, &t.StartsAt); err != nil {
			return nil, err
		}
		t.Labels = map[string]string{}
		_ = json.Unmarshal([]byte(t.Instance), &t.Labels)
		if out[t.Rule] == nil {
			out[t.Rule] = map[string]tip{}
		}
		out[t.Rule][t.Instance] = t
	}
	return out, rows.Err()
}

// figures runs the rule's query over [now - Window, now) (and the previous period for a
// previous_period change) and returns its rows by instance.
func (e *Evaluator) figures(ctx context.Context, r Rule, now time.Time) (map[string]instanceRow, error) {
	p := r.source(e.Dashboards)
	cols := e.columns()
	run := func(from, to time.Time) (map[string]instanceRow, error) {
		res, err := dashboards.Run(ctx, e.ClickHouse, p, dashboards.Filters{From: from, To: to, Now: to, Limit: dashboards.MaxLimit, MinCalls: 1})
		if err != nil {
			return nil, err
		}
		return r.instances(res, cols)
	}
	rows, err := run(now.Add(-r.Window), now)
	if err != nil || r.Change == nil || r.Change.Baseline != BaselinePreviousPeriod {
		return rows, err
	}
	prev, err := run(now.Add(-2*r.Window), now.Add(-r.Window))
	if err != nil {
		return nil, fmt.Errorf("previous period: %w", err)
	}
	for k, row := range rows {
		if b, ok := prev[k]; ok {
			row.baseline, row.baseVolume = b.value, b.volume
			rows[k] = row
		}
	}
	return rows, nil
}

func (e *Evaluator) columns() dashboards.Columns {
	if len(e.Dashboards) > 0 {
		return e.Dashboards[0].Columns
	}
	return nil
}

// instances reads a result's rows by instance (the canonical JSON of the label values). Two
// rows of one instance are a mistake in the rule (its labels do not name a row) and refused.
func (r Rule) instances(res *dashboards.Result, cols dashboards.Columns) (map[string]instanceRow, error) {
	col := map[string]int{}
	for i, c := range res.Columns {
		col[c.Name] = i
	}
	need := append([]string{r.Value}, r.Labels...)
	need = append(need, r.Details...)
	if r.Volume != "" {
		need = append(need, r.Volume)
	}
	if r.Change != nil && r.Change.Baseline != BaselinePreviousPeriod {
		need = append(need, r.Change.Baseline)
		if r.Change.BaselineVolume != "" {
			need = append(need, r.Change.BaselineVolume)
		}
	}
	for _, n := range need {
		if _, ok := col[n]; !ok {
			return nil, fmt.Errorf("the query returns no column %q", n)
		}
	}
	num := func(row []any, name string) *float64 {
		if f, ok := row[col[name]].(float64); ok {
			return &f
		}
		return nil
	}
	out := map[string]instanceRow{}
	for _, row := range res.Rows {
		ir := instanceRow{labels: map[string]string{}, value: num(row, r.Value)}
		for _, l := range r.Labels {
			ir.labels[l] = cols.Text(l, row[col[l]], res.Columns[col[l]].Type) // control and bidi characters escaped
		}
		if r.Volume != "" {
			ir.volume = num(row, r.Volume)
		}
		if r.Change != nil && r.Change.Baseline != BaselinePreviousPeriod {
			ir.baseline = num(row, r.Change.Baseline)
			if r.Change.BaselineVolume != "" {
				ir.baseVolume = num(row, r.Change.BaselineVolume)
			}
		}
		for _, d := range r.Details {
			if text := cols.Text(d, row[col[d]], res.Columns[col[d]].Type); text != "" {
				ir.details = append(ir.details, cols.Label(d)+": "+text)
			}
		}
		key := instanceKey(ir.labels)
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("two rows for the instance %s: the labels %v do not name one row", key, r.Labels)
		}
		out[key] = ir
	}
	return out, nil
}

// instanceKey is the canonical JSON of an instance's label values (keys sorted).
func instanceKey(labels map[string]string) string {
	data, _ := json.Marshal(labels) // a map of strings always encodes, keys sorted
	return string(data)
}

// fires reports whether a row's figures meet the rule: enough volume, and the threshold
// crossed or the change large enough against a baseline with enough volume.
func (r Rule) fires(row instanceRow) bool {
	if row.value == nil {
		return false
	}
	if r.MinVolume > 0 && (row.volume == nil || *row.volume < r.MinVolume) {
		return false
	}
	v := *row.value
	switch {
	case r.Threshold != nil && r.Threshold.Above != nil:
		return v > *r.Threshold.Above
	case r.Threshold != nil && r.Threshold.Below != nil:
		return v < *r.Threshold.Below
	case r.Change != nil:
		if row.baseline == nil {
			return false
		}
		baseVolume := row.baseVolume
		if r.Change.Baseline == BaselinePreviousPeriod && r.MinVolume > 0 && (baseVolume == nil || *baseVolume < r.MinVolume) {
			return false
		}
		if r.Change.MinBaselineVolume > 0 && (baseVolume == nil || *baseVolume < r.Change.MinBaselineVolume) {
			return false
		}
		b := *row.baseline
		if r.Change.Relative {
			return b > 0 && (v-b)/b > r.Change.Above
		}
		return v-b > r.Change.Above
	}
	return false
}

// transition builds the next transition of an instance after last (known: it exists).
func (e *Evaluator) transition(r Rule, instance string, row *instanceRow, last tip, known bool, state string, now time.Time) Transition {
	t := Transition{Rule: r.Name, Instance: instance, State: state, At: now, Seq: 1}
	if known {
		t.Seq, t.PreviousID = last.Seq+1, last.ID
	}
	t.ID = transitionID(r.Name, instance, t.Seq, state, t.PreviousID)
	t.StartsAt = now
	if state == StateResolved && known {
		t.StartsAt = last.StartsAt
	}
	t.Labels = map[string]string{}
	if row != nil {
		t.Labels = row.labels
		t.Value, t.Volume = row.value, row.volume
	} else {
		_ = json.Unmarshal([]byte(instance), &t.Labels)
	}
	t.Summary = r.summary(e.columns(), row, state)
	return t
}

// summary is a transition's line for people, e.g. "Dead-letter rate 3.2% over 1,000 events,
// above 1% · Most frequent class: bad_json" or "Dead-letter rate back to 0.4% (above 1%
// fires)".
func (r Rule) summary(cols dashboards.Columns, row *instanceRow, state string) string {
	spec := cols.Spec(r.Value)
	if row == nil || row.value == nil {
		return fmt.Sprintf("%s: no data in the last %s (it fires %s)", spec.Label, shortDuration(r.Window), r.ThresholdText(cols))
	}
	text := spec.Label + " " + dashboards.FormatValue(spec.Format, *row.value)
	if row.volume != nil && r.Volume != "" {
		vs := cols.Spec(r.Volume)
		unit := cmp.Or(vs.Unit, strings.ToLower(vs.Label))
		text += fmt.Sprintf(" over %s %s", dashboards.FormatValue(dashboards.FormatCount, *row.volume), unit)
	}
	text += " in the last " + shortDuration(r.Window)
	if row.baseline != nil {
		text += fmt.Sprintf(" (baseline %s)", dashboards.FormatValue(spec.Format, *row.baseline))
	}
	if state == StateFiring {
		text += ", " + r.ThresholdText(cols)
	} else {
		text += "; it fires " + r.ThresholdText(cols)
		if r.MinVolume > 0 {
			text += fmt.Sprintf(" with at least %s", dashboards.FormatValue(dashboards.FormatCount, r.MinVolume))
		}
	}
	if len(row.details) > 0 {
		text += " · " + strings.Join(row.details, " · ")
	}
	return text
}

// shortDuration writes 1h0m0s as "1h", 24h as "24h", 90m as "1h30m".
func shortDuration(d time.Duration) string {
	s := d.String()
	s = strings.TrimSuffix(s, "0s")
	return strings.TrimSuffix(s, "0m")
}

// record inserts the transitions (every replica that computed one may insert it: same id,
// same key, collapsed).
func (e *Evaluator) record(ctx context.Context, ts []Transition) error {
	if len(ts) == 0 {
		return nil
	}
	batch, err := e.ClickHouse.PrepareBatch(ctx, `INSERT INTO mcpulse.alert_transitions (transition_id, rule, instance, seq, state,
previous_id, labels, value, value_text, volume, summary, at, firing_since, recorded_by)`)
	if err != nil {
		return err
	}
	cols := e.columns()
	for _, t := range ts {
		r := e.rule(t.Rule)
		valueText := ""
		if t.Value != nil {
			valueText = dashboards.FormatValue(cols.Spec(r.Value).Format, *t.Value)
		}
		if err := batch.Append(t.ID, t.Rule, t.Instance, t.Seq, t.State, t.PreviousID, labelsText(t.Labels), t.Value, valueText,
			t.Volume, t.Summary, t.At, t.StartsAt, e.Replica); err != nil {
			_ = batch.Abort()
			return fmt.Errorf("BUG: append transition: %w", err)
		}
	}
	return batch.Send()
}

// labelsText shows labels for people: "campaign_id: onboarding · server: posthog".
func labelsText(labels map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		parts = append(parts, k+": "+labels[k])
	}
	return strings.Join(parts, " · ")
}

func (e *Evaluator) rule(name string) Rule {
	for _, r := range e.Rules {
		if r.Name == name {
			return r
		}
	}
	return Rule{Name: name}
}

// EvaluateAndLog is Evaluate for the scheduler (jobs.AlertEvaluator): it logs what the run
// did and returns its errors joined (a rule that could not be evaluated, a delivery that
// failed), so the job's metrics count the run as failed.
func (e *Evaluator) EvaluateAndLog(ctx context.Context, now time.Time) error {
	e.setDefaults()
	start := time.Now()
	rep, err := e.Evaluate(ctx, now)
	if err != nil {
		e.Logger.Error("alert evaluation failed", "err", err)
		return err
	}
	e.Logger.Info("alert evaluation", "rules", len(e.Rules), "instances", rep.Instances, "firing", rep.Firing,
		"transitions", len(rep.Transitions), "sent", rep.Sent, "failed", rep.Failed, "skipped", rep.Skipped, "took", time.Since(start))
	return errors.Join(rep.Errors...)
}
