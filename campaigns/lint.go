package campaigns

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// Limits and defaults of the payloads, from the MCP server's documentation (seed 004): an
// invitation message of at most 1,000 characters, a prompt of at most 2,000, both counted as
// JavaScript counts a string's length (UTF-16 code units); the thresholds' ranges and
// defaults.
const (
	MaxMessageUnits        = 1000
	MaxPromptUnits         = 2000
	MaxCompletedToolCalls  = 1000
	MaxSessionAgeSeconds   = 86400
	DefaultCompletedCalls  = 3
	DefaultSessionAgeSecs  = 120
	booleanPayloadKey      = "true"
	booleanRecruitCampaign = "mcp-research"
)

// Severity of a problem: SeverityError means the campaign cannot recruit, or would reach
// people it must not; SeverityWarning is worth a look but breaks no rule.
const (
	SeverityError   = "error"
	SeverityWarning = "warning"
)

// Problem codes. They are stable: scripts and stored results key on them.
const (
	CodeFlagInactive           = "flag_inactive"            // warning: the server skips the flag
	CodeNoReleaseCondition     = "no_release_condition"     // warning: the flag releases nobody
	CodeUnknownVariantOverride = "unknown_variant_override" // warning: a condition names no variant of the flag
	CodePayloadOrphan          = "payload_orphan"           // warning: a payload for no variant
	CodeExclusionCohortUnset   = "exclusion_cohort_unset"   // warning: any cohort not_in condition was taken as the exclusion
	CodeVariantUnreachable     = "variant_unreachable"      // warning: no condition can select the variant
	CodePayloadMissing         = "payload_missing"          // error
	CodePayloadMalformed       = "payload_malformed"        // error: not JSON, or not a JSON object
	CodeMessageMissing         = "message_missing"          // error: absent or not a string
	CodeMessageBlank           = "message_blank"            // error
	CodeMessageTooLong         = "message_too_long"         // error: over MaxMessageUnits
	CodeBookingURLMissing      = "booking_url_missing"      // error: absent, not a string, or blank
	CodeBookingURLInvalid      = "booking_url_invalid"      // error: not an absolute URL with a host
	CodeBookingURLNotHTTPS     = "booking_url_not_https"    // error
	CodeMinCallsInvalid        = "min_completed_tool_calls_invalid"
	CodeMinAgeInvalid          = "min_session_age_seconds_invalid"
	CodeImmediateInvitation    = "immediate_invitation"     // warning: both thresholds zero
	CodeExclusionMissing       = "exclusion_missing"        // error: a condition without the exclusion cohort
	CodeExclusionInverted      = "exclusion_inverted"       // error: a condition that selects the exclusion cohort
	CodeExclusionOnlyCondition = "exclusion_only_condition" // warning: a condition whose only filter is the exclusion
	CodePromptMissing          = "prompt_missing"           // error: absent or not a string
	CodePromptBlank            = "prompt_blank"             // error
	CodePromptTooLong          = "prompt_too_long"          // error: over MaxPromptUnits
	CodeUnconditionalRelease   = "unconditional_release"    // error: no properties and a rollout of 100% or unset
	CodeFlagMissing            = "flag_missing"             // warning, stored runs only (Record): the flag is absent or deleted
	CodeFlagMalformed          = "flag_malformed"           // error: the flag's definition does not decode (Flag.Malformed)
)

// Problem is one finding. Condition is the 1-based index of the release condition it is
// about, 0 when it is about no single condition. Message shows caller-chosen strings quoted
// and escaped (safetext.Quote).
type Problem struct {
	Code      string `json:"code"`
	Severity  string `json:"severity"`
	Message   string `json:"message"`
	Condition int    `json:"condition,omitempty"`
}

// VariantReport is the lint of one variant (for mcp-interview-recruitment, one campaign).
// CampaignID is the variant key, or "mcp-research" for a boolean recruitment flag (seed 004);
// PayloadKey is the key of its entry in filters.payloads. WillRecruit says whether the MCP
// server would invite anyone for this campaign: the flag is active, some release condition can
// select the variant, and its payload is valid. An unprotected campaign can still recruit, so
// exclusion problems do not clear it. WillRecruit is only meaningful for
// mcp-interview-recruitment: for mcp-intent-prompt it is always false, and PromptInUse (set for
// that flag only) says the same of the trial prompt.
type VariantReport struct {
	CampaignID  string    `json:"campaign_id"`
	PayloadKey  string    `json:"payload_key"`
	WillRecruit bool      `json:"will_recruit"`
	PromptInUse *bool     `json:"prompt_in_use,omitempty"`
	Problems    []Problem `json:"problems"`
}

// FlagReport is the lint of one flag: problems of the flag as a whole, then per variant.
type FlagReport struct {
	Flag     string          `json:"flag"`
	Active   bool            `json:"active"`
	Problems []Problem       `json:"problems"`
	Variants []VariantReport `json:"variants"`
}

// Report is the whole lint. Missing lists the checked flag keys absent (or deleted) from the
// definitions: the server then skips recruitment, or keeps the SDK's default prompt.
type Report struct {
	Flags    []FlagReport `json:"flags"`
	Missing  []string     `json:"missing"`
	Errors   int          `json:"errors"`
	Warnings int          `json:"warnings"`
}

// Options configure Lint. ExclusionCohort is the shared recruitment exclusion cohort's id
// (641799 in PostHog's US project 2, seed 004); 0 accepts any cohort not_in condition and says
// so with a warning.
type Options struct {
	ExclusionCohort int64
}

// Lint checks mcp-interview-recruitment and mcp-intent-prompt among flags (other flags and
// deleted ones are ignored) by the rules of seed 004:
//
// mcp-interview-recruitment, per variant (campaign): a payload is present and a JSON object;
// "message" is a nonblank string (blank as JavaScript's String.prototype.trim sees it) of at
// most 1,000 UTF-16 units; "booking_url" is an absolute https URL; "min_completed_tool_calls"
// (0–1,000) and "min_session_age_seconds" (0–86,400), when present, are integers in range;
// both at zero is a warning (immediate invitation: testing only); a boolean flag's "true"
// payload obeys the same rules; every release condition that can select the variant carries
// the exclusion cohort condition (type "cohort", key "id", operator "not_in", not negated),
// and a condition whose only filter is that exclusion is reported as one. A condition with a
// rollout of 0 selects nobody: it makes no variant reachable and is not checked for the
// exclusion (nor, below, for an unconditional release).
//
// mcp-intent-prompt, per variant: "prompt" is a nonblank string of at most 2,000 UTF-16
// units; no release condition that can select it is unconditional (no properties and a
// rollout of 100% or unset).
//
// A checked flag whose definition did not decode (Flag.Malformed) gets one flag_malformed
// error and no variants; the other flag is still linted.
func Lint(flags []Flag, opts Options) Report {
	rep := Report{Flags: []FlagReport{}, Missing: []string{}}
	for _, key := range []string{RecruitmentFlag, IntentPromptFlag} {
		found := false
		for _, f := range flags {
			if f.Deleted || f.Key != key {
				continue
			}
			found = true
			rep.Flags = append(rep.Flags, lintFlag(f, opts))
		}
		if !found {
			rep.Missing = append(rep.Missing, key)
		}
	}
	for _, fr := range rep.Flags {
		count := func(ps []Problem) {
			for _, p := range ps {
				if p.Severity == SeverityError {
					rep.Errors++
				} else {
					rep.Warnings++
				}
			}
		}
		count(fr.Problems)
		for _, v := range fr.Variants {
			count(v.Problems)
		}
	}
	return rep
}

func warn(code, msg string, cond int) Problem {
	return Problem{Code: code, Severity: SeverityWarning, Message: msg, Condition: cond}
}

func fail(code, msg string, cond int) Problem {
	return Problem{Code: code, Severity: SeverityError, Message: msg, Condition: cond}
}

// variantSlot is one variant of a flag, or the single "true" value of a boolean flag.
type variantSlot struct {
	key       string
	rolledOut bool // the variants' split gives it a share (always, for a boolean flag)
}

func lintFlag(f Flag, opts Options) FlagReport {
	recruit := f.Key == RecruitmentFlag
	fr := FlagReport{Flag: f.Key, Active: f.Active, Problems: []Problem{}, Variants: []VariantReport{}}
	if f.Malformed != "" {
		fr.Problems = append(fr.Problems, fail(CodeFlagMalformed,
			"the flag's definition is not PostHog's: "+f.Malformed+"; nothing else of it was checked", 0))
		return fr
	}
	if !f.Active {
		fr.Problems = append(fr.Problems, warn(CodeFlagInactive, "the flag is disabled: the server evaluates nothing from it", 0))
	}
	if len(f.Filters.Groups) == 0 {
		fr.Problems = append(fr.Problems, warn(CodeNoReleaseCondition, "the flag has no release condition: it selects nobody", 0))
	}
	if recruit && opts.ExclusionCohort == 0 {
		fr.Problems = append(fr.Problems, warn(CodeExclusionCohortUnset,
			"no exclusion cohort id given (--exclusion-cohort): any cohort not_in condition was taken as the shared exclusion", 0))
	}

	var slots []variantSlot
	multivariate := f.Filters.Multivariate != nil && len(f.Filters.Multivariate.Variants) > 0
	if multivariate {
		for _, v := range f.Filters.Multivariate.Variants {
			slots = append(slots, variantSlot{key: v.Key, rolledOut: v.RolloutPercentage == nil || *v.RolloutPercentage > 0})
		}
	} else {
		slots = []variantSlot{{key: booleanPayloadKey, rolledOut: true}}
	}
	known := map[string]bool{}
	for _, s := range slots {
		known[s.key] = true
	}
	for i, c := range f.Filters.Groups {
		if c.Variant != nil && *c.Variant != "" && !known[*c.Variant] {
			fr.Problems = append(fr.Problems, warn(CodeUnknownVariantOverride,
				fmt.Sprintf("release condition %d overrides to variant %s, which the flag does not have: PostHog ignores it and splits by the variants' rollout", i+1, safetext.Quote(*c.Variant)), i+1))
		}
	}
	for _, k := range sortedKeys(f.Filters.Payloads) {
		if known[k] || (!multivariate && k == "false") {
			continue
		}
		fr.Problems = append(fr.Problems, warn(CodePayloadOrphan,
			fmt.Sprintf("payload %s belongs to no variant of the flag: nothing uses it", safetext.Quote(k)), 0))
	}

	for _, s := range slots {
		vr := VariantReport{CampaignID: s.key, PayloadKey: s.key, Problems: []Problem{}}
		if recruit && !multivariate {
			vr.CampaignID = booleanRecruitCampaign
		}
		// The conditions that can select this variant: its overrides, and every condition
		// without an override when the split gives the variant a share, each with a rollout
		// above 0 (canSelect). PostHog ignores an override that names no variant of the flag
		// and uses the split. A condition at rollout 0 selects nobody, so the exclusion and
		// unconditional-release checks skip it, as reachability does.
		var conds []int
		for i, c := range f.Filters.Groups {
			override := c.Variant != nil && known[*c.Variant]
			if override && *c.Variant != s.key || !override && !s.rolledOut || !canSelect(c) {
				continue
			}
			conds = append(conds, i)
		}
		reachable := len(conds) > 0
		if !reachable && len(f.Filters.Groups) > 0 {
			vr.Problems = append(vr.Problems, warn(CodeVariantUnreachable,
				fmt.Sprintf("no release condition can select variant %s", safetext.Quote(s.key)), 0))
		}
		var valid bool
		if recruit {
			valid = lintRecruitPayload(f.Filters.Payloads, s.key, &vr.Problems)
			for _, i := range conds {
				lintExclusion(f.Filters.Groups[i], i+1, len(f.Filters.Groups), opts.ExclusionCohort, &vr.Problems)
			}
			vr.WillRecruit = f.Active && reachable && valid
		} else {
			valid = lintPromptPayload(f.Filters.Payloads, s.key, &vr.Problems)
			for _, i := range conds {
				c := f.Filters.Groups[i]
				if len(c.Properties) == 0 && (c.RolloutPercentage == nil || *c.RolloutPercentage >= 100) {
					vr.Problems = append(vr.Problems, fail(CodeUnconditionalRelease,
						fmt.Sprintf("release condition %d releases the prompt to everyone (no properties, rollout %s): start with one user's distinct id", i+1, rolloutText(c.RolloutPercentage)), i+1))
				}
			}
			inUse := f.Active && reachable && valid
			vr.PromptInUse = &inUse
		}
		fr.Variants = append(fr.Variants, vr)
	}
	return fr
}

// canSelect reports whether release condition c can select anyone: its rollout is unset
// (100%) or above 0.
func canSelect(c Condition) bool {
	return c.RolloutPercentage == nil || *c.RolloutPercentage > 0
}

func rolloutText(p *float64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatFloat(*p, 'f', -1, 64) + "%"
}

// payloadObject returns the payload stored under key as a JSON object's members, or reports
// why there is none (with skipped, what the server then does) and returns ok false.
func payloadObject(payloads map[string]json.RawMessage, key, skipped string, problems *[]Problem) (map[string]json.RawMessage, bool) {
	raw, present := payloads[key]
	text, ok, err := PayloadText(raw)
	if !present || (!ok && err == nil) {
		*problems = append(*problems, fail(CodePayloadMissing,
			fmt.Sprintf("no payload for %s: %s", safetext.Quote(key), skipped), 0))
		return nil, false
	}
	var obj map[string]json.RawMessage
	why := ""
	switch {
	case err != nil || !json.Valid(text):
		why = "is not valid JSON"
	default:
		switch t := bytes.TrimSpace(text); t[0] {
		case '{':
			if json.Unmarshal(t, &obj) != nil {
				why = "is not valid JSON"
			}
		case 't':
			why = "is the boolean true, not an object with an explicit message and booking_url"
		case '[':
			why = "is a JSON array, not an object"
		case '"':
			why = "is a JSON string, not an object"
		case 'n':
			why = "is null, not an object"
		default:
			why = "is a JSON " + map[bool]string{true: "boolean", false: "number"}[t[0] == 'f'] + ", not an object"
		}
	}
	if why != "" {
		*problems = append(*problems, fail(CodePayloadMalformed,
			fmt.Sprintf("payload for %s %s: %s", safetext.Quote(key), why, skipped), 0))
		return nil, false
	}
	return obj, true
}

// jsonString decodes raw as a JSON string; ok is false when raw is absent or another type.
func jsonString(raw json.RawMessage) (string, bool) {
	var s string
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

func lintRecruitPayload(payloads map[string]json.RawMessage, key string, problems *[]Problem) bool {
	obj, ok := payloadObject(payloads, key, "the server skips recruitment", problems)
	if !ok {
		return false
	}
	n := len(*problems)
	msg, isStr := jsonString(obj["message"])
	switch {
	case !isStr:
		*problems = append(*problems, fail(CodeMessageMissing, "\"message\" is missing or not a string: the server skips recruitment", 0))
	case JSBlank(msg):
		*problems = append(*problems, fail(CodeMessageBlank, "\"message\" is blank: the server skips recruitment", 0))
	case UTF16Len(msg) > MaxMessageUnits:
		*problems = append(*problems, fail(CodeMessageTooLong,
			fmt.Sprintf("\"message\" has %d characters (UTF-16 units), over %d: the server skips recruitment", UTF16Len(msg), MaxMessageUnits), 0))
	}
	u, isStr := jsonString(obj["booking_url"])
	switch {
	case !isStr || JSBlank(u):
		*problems = append(*problems, fail(CodeBookingURLMissing, "\"booking_url\" is missing, blank or not a string: the server skips recruitment", 0))
	default:
		parsed, err := url.Parse(strings.TrimSpace(u))
		switch {
		case err != nil || !parsed.IsAbs() || parsed.Host == "":
			*problems = append(*problems, fail(CodeBookingURLInvalid,
				fmt.Sprintf("\"booking_url\" %s is not an absolute URL: the server skips recruitment", safetext.Quote(u)), 0))
		case !strings.EqualFold(parsed.Scheme, "https"):
			*problems = append(*problems, fail(CodeBookingURLNotHTTPS,
				fmt.Sprintf("\"booking_url\" %s is not https: the server skips recruitment", safetext.Quote(u)), 0))
		}
	}
	calls, callsOK := threshold(obj, "min_completed_tool_calls", DefaultCompletedCalls, MaxCompletedToolCalls, CodeMinCallsInvalid, problems)
	age, ageOK := threshold(obj, "min_session_age_seconds", DefaultSessionAgeSecs, MaxSessionAgeSeconds, CodeMinAgeInvalid, problems)
	valid := len(*problems) == n
	if callsOK && ageOK && calls == 0 && age == 0 {
		*problems = append(*problems, warn(CodeImmediateInvitation,
			"both thresholds are zero: an invitation can come before any product call (immediate invitation: testing only)", 0))
	}
	return valid
}

// threshold reads an optional integer field in [0, max]; absent means def. A JSON number with
// no fractional part (3, 3.0, 3e0) is an integer, as JavaScript's Number.isInteger sees it.
func threshold(obj map[string]json.RawMessage, name string, def, max int64, code string, problems *[]Problem) (int64, bool) {
	raw, present := obj[name]
	if !present {
		return def, true
	}
	s := string(bytes.TrimSpace(raw))
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || s == "" || s[0] == '"' || math.Trunc(f) != f || f < 0 || f > float64(max) {
		shown := s
		if len(shown) > 40 {
			shown = shown[:40] + "…"
		}
		*problems = append(*problems, fail(code,
			fmt.Sprintf("%q is %s, not an integer from 0 to %d: the server skips recruitment", name, safetext.Escape(shown), max), 0))
		return 0, false
	}
	return int64(f), true
}

func lintPromptPayload(payloads map[string]json.RawMessage, key string, problems *[]Problem) bool {
	obj, ok := payloadObject(payloads, key, "the SDK's default description stays", problems)
	if !ok {
		return false
	}
	p, isStr := jsonString(obj["prompt"])
	switch {
	case !isStr:
		*problems = append(*problems, fail(CodePromptMissing, "\"prompt\" is missing or not a string: the SDK's default description stays", 0))
	case JSBlank(p):
		*problems = append(*problems, fail(CodePromptBlank, "\"prompt\" is blank: the SDK's default description stays", 0))
	case UTF16Len(p) > MaxPromptUnits:
		*problems = append(*problems, fail(CodePromptTooLong,
			fmt.Sprintf("\"prompt\" has %d characters (UTF-16 units), over %d: the SDK's default description stays", UTF16Len(p), MaxPromptUnits), 0))
	default:
		return true
	}
	return false
}

// lintExclusion checks that release condition idx (1-based, of total) carries the exclusion
// cohort: a property of type "cohort", key "id", operator "not_in", not negated, whose value is
// the cohort id (any id when cohort is 0).
func lintExclusion(c Condition, idx, total int, cohort int64, problems *[]Problem) {
	has, inverted := false, false
	for _, p := range c.Properties {
		if p.Type != "cohort" || p.Key != "id" {
			continue
		}
		id, ok := cohortID(p.Value)
		if !ok || (cohort != 0 && id != cohort) {
			continue
		}
		if p.Operator == "not_in" && !p.Negation {
			has = true
		} else if p.Operator == "not_in" || p.Operator == "in" || p.Operator == "" {
			inverted = true
		}
	}
	switch {
	case has && len(c.Properties) == 1:
		*problems = append(*problems, warn(CodeExclusionOnlyCondition,
			fmt.Sprintf("release condition %d of %d has only the exclusion cohort: it releases everyone else, and protects no other condition (conditions are OR alternatives)", idx, total), idx))
	case has:
	case inverted:
		*problems = append(*problems, fail(CodeExclusionInverted,
			fmt.Sprintf("release condition %d of %d selects the exclusion cohort instead of excluding it (use operator not_in, no negation)", idx, total), idx))
	default:
		*problems = append(*problems, fail(CodeExclusionMissing,
			fmt.Sprintf("release condition %d of %d lacks the exclusion cohort (type cohort, key id, operator not_in%s): people who asked never to be contacted can be invited", idx, total, cohortSuffix(cohort)), idx))
	}
}

func cohortSuffix(cohort int64) string {
	if cohort == 0 {
		return ""
	}
	return ", value " + strconv.FormatInt(cohort, 10)
}

// cohortID reads a cohort filter's value: a JSON integer or a string of digits.
func cohortID(raw json.RawMessage) (int64, bool) {
	s := strings.TrimSpace(string(raw))
	if str, ok := jsonString(raw); ok {
		s = strings.TrimSpace(str)
	}
	id, err := strconv.ParseInt(s, 10, 64)
	return id, err == nil
}

// UTF16Len is the length of s as JavaScript's String.prototype.length counts it: UTF-16 code
// units, so a character outside the Basic Multilingual Plane (most emoji) counts 2. Each byte
// of invalid UTF-8 counts 1 (it decodes to U+FFFD).
func UTF16Len(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x10000 {
			n += 2
		} else {
			n++
		}
	}
	return n
}

// JSBlank reports whether s is empty after JavaScript's String.prototype.trim, which removes
// ECMAScript's WhiteSpace and LineTerminator characters (ECMA-262 §12.2, §12.3): tab, VT, FF,
// space, NBSP, U+FEFF, the Space_Separator characters, LF, CR, U+2028 and U+2029. Unlike Go's
// unicode.IsSpace it keeps U+0085 and removes U+FEFF.
func JSBlank(s string) bool {
	for _, r := range s {
		switch {
		case r == '\t' || r == '\v' || r == '\f' || r == ' ' || r == '\u00a0' || r == '\ufeff',
			r == '\n' || r == '\r' || r == '\u2028' || r == '\u2029',
			r == '\u1680' || (r >= '\u2000' && r <= '\u200a') || r == '\u202f' || r == '\u205f' || r == '\u3000':
			continue
		}
		return false
	}
	return true
}
