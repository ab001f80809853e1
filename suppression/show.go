package suppression

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
	"github.com/redis/go-redis/v9"

	"github.com/mcpulse/mcpulse/ingest"
)

// ShowDefaultScanCount is the SCAN COUNT used to find an identity's pending continuation keys
// when ShowOptions.ScanCount (ResetOptions.ScanCount) is 0.
const ShowDefaultScanCount = 1000

// ShowOptions says whose suppression state Show reads. Give DistinctID (with InstanceURL,
// default ingest.DefaultInstanceURL) or IdentityHash, not both.
type ShowOptions struct {
	// Redis holds the suppression records. Required. A *redis.ClusterClient is scanned on the
	// master of the identity's slot.
	Redis redis.UniversalClient
	// ClickHouse holds the response history and the reset audit. Nil skips both.
	ClickHouse driver.Conn

	DistinctID   string
	InstanceURL  string
	IdentityHash string // 64 hex characters

	// ScanCount is the SCAN COUNT hint for the pending keys. Default: ShowDefaultScanCount.
	ScanCount int64
}

// ShowReport is everything Show found about one identity. Its JSON form is what
// `mcpulse suppression show --json` prints.
type ShowReport struct {
	IdentityHash string `json:"identity_hash"`
	DistinctID   string `json:"distinct_id,omitempty"`  // "" when only the hash was given
	InstanceURL  string `json:"instance_url,omitempty"` // "" when only the hash was given
	ResponseKey  string `json:"response_key"`

	// Record is the :response record, nil when there is none or it is not valid JSON
	// (RecordRaw and RecordError then say what is stored).
	Record      *Record `json:"record"`
	RecordRaw   string  `json:"record_raw,omitempty"`
	RecordError string  `json:"record_error,omitempty"`
	// TTL is the record key's PTTL: -2ns when there is no record, -1ns when it has no TTL
	// (accepted, declined), else the time left on the cooldown.
	TTL time.Duration `json:"-"`
	// CooldownLeftMillis is TTL in milliseconds, or null when the record has no TTL.
	CooldownLeftMillis *int64 `json:"cooldown_left_ms"`

	// PendingKeys are the identity's pending continuation keys, sorted.
	PendingKeys []string `json:"pending_keys"`

	ResetKey string `json:"reset_key"`
	// LastReset is the :reset watermark, nil when there is none or it is not valid JSON
	// (LastResetRaw then holds what is stored).
	LastReset    *ResetWatermark `json:"last_reset"`
	LastResetRaw string          `json:"last_reset_raw,omitempty"`

	// HistoryLoaded is false when no ClickHouse was given: History and Resets are then empty
	// because they were not read.
	HistoryLoaded bool               `json:"history_loaded"`
	History       []ShowHistoryEvent `json:"history"`
	Resets        []ShowAuditEntry   `json:"resets"`
}

// ShowHistoryEvent is one row of the identity's recruitment_events.
type ShowHistoryEvent struct {
	Timestamp    time.Time  `json:"timestamp"`
	Kind         string     `json:"kind"`
	CampaignID   string     `json:"campaign_id"`
	InvitationID string     `json:"invitation_id"`
	Response     string     `json:"response,omitempty"`
	RespondedAt  *time.Time `json:"responded_at,omitempty"`
}

// ShowAuditEntry is one row of the identity's suppression_audit (an ops reset).
type ShowAuditEntry struct {
	AuditID     string    `json:"audit_id"`
	At          time.Time `json:"at"`
	Action      string    `json:"action"`
	Actor       string    `json:"actor"`
	Reason      string    `json:"reason"`
	DeletedKeys []string  `json:"deleted_keys"`
}

// Unknown reports whether Show found nothing at all for the identity: no record, no pending
// key, no reset watermark and (when ClickHouse was read) no history or reset audit.
func (r *ShowReport) Unknown() bool {
	return r.Record == nil && r.RecordRaw == "" && len(r.PendingKeys) == 0 && r.LastReset == nil &&
		r.LastResetRaw == "" && len(r.History) == 0 && len(r.Resets) == 0
}

// Show reads one identity's suppression state: the :response record and its PTTL, the pending
// continuation keys (SCAN MATCH on the identity's own pattern, never KEYS), the :reset
// watermark, and, from ClickHouse, the response history and the reset audit.
func Show(ctx context.Context, opts ShowOptions) (*ShowReport, error) {
	if opts.Redis == nil {
		return nil, errors.New("suppression show: no Redis client")
	}
	id, err := opsResolveIdentity(opts.DistinctID, opts.InstanceURL, opts.IdentityHash)
	if err != nil {
		return nil, err
	}
	rep := &ShowReport{
		IdentityHash: id.hash, DistinctID: id.distinctID, InstanceURL: id.instanceURL,
		ResponseKey: ResponseKey(id.hash), ResetKey: ResetKey(id.hash),
		PendingKeys: []string{}, History: []ShowHistoryEvent{}, Resets: []ShowAuditEntry{},
	}
	node, err := opsNodeFor(ctx, opts.Redis, id)
	if err != nil {
		return nil, err
	}

	pipe := node.Pipeline()
	getRec := pipe.Get(ctx, rep.ResponseKey)
	pttl := pipe.PTTL(ctx, rep.ResponseKey)
	getReset := pipe.Get(ctx, rep.ResetKey)
	_, _ = pipe.Exec(ctx) // each command's error is checked below
	for _, c := range []struct {
		key string
		err error
	}{{rep.ResponseKey, getRec.Err()}, {rep.ResponseKey, pttl.Err()}, {rep.ResetKey, getReset.Err()}} {
		if c.err != nil && !errors.Is(c.err, redis.Nil) {
			return nil, opsRedisErr(fmt.Sprintf("reading %s for identity %s", c.key, id), c.err)
		}
	}
	if raw, err := getRec.Result(); err == nil {
		rep.Record, rep.RecordError = opsParseRecord(raw)
		if rep.Record == nil {
			rep.RecordRaw = raw
		}
		rep.TTL = pttl.Val()
		if rep.TTL >= 0 {
			ms := rep.TTL.Milliseconds()
			rep.CooldownLeftMillis = &ms
		}
	} else {
		rep.TTL = -2
	}
	if raw, err := getReset.Result(); err == nil {
		var wm ResetWatermark
		if json.Unmarshal([]byte(raw), &wm) == nil {
			rep.LastReset = &wm
		} else {
			rep.LastResetRaw = raw
		}
	}

	if rep.PendingKeys, err = opsPendingKeys(ctx, node, id, opts.ScanCount); err != nil {
		return nil, err
	}

	if opts.ClickHouse != nil {
		if err := showLoadHistory(ctx, opts.ClickHouse, rep); err != nil {
			return nil, fmt.Errorf("identity %s: %w", id, err)
		}
		rep.HistoryLoaded = true
	}
	return rep, nil
}

func showLoadHistory(ctx context.Context, ch driver.Conn, rep *ShowReport) error {
	rows, err := ch.Query(ctx, `SELECT timestamp, kind, campaign_id, invitation_id, response, responded_at
FROM mcpulse.recruitment_events FINAL WHERE identity_hash = ? ORDER BY timestamp, kind`, rep.IdentityHash)
	if err != nil {
		return fmt.Errorf("reading mcpulse.recruitment_events: %w", err)
	}
	for rows.Next() {
		var ev ShowHistoryEvent
		if err := rows.Scan(&ev.Timestamp, &ev.Kind, &ev.CampaignID, &ev.InvitationID, &ev.Response, &ev.RespondedAt); err != nil {
			rows.Close()
			return fmt.Errorf("reading mcpulse.recruitment_events: %w", err)
		}
		ev.Timestamp = ev.Timestamp.UTC()
		if ev.RespondedAt != nil {
			t := ev.RespondedAt.UTC()
			ev.RespondedAt = &t
		}
		rep.History = append(rep.History, ev)
	}
	err = rows.Err()
	rows.Close()
	if err != nil {
		return fmt.Errorf("reading mcpulse.recruitment_events: %w", err)
	}

	rows, err = ch.Query(ctx, `SELECT audit_id, at, action, actor, reason, deleted_keys
FROM mcpulse.suppression_audit FINAL WHERE identity_hash = ? ORDER BY at, audit_id`, rep.IdentityHash)
	if err != nil {
		return fmt.Errorf("reading mcpulse.suppression_audit: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var a ShowAuditEntry
		if err := rows.Scan(&a.AuditID, &a.At, &a.Action, &a.Actor, &a.Reason, &a.DeletedKeys); err != nil {
			return fmt.Errorf("reading mcpulse.suppression_audit: %w", err)
		}
		a.At = a.At.UTC()
		if a.DeletedKeys == nil {
			a.DeletedKeys = []string{}
		}
		rep.Resets = append(rep.Resets, a)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading mcpulse.suppression_audit: %w", err)
	}
	return nil
}

// WriteText writes the report for a terminal. Every string that came from outside (distinct
// ids, campaign ids, invitation ids, actors, reasons, key names) is quoted with
// strconv.QuoteToGraphic, so control characters and escape sequences are shown, not obeyed.
func (r *ShowReport) WriteText(w io.Writer) error {
	ew := &opsErrWriter{w: w}
	p := ew.printf
	p("identity hash   %s\n", r.IdentityHash)
	if r.DistinctID != "" || r.InstanceURL != "" {
		p("distinct_id     %s\n", opsQuote(r.DistinctID))
		p("instance_url    %s\n", opsQuote(r.InstanceURL))
	}
	switch {
	case r.Record != nil:
		p("record          %s\n", r.ResponseKey)
		p("  state         %s\n", opsQuote(r.Record.Response))
		p("  campaign      %s\n", opsQuote(r.Record.CampaignID))
		p("  responded_at  %s\n", opsQuote(r.Record.RespondedAt))
		if r.Record.DistinctID != r.DistinctID {
			p("  distinct_id   %s\n", opsQuote(r.Record.DistinctID))
		}
	case r.RecordRaw != "":
		p("record          %s is not a valid record (%s): %s\n", r.ResponseKey, r.RecordError, opsQuoteCut(r.RecordRaw, 200))
	default:
		p("record          none\n")
	}
	switch {
	case r.TTL >= 0:
		p("cooldown        %s left (PTTL %d ms)\n", opsFormatDuration(r.TTL), r.TTL.Milliseconds())
	case r.TTL == -1:
		p("cooldown        none (the record has no TTL)\n")
	}
	p("pending keys    %d\n", len(r.PendingKeys))
	for _, k := range r.PendingKeys {
		p("  %s\n", opsQuoteIfNeeded(k))
	}
	switch {
	case r.LastReset != nil:
		p("last reset      %s by %s: %s\n", opsQuote(r.LastReset.ResetAt), opsQuote(r.LastReset.Actor), opsQuote(r.LastReset.Reason))
		if covers, ok := r.LastReset.Covers(); ok {
			p("  ignores       responses dated up to %s\n", FormatTime(covers))
		}
	case r.LastResetRaw != "":
		p("last reset      %s is not valid JSON: %s\n", r.ResetKey, opsQuoteCut(r.LastResetRaw, 200))
	default:
		p("last reset      none\n")
	}
	if !r.HistoryLoaded {
		p("history         not read (no ClickHouse)\n")
		return ew.err
	}
	p("history         %d event(s)\n", len(r.History))
	for _, ev := range r.History {
		line := fmt.Sprintf("  %s  %-20s campaign=%s invitation=%s", ev.Timestamp.Format(time.RFC3339),
			opsQuoteIfNeeded(ev.Kind), opsQuote(ev.CampaignID), opsQuote(ev.InvitationID))
		if ev.Response != "" {
			line += " response=" + opsQuote(ev.Response)
		}
		if ev.RespondedAt != nil {
			line += " responded_at=" + ev.RespondedAt.Format(time.RFC3339)
		}
		p("%s\n", line)
	}
	p("resets          %d\n", len(r.Resets))
	for _, a := range r.Resets {
		p("  %s  %s by %s: %s (deleted %d key(s); audit %s)\n", a.At.Format(time.RFC3339), opsQuoteIfNeeded(a.Action),
			opsQuote(a.Actor), opsQuote(a.Reason), len(a.DeletedKeys), opsQuoteIfNeeded(a.AuditID))
	}
	if r.Unknown() {
		p("(no suppression state or history for this identity)\n")
	}
	return ew.err
}

// ---- helpers shared by show, reset and list (prefixed ops*: the package has other authors) ----

// opsIdentity is a resolved identity.
type opsIdentity struct {
	hash        string
	distinctID  string // "" when given by hash
	instanceURL string // "" when given by hash
	byHash      bool
}

// String names the identity in errors: the hash, and the distinct id when known.
func (id opsIdentity) String() string {
	if id.byHash {
		return id.hash
	}
	return fmt.Sprintf("%s (distinct_id %s)", id.hash, opsQuoteCut(id.distinctID, 80))
}

// ErrBadIdentity is matched (errors.Is) by the error for a distinct id or instance URL that the
// pipeline refuses (ingest.CheckIdentity): invalid UTF-8, an unpaired UTF-16 surrogate, a
// distinct id over ingest.MaxDistinctIDLength characters. Hashing it would name an identity no
// event can have (invalid bytes hash as U+FFFD), so show and reset refuse it instead.
var ErrBadIdentity = errors.New("not a valid identity")

// CheckIdentityArgs checks an identity as show and reset take it, before any store is
// contacted: a distinct id (with its instance URL) or an identity hash, not both. Its errors
// are theirs (ErrBadIdentity for what the pipeline refuses).
func CheckIdentityArgs(distinctID, instanceURL, hash string) error {
	_, err := opsResolveIdentity(distinctID, instanceURL, hash)
	return err
}

// opsResolveIdentity turns a distinct id (and instance URL) or an identity hash into an
// identity. Exactly one of distinctID and hash must be given.
func opsResolveIdentity(distinctID, instanceURL, hash string) (opsIdentity, error) {
	switch {
	case hash != "" && distinctID != "":
		return opsIdentity{}, errors.New("give a distinct id or an identity hash, not both")
	case hash != "":
		h := strings.ToLower(strings.TrimSpace(hash))
		if !IsIdentityHash(h) {
			return opsIdentity{}, fmt.Errorf("identity hash %s: want 64 hex characters", opsQuoteCut(hash, 80))
		}
		return opsIdentity{hash: h, byHash: true}, nil
	case distinctID != "":
		if instanceURL == "" {
			instanceURL = ingest.DefaultInstanceURL
		}
		if err := ingest.CheckIdentity(instanceURL, distinctID); err != nil {
			return opsIdentity{}, fmt.Errorf("%w: %v (the pipeline refuses events carrying it, so it names no identity)", ErrBadIdentity, err)
		}
		return opsIdentity{hash: ingest.IdentityHash(instanceURL, distinctID), distinctID: distinctID, instanceURL: instanceURL}, nil
	}
	return opsIdentity{}, errors.New("no identity: give a distinct id (--distinct-id) or an identity hash (--identity-hash)")
}

// opsNodeFor returns the client to SCAN an identity's keys on: the master of the identity's
// slot on a Redis Cluster (every key of one identity shares the hash tag), else rdb itself.
func opsNodeFor(ctx context.Context, rdb redis.UniversalClient, id opsIdentity) (redis.Cmdable, error) {
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		node, err := cc.MasterForKey(ctx, ResponseKey(id.hash))
		if err != nil {
			return nil, opsRedisErr(fmt.Sprintf("finding the cluster node of %s for identity %s", ResponseKey(id.hash), id), err)
		}
		return node, nil
	}
	return rdb, nil
}

// opsPendingKeys finds an identity's pending continuation keys with SCAN MATCH (bounded
// COUNT, never KEYS) on node, sorted and without the duplicates SCAN may return.
func opsPendingKeys(ctx context.Context, node redis.Cmdable, id opsIdentity, count int64) ([]string, error) {
	if count <= 0 {
		count = ShowDefaultScanCount
	}
	pattern := PendingKeyPattern(id.hash)
	seen := map[string]bool{}
	keys := []string{}
	var cursor uint64
	for {
		batch, next, err := node.Scan(ctx, cursor, pattern, count).Result()
		if err != nil {
			return nil, opsRedisErr(fmt.Sprintf("scanning for %s of identity %s", pattern, id), err)
		}
		for _, k := range batch {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	sort.Strings(keys)
	return keys, nil
}

// opsParseRecord decodes a :response value; on failure it returns nil and the reason.
func opsParseRecord(raw string) (*Record, string) {
	var rec Record
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil, "not a JSON record"
	}
	return &rec, ""
}

// opsRedisError is a Redis failure described by what was being done (naming the identity and
// the key); its text carries only the first line of Redis' own message, cut short, so script
// bodies and server internals are not dumped. Unwrap gives the original error.
type opsRedisError struct {
	what string
	err  error
}

func (e *opsRedisError) Error() string {
	msg := e.err.Error()
	if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
		msg = msg[:i]
	}
	var rerr redis.Error
	if errors.As(e.err, &rerr) {
		// A server reply: "ERR user_script:3: ... script: <sha>, on @user_script:3." and the
		// like; keep the gist only.
		if i := strings.Index(msg, " script: "); i >= 0 {
			msg = msg[:i]
		}
	}
	return e.what + ": " + opsCut(msg, 160)
}

func (e *opsRedisError) Unwrap() error { return e.err }

func opsRedisErr(what string, err error) error { return &opsRedisError{what: what, err: err} }

// opsQuote quotes an untrusted string for a terminal (control and non-graphic characters
// escaped).
func opsQuote(s string) string { return strconv.QuoteToGraphic(s) }

// opsQuoteIfNeeded prints s as is when it is plain graphic text without quotes or spaces,
// else quoted.
func opsQuoteIfNeeded(s string) string {
	q := strconv.QuoteToGraphic(s)
	if s != "" && q[1:len(q)-1] == s && !strings.ContainsAny(s, " \u00a0") {
		return s
	}
	return q
}

// opsJSONText prints a stored JSON value as is when it is valid JSON of graphic characters
// only (safe on a terminal), else quoted and cut to n bytes.
func opsJSONText(s string, n int) string {
	if len(s) <= n && json.Valid([]byte(s)) {
		safe := true
		for _, r := range s {
			if !strconv.IsGraphic(r) {
				safe = false
				break
			}
		}
		if safe {
			return s
		}
	}
	return opsQuoteCut(s, n)
}

// opsQuoteCut quotes s cut to n bytes (on a rune boundary, "…" appended when cut).
func opsQuoteCut(s string, n int) string {
	if len(s) <= n {
		return opsQuote(s)
	}
	return opsQuote(opsCut(s, n)) + "…"
}

func opsCut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// opsFormatDuration writes a duration as "6d23h59m" (seconds below an hour).
func opsFormatDuration(d time.Duration) string {
	if d < time.Hour {
		return d.Round(time.Second).String()
	}
	d = d.Round(time.Minute)
	days := d / (24 * time.Hour)
	d -= days * 24 * time.Hour
	h := d / time.Hour
	d -= h * time.Hour
	m := d / time.Minute
	if days > 0 {
		return fmt.Sprintf("%dd%dh%dm", days, h, m)
	}
	return fmt.Sprintf("%dh%dm", h, m)
}

// opsErrWriter keeps the first write error so a report can be written without checking each
// line.
type opsErrWriter struct {
	w   io.Writer
	err error
}

func (e *opsErrWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}
