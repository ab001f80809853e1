package campaigns

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/migrations"
	mcsql "github.com/mcpulse/mcpulse/sql"
)

// DefaultRetention is how long Record keeps lint runs (campaign_lint_runs) by default: 30 days.
// Payload versions are kept for good: they are few, and they date every payload change.
const DefaultRetention = 30 * 24 * time.Hour

// RecordResult is what one Record stored. RunAt is the run's time (now, in whole UTC seconds).
// Rows counts the campaign_lint_runs rows (one per checked flag with variant ”, one per
// variant); Versions the flag_payload_versions rows written, of which NewVersions started a
// version (a variant first seen, or its payload hash changed) and Removed recorded a variant
// gone. Expired counts the lint-run rows older than the retention that were deleted.
type RecordResult struct {
	RunAt       time.Time `json:"run_at"`
	Rows        int       `json:"rows"`
	Versions    int       `json:"versions"`
	NewVersions int       `json:"new_versions"`
	Removed     int       `json:"removed"`
	Expired     uint64    `json:"expired"`
}

// storedVersion is the latest flag_payload_versions row of one variant.
type storedVersion struct {
	firstSeen time.Time
	sha       string
	removed   bool
}

type variantKey struct{ flag, variant string }

// Record stores one lint run in ClickHouse (migration 0041): rep is Lint's report of flags,
// now the run's time (truncated to the second, UTC).
//
// campaign_lint_runs gets, per flag in rep.Flags, a row with variant ” holding the flag's own
// problems (will_recruit: some variant recruits, or for mcp-intent-prompt has its prompt in
// use; exclusion_ok: every variant's) and one row per variant, named by its campaign id
// (VariantReport.CampaignID: the variant key, or mcp-research for a boolean recruitment flag):
// active, will_recruit (for mcp-intent-prompt, prompt_in_use), exclusion_ok (no
// exclusion_missing or exclusion_inverted problem), the payload's hash, its error and warning
// counts and its problems as parallel arrays. A flag in rep.Missing gets a row with variant ”,
// active 0 and the warning flag_missing.
//
// flag_payload_versions gets one row per variant: when the latest stored version of the
// variant has the same payload_sha256 (CanonicalPayload) and is not a removal, that version's
// first_seen is kept and last_seen becomes now (or first_seen, if later), even when the two
// runs fall in one second; otherwise a new version starts with first_seen = last_seen = now,
// or the second after the latest version's first_seen when now is not later (two runs with
// different payloads within one second each keep their version). A variant whose latest
// stored version is not a removal and that the flags no longer hold (or whose flag is missing) gets a row with removed = 1, an empty payload and
// hash, its first_seen chosen the same way; a flag reported flag_malformed removes none of its
// variants. A variant without a payload is stored with an empty payload and hash. A variant of
// mcp-intent-prompt whose prompt is not in use (the flag inactive, no condition selecting it,
// or a payload the server ignores: VariantReport.PromptInUse) counts as gone, since the server
// then serves the SDK's default description: its version ends with a removal row, and the
// prompt in use again starts a new version.
//
// Lint runs older than retention (0 means DefaultRetention) are then deleted (ALTER DELETE, only
// when there are some; on the sharded layout ON CLUSTER on the local table:
// migrations.MutationTarget). A negative retention is an error. Errors are ClickHouse's, wrapped.
func Record(ctx context.Context, conn driver.Conn, rep Report, flags []Flag, now time.Time, retention time.Duration) (RecordResult, error) {
	if retention < 0 {
		return RecordResult{}, fmt.Errorf("lint retention %s is negative", retention)
	}
	if retention == 0 {
		retention = DefaultRetention
	}
	now = now.UTC().Truncate(time.Second)
	res := RecordResult{RunAt: now}
	latest, err := latestVersions(ctx, conn)
	if err != nil {
		return res, err
	}

	byKey := map[string]Flag{}
	for _, f := range flags {
		if _, seen := byKey[f.Key]; !seen && !f.Deleted {
			byKey[f.Key] = f
		}
	}
	runs, err := conn.PrepareBatch(ctx, mcsql.Campaigns("insert_lint_runs"))
	if err != nil {
		return res, fmt.Errorf("store lint run: %w", err)
	}
	defer runs.Abort()
	versions, err := conn.PrepareBatch(ctx, mcsql.Campaigns("insert_payload_versions"))
	if err != nil {
		return res, fmt.Errorf("store payload versions: %w", err)
	}
	defer versions.Abort()

	appendRun := func(flag, variant string, active, will, exclOK bool, sha string, ps []Problem) error {
		var errs, warns uint32
		codes, sevs, msgs := []string{}, []string{}, []string{}
		for _, p := range ps {
			if p.Severity == SeverityError {
				errs++
			} else {
				warns++
			}
			codes, sevs, msgs = append(codes, p.Code), append(sevs, p.Severity), append(msgs, p.Message)
		}
		res.Rows++
		return runs.Append(now, flag, variant, u8(active), u8(will), u8(exclOK), sha, errs, warns, codes, sevs, msgs)
	}
	present := map[variantKey]bool{}
	checked := map[string]bool{}
	for _, fr := range rep.Flags {
		// A malformed definition says nothing of the variants: their versions stay as they are.
		checked[fr.Flag] = !hasCode(fr.Problems, CodeFlagMalformed)
		f := byKey[fr.Flag]
		anyWill, allExcl := false, true
		for _, v := range fr.Variants {
			will := v.WillRecruit
			if v.PromptInUse != nil {
				will = *v.PromptInUse
			}
			excl := ExclusionOK(v.Problems)
			anyWill, allExcl = anyWill || will, allExcl && excl
			text, sha := CanonicalPayload(f.Filters.Payloads[v.PayloadKey])
			if err := appendRun(fr.Flag, v.CampaignID, fr.Active, will, excl, sha, v.Problems); err != nil {
				return res, fmt.Errorf("store lint run: %w", err)
			}
			if v.PromptInUse != nil && !*v.PromptInUse {
				// The server serves the SDK's own prompt: this variant's version ends (below).
				continue
			}
			k := variantKey{fr.Flag, v.CampaignID}
			if present[k] {
				continue // a hostile flag naming one variant twice: its first payload counts
			}
			present[k] = true
			old, had := latest[k]
			var first time.Time
			if had && !old.removed && old.sha == sha {
				first = old.firstSeen // unchanged, whenever it was first seen: the same version
			} else {
				first = nextFirstSeen(old.firstSeen, had, now)
				res.NewVersions++
			}
			if err := versions.Append(fr.Flag, v.CampaignID, first, latestTime(first, now), sha, text, uint8(0)); err != nil {
				return res, fmt.Errorf("store payload versions: %w", err)
			}
			res.Versions++
		}
		if err := appendRun(fr.Flag, "", fr.Active, anyWill, allExcl, "", fr.Problems); err != nil {
			return res, fmt.Errorf("store lint run: %w", err)
		}
	}
	for _, key := range rep.Missing {
		checked[key] = true
		missing := []Problem{warn(CodeFlagMissing, "the flag is absent or deleted: "+missingEffect(key), 0)}
		if err := appendRun(key, "", false, false, true, "", missing); err != nil {
			return res, fmt.Errorf("store lint run: %w", err)
		}
	}
	gone := make([]variantKey, 0)
	for k, old := range latest {
		if checked[k.flag] && !present[k] && !old.removed {
			gone = append(gone, k)
		}
	}
	slices.SortFunc(gone, func(a, b variantKey) int {
		return cmp.Or(cmp.Compare(a.flag, b.flag), cmp.Compare(a.variant, b.variant))
	})
	for _, k := range gone {
		first := nextFirstSeen(latest[k].firstSeen, true, now)
		if err := versions.Append(k.flag, k.variant, first, first, "", "", uint8(1)); err != nil {
			return res, fmt.Errorf("store payload versions: %w", err)
		}
		res.Versions++
		res.Removed++
	}
	if err := runs.Send(); err != nil {
		return res, fmt.Errorf("store lint run: %w", err)
	}
	if res.Versions > 0 {
		if err := versions.Send(); err != nil {
			return res, fmt.Errorf("store payload versions: %w", err)
		}
	}
	before := now.Add(-retention)
	if err := conn.QueryRow(ctx, mcsql.Campaigns("expired_lint_runs"), before).Scan(&res.Expired); err != nil {
		return res, fmt.Errorf("lint retention: %w", err)
	}
	if res.Expired > 0 {
		target, err := migrations.MutationTarget(ctx, conn, "campaign_lint_runs")
		if err != nil {
			return res, fmt.Errorf("lint retention: %w", err)
		}
		if err := conn.Exec(ctx, strings.ReplaceAll(mcsql.Campaigns("delete_expired_lint_runs"), "{table}", target.Name()), before); err != nil {
			return res, fmt.Errorf("lint retention: %w", err)
		}
	}
	return res, nil
}

// nextFirstSeen is the first_seen of a new version (or removal) of a variant whose latest
// stored version, if had, began at prev: now, or the second after prev when now is not later
// (two runs within one second, or a clock set back). flag_payload_versions is keyed by
// (flag_key, variant, first_seen) in whole seconds, so a version given its predecessor's
// first_seen would replace it; one second later keeps both, in order, at the cost of dating the
// newer one up to a second late.
func nextFirstSeen(prev time.Time, had bool, now time.Time) time.Time {
	if had && !now.After(prev) {
		return prev.Add(time.Second)
	}
	return now
}

// latestTime is the later of a and b.
func latestTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func latestVersions(ctx context.Context, conn driver.Conn) (map[variantKey]storedVersion, error) {
	rows, err := conn.Query(ctx, mcsql.Campaigns("latest_payload_versions"))
	if err != nil {
		return nil, fmt.Errorf("read payload versions: %w", err)
	}
	defer rows.Close()
	out := map[variantKey]storedVersion{}
	for rows.Next() {
		var (
			k       variantKey
			v       storedVersion
			removed uint8
		)
		if err := rows.Scan(&k.flag, &k.variant, &v.firstSeen, &v.sha, &removed); err != nil {
			return nil, fmt.Errorf("read payload versions: %w", err)
		}
		v.removed = removed == 1
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read payload versions: %w", err)
	}
	return out, nil
}

// PayloadVersion is one flag_payload_versions row.
type PayloadVersion struct {
	FlagKey       string    `json:"flag_key"`
	Variant       string    `json:"variant"`
	FirstSeen     time.Time `json:"first_seen"`
	LastSeen      time.Time `json:"last_seen"`
	PayloadSHA256 string    `json:"payload_sha256"`
	Payload       string    `json:"payload"`
	Removed       bool      `json:"removed"`
}

// PayloadVersionAt returns the payload version of a flag's variant in force at t: the stored
// version with the greatest first_seen at or before t (sql/campaigns/payload_version_at.sql).
// ok is false when no version had been seen by t; a version with Removed set means the variant
// had been removed. Errors are ClickHouse's, wrapped.
func PayloadVersionAt(ctx context.Context, conn driver.Conn, flagKey, variant string, t time.Time) (v PayloadVersion, ok bool, err error) {
	rows, err := conn.Query(ctx, mcsql.Campaigns("payload_version_at"), flagKey, variant, t.UTC().Truncate(time.Second))
	if err != nil {
		return v, false, fmt.Errorf("read payload version: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return v, false, rows.Err()
	}
	var removed uint8
	if err := rows.Scan(&v.FlagKey, &v.Variant, &v.FirstSeen, &v.LastSeen, &v.PayloadSHA256, &v.Payload, &removed); err != nil {
		return v, false, fmt.Errorf("read payload version: %w", err)
	}
	v.Removed = removed == 1
	return v, true, rows.Err()
}

// CanonicalPayload returns a stored payload's canonical JSON text and the hex SHA-256 of that
// text: the payload (a JSON-encoded string as PostHog stores it, or a JSON value, PayloadText)
// re-encoded compactly with object keys sorted, numbers and strings as written, and no HTML
// escaping, so the two shapes of one payload, or a re-indented one, hash alike. A payload that
// is not valid JSON keeps its text with the surrounding space trimmed. No payload (absent or
// null) gives "" and "".
func CanonicalPayload(raw json.RawMessage) (text, sha string) {
	body, ok, err := PayloadText(raw)
	if !ok {
		return "", ""
	}
	if err != nil {
		body = raw
	}
	body = bytes.TrimSpace(body)
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) == nil && !dec.More() {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if enc.Encode(v) == nil {
			body = bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		}
	}
	sum := sha256.Sum256(body)
	return string(body), hex.EncodeToString(sum[:])
}

func hasCode(ps []Problem, code string) bool {
	for _, p := range ps {
		if p.Code == code {
			return true
		}
	}
	return false
}

// ExclusionOK reports whether ps holds no exclusion_missing or exclusion_inverted problem:
// every release condition that can select the variant carries the exclusion cohort.
func ExclusionOK(ps []Problem) bool {
	for _, p := range ps {
		if p.Code == CodeExclusionMissing || p.Code == CodeExclusionInverted {
			return false
		}
	}
	return true
}

func missingEffect(key string) string {
	if key == IntentPromptFlag {
		return "the SDK's default context description stays"
	}
	return "the server skips recruitment"
}

func u8(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}
