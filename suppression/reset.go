package suppression

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"strconv"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
	"github.com/segmentio/kafka-go"

	"github.com/mcpulse/mcpulse/ingest"
)

// ResetBatchLimit is the most identities ResetBatch resets without Yes.
const ResetBatchLimit = 100

// resetAuditTimeout bounds the audit publish once Redis has been changed; it is not cut short
// by the caller's cancellation (an interrupted reset should still be audited).
const resetAuditTimeout = 30 * time.Second

// ResetWatermark is the JSON value of an identity's :reset key (DESIGN.md §3): responses
// dated up to ResetMargin after ResetAt are ignored (ResetCovers), so neither a replay nor a
// response received before the reset can bring the record back.
type ResetWatermark struct {
	ResetAt string `json:"reset_at"` // FormatTime of the Redis server's TIME at the reset
	Actor   string `json:"actor"`
	Reason  string `json:"reason"`
}

// Covers is the last instant a response may be dated and be ignored after this reset
// (reset_at + ResetMargin), or false when reset_at is not a time the script reads.
func (w ResetWatermark) Covers() (time.Time, bool) {
	at, ok := ParseTime(w.ResetAt)
	return at.Add(ResetMargin), ok
}

// ResetPublisher publishes the audit event; *ingest.Publisher is one.
type ResetPublisher interface {
	PublishRaw(ctx context.Context, topic string, key, value []byte, headers ...kafka.Header) error
}

// ResetOptions says whose suppression state Reset clears, and who does it why. Give
// DistinctID (with InstanceURL, default ingest.DefaultInstanceURL) or IdentityHash.
type ResetOptions struct {
	// Redis holds the suppression records. Required.
	Redis redis.UniversalClient
	// ClickHouse holds the response history, which tells an identity without Redis state
	// but with history (reset it: the watermark stops replays) from an unknown one. Required.
	ClickHouse driver.Conn
	// Publisher sends the audit event to ingest.TopicAudit. Required unless DryRun.
	Publisher ResetPublisher

	DistinctID   string
	InstanceURL  string
	IdentityHash string

	// Actor is who resets (see DefaultResetActor). Required.
	Actor string
	// Reason is why. Required.
	Reason string
	// DryRun finds what would be deleted and writes nothing at all (Redis, Kafka).
	DryRun bool

	// ScanCount is the SCAN COUNT hint for the pending keys. Default: ShowDefaultScanCount.
	ScanCount int64
}

// ResetReport is what Reset did, or with DryRun would do.
type ResetReport struct {
	IdentityHash string `json:"identity_hash"`
	DistinctID   string `json:"distinct_id,omitempty"`
	InstanceURL  string `json:"instance_url,omitempty"`
	DryRun       bool   `json:"dry_run"`

	// PreviousRecord is the :response value before the reset as stored (possibly not JSON),
	// "" when there was none (HadRecord false).
	PreviousRecord string `json:"previous_record,omitempty"`
	HadRecord      bool   `json:"had_record"`
	// PendingKeys are the pending continuation keys SCAN found.
	PendingKeys []string `json:"pending_keys"`
	// HistoryEvents is how many recruitment_events rows the identity has.
	HistoryEvents uint64 `json:"history_events"`

	// DeletedKeys are the keys the script deleted (with DryRun: the keys it would delete).
	DeletedKeys []string `json:"deleted_keys"`
	// ResetKey and Watermark are the watermark written (with DryRun: that would be written).
	ResetKey  string         `json:"reset_key"`
	Watermark ResetWatermark `json:"watermark"`
	// Audit is the audit event once Kafka acknowledged it (nil with DryRun or when publishing
	// failed); AuditJSON is its message value, set even when publishing failed.
	Audit     *ingest.AuditEvent `json:"audit,omitempty"`
	AuditJSON json.RawMessage    `json:"-"`
}

// ErrResetUnknownIdentity is matched (errors.Is) by a *ResetUnknownIdentityError.
var ErrResetUnknownIdentity = errors.New("unknown identity")

// ResetUnknownIdentityError is Reset's error for an identity with no :response record, no
// pending key and no recruitment_events row: nothing was written.
type ResetUnknownIdentityError struct {
	IdentityHash string
	DistinctID   string // "" when given by hash
	ByHash       bool
}

func (e *ResetUnknownIdentityError) Error() string {
	if e.ByHash {
		return fmt.Sprintf("no suppression state or history for identity %s", e.IdentityHash)
	}
	return fmt.Sprintf("no suppression state or history for identity %s (distinct_id %s)", e.IdentityHash, opsQuoteCut(e.DistinctID, 80))
}

// Is makes errors.Is(err, ErrResetUnknownIdentity) true.
func (e *ResetUnknownIdentityError) Is(target error) bool { return target == ErrResetUnknownIdentity }

// ResetAuditError is Reset's error when Redis WAS changed but the audit event could not be
// published: Event is the audit event's JSON, to be published again by hand (to
// ingest.TopicAudit, keyed by the identity hash).
type ResetAuditError struct {
	IdentityHash string
	Event        []byte
	Err          error
}

func (e *ResetAuditError) Error() string {
	return fmt.Sprintf("identity %s was reset in Redis but its audit event was NOT published to %s: %v",
		e.IdentityHash, ingest.TopicAudit, e.Err)
}

func (e *ResetAuditError) Unwrap() error { return e.Err }

// resetScript deletes an identity's :response record and pending keys and writes its :reset
// watermark, atomically, with reset_at read from the server's clock (TIME) in the same
// script: the clock every response of the identity is applied under, whatever the clock of
// the machine running the reset says (the reset rule, ResetCovers). Every key carries the
// identity's hash tag, so they share one slot (and one server's clock on a cluster).
//
// KEYS[1] response key, KEYS[2] reset key, KEYS[3..] pending keys. ARGV[1] actor, ARGV[2]
// reason, each as a JSON string. Returns {reset_at (ms since epoch), had_record ("1"/"0"),
// previous record or "", deleted key...}.
var resetScript = redis.NewScript(luaISOMs + `
-- Before Redis 5, a script that reads TIME may write only under effects replication.
if redis.replicate_commands then pcall(redis.replicate_commands) end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local reset_at = iso_ms(ms)

local prev = redis.call('GET', KEYS[1])
local out = {string.format('%.0f', ms), '0', ''}
if prev then
  out[2] = '1'
  out[3] = prev
end
for i = 1, #KEYS do
  if i ~= 2 and redis.call('DEL', KEYS[i]) == 1 then
    out[#out + 1] = KEYS[i]
  end
end
redis.call('SET', KEYS[2], '{"reset_at":"' .. reset_at .. '","actor":' .. ARGV[1] .. ',"reason":' .. ARGV[2] .. '}')
return out
`)

// DefaultResetActor is the default actor of a reset: the OS user name, else $USER ("" when
// neither is known).
func DefaultResetActor() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return os.Getenv("USER")
}

func (o *ResetOptions) check() error {
	var errs []error
	if o.Redis == nil {
		errs = append(errs, errors.New("no Redis client"))
	}
	if o.ClickHouse == nil {
		errs = append(errs, errors.New("no ClickHouse connection (needed to tell an unknown identity from one with history)"))
	}
	if o.Publisher == nil && !o.DryRun {
		errs = append(errs, errors.New("no Kafka publisher for the audit event"))
	}
	if strings.TrimSpace(o.Reason) == "" {
		errs = append(errs, errors.New("a reason is required (--reason): say why this identity is reset, it goes in the audit"))
	}
	if strings.TrimSpace(o.Actor) == "" {
		errs = append(errs, errors.New("an actor is required (--actor): who resets, kept in the audit"))
	}
	return errors.Join(errs...)
}

// Reset clears one identity's suppression state: it reads the :response record and SCANs the
// identity's pending continuation keys, then in one Lua script deletes them and writes the
// :reset watermark {"reset_at", "actor", "reason"} (no TTL), reset_at being the Redis server's
// TIME (milliseconds), then publishes an ingest.AuditEvent at that instant to
// ingest.TopicAudit keyed by the identity hash and waits for the ack. Responses dated up to
// ResetMargin after reset_at never count again (ResetCovers).
//
// Errors: a *ResetUnknownIdentityError (errors.Is ErrResetUnknownIdentity) when the identity
// has no record, no pending key and no history: nothing is written. A *ResetAuditError when
// Redis was changed but the audit could not be published (the report is returned too). With
// DryRun nothing is written anywhere and the report says what would have been.
func Reset(ctx context.Context, opts ResetOptions) (*ResetReport, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("suppression reset: %w", err)
	}
	id, err := opsResolveIdentity(opts.DistinctID, opts.InstanceURL, opts.IdentityHash)
	if err != nil {
		return nil, err
	}
	return resetIdentity(ctx, &opts, id)
}

func resetIdentity(ctx context.Context, opts *ResetOptions, id opsIdentity) (*ResetReport, error) {
	responseKey, resetKey := ResponseKey(id.hash), ResetKey(id.hash)
	rep := &ResetReport{
		IdentityHash: id.hash, DistinctID: id.distinctID, InstanceURL: id.instanceURL,
		DryRun: opts.DryRun, ResetKey: resetKey, PendingKeys: []string{}, DeletedKeys: []string{},
	}
	node, err := opsNodeFor(ctx, opts.Redis, id)
	if err != nil {
		return nil, err
	}
	prev, err := node.Get(ctx, responseKey).Result()
	switch {
	case err == nil:
		rep.HadRecord, rep.PreviousRecord = true, prev
	case !errors.Is(err, redis.Nil):
		return nil, opsRedisErr(fmt.Sprintf("reading %s for identity %s", responseKey, id), err)
	}
	if rep.PendingKeys, err = opsPendingKeys(ctx, node, id, opts.ScanCount); err != nil {
		return nil, err
	}
	if err := opts.ClickHouse.QueryRow(ctx, `SELECT count() FROM mcpulse.recruitment_events WHERE identity_hash = ?`,
		id.hash).Scan(&rep.HistoryEvents); err != nil {
		return nil, fmt.Errorf("identity %s: counting its rows in mcpulse.recruitment_events: %w", id, err)
	}
	if !rep.HadRecord && len(rep.PendingKeys) == 0 && rep.HistoryEvents == 0 {
		return nil, &ResetUnknownIdentityError{IdentityHash: id.hash, DistinctID: id.distinctID, ByHash: id.byHash}
	}

	rep.Watermark = ResetWatermark{Actor: opts.Actor, Reason: opts.Reason}
	if opts.DryRun {
		t, err := node.Time(ctx).Result()
		if err != nil {
			return nil, opsRedisErr(fmt.Sprintf("reading the clock of identity %s's Redis server", id), err)
		}
		rep.Watermark.ResetAt = FormatTime(t)
		if rep.HadRecord {
			rep.DeletedKeys = append(rep.DeletedKeys, responseKey)
		}
		rep.DeletedKeys = append(rep.DeletedKeys, rep.PendingKeys...)
		return rep, nil
	}

	actor, _ := json.Marshal(opts.Actor) // strings always marshal
	reason, _ := json.Marshal(opts.Reason)
	keys := append([]string{responseKey, resetKey}, rep.PendingKeys...)
	res, err := resetScript.Run(ctx, opts.Redis, keys, string(actor), string(reason)).StringSlice()
	if err != nil {
		return nil, opsRedisErr(fmt.Sprintf("resetting identity %s (keys %s, %s and %d pending key(s))", id, responseKey, resetKey, len(rep.PendingKeys)), err)
	}
	if len(res) < 3 {
		return nil, fmt.Errorf("resetting identity %s: unexpected reply from the reset script", id)
	}
	ms, err := strconv.ParseInt(res[0], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("resetting identity %s: unexpected reset time %q from the reset script", id, res[0])
	}
	at := time.UnixMilli(ms).UTC()
	rep.Watermark.ResetAt = FormatTime(at)
	rep.HadRecord, rep.PreviousRecord = res[1] == "1", res[2]
	if !rep.HadRecord {
		rep.PreviousRecord = ""
	}
	rep.DeletedKeys = append(rep.DeletedKeys, res[3:]...)

	ev := &ingest.AuditEvent{
		UUID:         uuid.Must(uuid.NewV7()).String(),
		Action:       ingest.AuditActionReset,
		At:           at,
		IdentityHash: id.hash,
		DistinctID:   id.distinctID,
		InstanceURL:  id.instanceURL,
		Actor:        opts.Actor,
		Reason:       opts.Reason,
		DeletedKeys:  rep.DeletedKeys,
	}
	if rep.HadRecord {
		ev.PreviousRecord = resetRawJSON(rep.PreviousRecord)
	}
	value, err := json.Marshal(ev)
	if err != nil { // cannot happen: strings, a time and valid raw JSON
		return rep, &ResetAuditError{IdentityHash: id.hash, Err: fmt.Errorf("encoding the audit event: %w", err)}
	}
	rep.AuditJSON = value
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), resetAuditTimeout)
	defer cancel()
	if err := opts.Publisher.PublishRaw(pctx, ingest.TopicAudit, []byte(id.hash), value); err != nil {
		return rep, &ResetAuditError{IdentityHash: id.hash, Event: value, Err: err}
	}
	rep.Audit = ev
	return rep, nil
}

// ResetCheckKafka checks, before anything is changed, that the brokers answer and topic
// ingest.TopicAudit exists, so that a reset is not left without its audit event by a wrong
// --brokers. (Kafka can still fail between this check and the publish.)
func ResetCheckKafka(ctx context.Context, brokers []string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var errs []error
	for _, b := range brokers {
		conn, err := (&kafka.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", b)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		parts, err := conn.ReadPartitions(ingest.TopicAudit)
		conn.Close()
		if err == nil && len(parts) > 0 {
			return nil
		}
		if err == nil {
			err = errors.New("no partitions")
		}
		return fmt.Errorf("kafka at %s: topic %s: %w (nothing was changed)", b, ingest.TopicAudit, err)
	}
	return fmt.Errorf("no Kafka broker of %s answers, so the reset could not be audited (nothing was changed): %w",
		strings.Join(brokers, ","), errors.Join(errs...))
}

// resetRawJSON returns a stored value as raw JSON for the audit: as is when it is valid JSON,
// else as a JSON string holding it.
func resetRawJSON(s string) json.RawMessage {
	if json.Valid([]byte(s)) {
		return json.RawMessage(s)
	}
	q, _ := json.Marshal(s)
	return q
}

// WriteText writes what Reset did (or with DryRun would do) for a terminal.
func (r *ResetReport) WriteText(w io.Writer) error {
	ew := &opsErrWriter{w: w}
	p := ew.printf
	verb := func(done, would string) string {
		if r.DryRun {
			return would
		}
		return done
	}
	who := r.IdentityHash
	if r.DistinctID != "" {
		who += " (distinct_id " + opsQuote(r.DistinctID) + ")"
	}
	if r.DryRun {
		p("dry run: would reset identity %s\n", who)
	} else {
		p("reset identity %s\n", who)
	}
	p("  history       %d event(s) in mcpulse.recruitment_events\n", r.HistoryEvents)
	if len(r.DeletedKeys) == 0 {
		p("  %s nothing (no record, no pending key)\n", verb("deleted", "would delete"))
	}
	for _, k := range r.DeletedKeys {
		line := fmt.Sprintf("  %s %s", verb("deleted", "would delete"), opsQuoteIfNeeded(k))
		if k == ResponseKey(r.IdentityHash) && r.HadRecord {
			line += " (was " + opsJSONText(r.PreviousRecord, 500) + ")"
		}
		p("%s\n", line)
	}
	p("  %s %s = {reset_at %s, actor %s, reason %s}\n", verb("wrote", "would write"), r.ResetKey,
		opsQuote(r.Watermark.ResetAt), opsQuote(r.Watermark.Actor), opsQuote(r.Watermark.Reason))
	if covers, ok := r.Watermark.Covers(); ok {
		p("  responses dated up to %s (reset_at + %s, the clock rule's margin) %s ignored\n",
			FormatTime(covers), ResetMargin, verb("are now", "would be"))
	}
	if r.DryRun {
		p("  would publish a %s audit event to %s\n", ingest.AuditActionReset, ingest.TopicAudit)
		p("  (dry run: nothing was written)\n")
	} else if r.Audit != nil {
		p("  published audit event %s to %s\n", r.Audit.UUID, ingest.TopicAudit)
	} else {
		p("  audit event NOT published to %s\n", ingest.TopicAudit)
	}
	return ew.err
}

// ResetTarget is one identity of a reset file: a distinct id, or an identity hash.
type ResetTarget struct {
	Line         int    // 1-based line number in the file
	DistinctID   string // "" when given by hash
	IdentityHash string // set for "hash:<64 hex>" lines
}

// String names the target as written in the file (quoted when it is a distinct id).
func (t ResetTarget) String() string {
	if t.IdentityHash != "" {
		return "hash:" + t.IdentityHash
	}
	return opsQuoteCut(t.DistinctID, 80)
}

// ParseResetTargets reads a reset file: one identity a line, a distinct id or
// "hash:<64 hex>"; surrounding blanks are trimmed, and blank lines and lines starting with
// '#' are skipped. A bad "hash:" line, and a distinct id the pipeline refuses
// (ingest.CheckIdentity: invalid UTF-8, an unpaired surrogate, too long), is an error naming
// its line; the error lists every bad line.
func ParseResetTargets(r io.Reader) ([]ResetTarget, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var out []ResetTarget
	var errs []error
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if h, ok := strings.CutPrefix(line, "hash:"); ok {
			h = strings.ToLower(strings.TrimSpace(h))
			if !IsIdentityHash(h) {
				errs = append(errs, fmt.Errorf("line %d: %s: want hash:<64 hex characters>", n, opsQuoteCut(line, 80)))
				continue
			}
			out = append(out, ResetTarget{Line: n, IdentityHash: h})
			continue
		}
		if err := ingest.CheckIdentity("", line); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s: %w: %v", n, opsQuoteCut(line, 80), ErrBadIdentity, err))
			continue
		}
		out = append(out, ResetTarget{Line: n, DistinctID: line})
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// ErrResetTooMany is ResetBatch's error for more than ResetBatchLimit identities without Yes.
var ErrResetTooMany = fmt.Errorf("more than %d identities", ResetBatchLimit)

// ResetBatchOutcome is the result of one identity of a ResetBatch.
type ResetBatchOutcome struct {
	Target ResetTarget
	Report *ResetReport // nil when the reset failed before writing
	Err    error
}

// ResetBatch resets each target in turn with the settings of base (its identity fields are
// ignored; InstanceURL applies to distinct ids), calling each (when not nil) after every
// identity. It refuses more than ResetBatchLimit targets unless yes, before touching anything.
// It carries on past an unknown identity or a failed one, and stops at once when an audit
// event could not be published (Redis was changed without an audit: the outcome's
// *ResetAuditError holds the event) or ctx is done. It returns how many identities failed,
// and an error when it refused or stopped early.
func ResetBatch(ctx context.Context, base ResetOptions, targets []ResetTarget, yes bool, each func(ResetBatchOutcome)) (failed int, err error) {
	if len(targets) > ResetBatchLimit && !yes {
		return 0, fmt.Errorf("%w: the file names %d; confirm with --yes (ops resets are one person at a time, not bulk)", ErrResetTooMany, len(targets))
	}
	if err := base.check(); err != nil {
		return 0, fmt.Errorf("suppression reset: %w", err)
	}
	for i, t := range targets {
		if err := ctx.Err(); err != nil {
			return failed, fmt.Errorf("stopped after %d of %d identities: %w", i, len(targets), err)
		}
		id, err := opsResolveIdentity(t.DistinctID, base.InstanceURL, t.IdentityHash)
		var rep *ResetReport
		if err == nil {
			rep, err = resetIdentity(ctx, &base, id)
		} else {
			err = fmt.Errorf("line %d: %w", t.Line, err)
		}
		if err != nil {
			failed++
		}
		if each != nil {
			each(ResetBatchOutcome{Target: t, Report: rep, Err: err})
		}
		var auditErr *ResetAuditError
		if errors.As(err, &auditErr) {
			return failed, fmt.Errorf("stopped after %d of %d identities: %w", i+1, len(targets), err)
		}
	}
	return failed, nil
}
