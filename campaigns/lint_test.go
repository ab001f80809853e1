package campaigns

import (
	"bytes"
	"fmt"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

const testCohort = 641799

func lintFile(t *testing.T, path string, cohort int64) Report {
	t.Helper()
	flags, err := ReadFile(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return Lint(flags, Options{ExclusionCohort: cohort})
}

// findings flattens a report to sorted "where:severity:code[@condition]" strings, where is
// the flag key for a flag's own problems and "flag/campaign" for a variant's.
func findings(rep Report) []string {
	out := []string{}
	add := func(where string, ps []Problem) {
		for _, p := range ps {
			s := where + ":" + p.Severity + ":" + p.Code
			if p.Condition != 0 {
				s += fmt.Sprintf("@%d", p.Condition)
			}
			out = append(out, s)
		}
	}
	for _, f := range rep.Flags {
		add(f.Flag, f.Problems)
		for _, v := range f.Variants {
			add(f.Flag+"/"+v.CampaignID, v.Problems)
		}
	}
	sort.Strings(out)
	return out
}

func recruiting(rep Report) map[string]bool {
	m := map[string]bool{}
	for _, f := range rep.Flags {
		for _, v := range f.Variants {
			if v.PromptInUse != nil {
				m[f.Flag+"/"+v.CampaignID] = *v.PromptInUse
			} else {
				m[f.Flag+"/"+v.CampaignID] = v.WillRecruit
			}
		}
	}
	return m
}

// Valid definitions, in both of PostHog's shapes and with payloads as strings or objects,
// raise nothing: no false alarm.
func TestLintValidFilesHaveNoProblems(t *testing.T) {
	for _, name := range []string{"valid_api.json", "valid_api_objects.json", "valid_local.json", "valid_boolean_edges.json", "odd_unrelated_flags.json", "valid_rollout_zero_conditions.json"} {
		t.Run(name, func(t *testing.T) {
			rep := lintFile(t, filepath.Join("testdata", name), testCohort)
			if got := findings(rep); len(got) != 0 || rep.Errors+rep.Warnings != 0 {
				t.Fatalf("problems on a valid file: %v", got)
			}
			for k, ok := range recruiting(rep) {
				if !ok {
					t.Errorf("%s: not recruiting / prompt not in use on a valid file", k)
				}
			}
		})
	}
}

// The same flags read from the API list and the local-evaluation response lint the same.
func TestLintSameAcrossShapes(t *testing.T) {
	a := lintFile(t, "testdata/valid_api.json", testCohort)
	b := lintFile(t, "testdata/valid_local.json", testCohort)
	c := lintFile(t, "testdata/valid_api_objects.json", testCohort)
	if !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, c) {
		t.Fatalf("reports differ:\n%+v\n%+v\n%+v", a, b, c)
	}
	if len(a.Flags) != 2 || len(a.Flags[0].Variants) != 2 || len(a.Flags[1].Variants) != 1 {
		t.Fatalf("flags not all found: %+v", a)
	}
}

const (
	rf = RecruitmentFlag
	ip = IntentPromptFlag
)

// Each rule fires on its fixture, and nothing else does.
func TestLintRules(t *testing.T) {
	cases := []struct {
		file       string
		want       []string
		notRecruit []string // variants that must not recruit (the others must)
	}{
		{"payload_missing", []string{rf + "/data-teams:error:payload_missing"}, []string{"data-teams"}},
		{"payload_malformed", []string{rf + "/data-teams:error:payload_malformed"}, []string{"data-teams"}},
		{"payload_not_object", []string{rf + "/data-teams:error:payload_malformed"}, []string{"data-teams"}},
		{"message_missing", []string{rf + "/data-teams:error:message_missing"}, []string{"data-teams"}},
		{"message_not_string", []string{rf + "/data-teams:error:message_missing"}, []string{"data-teams"}},
		{"message_blank", []string{rf + "/data-teams:error:message_blank"}, []string{"data-teams"}},
		{"message_too_long", []string{rf + "/data-teams:error:message_too_long"}, []string{"data-teams"}},
		{"booking_url_missing", []string{rf + "/data-teams:error:booking_url_missing"}, []string{"data-teams"}},
		{"booking_url_invalid", []string{rf + "/data-teams:error:booking_url_invalid"}, []string{"data-teams"}},
		{"booking_url_not_https", []string{rf + "/data-teams:error:booking_url_not_https"}, []string{"data-teams"}},
		{"min_completed_tool_calls_invalid", []string{
			rf + "/agents-q3:error:min_completed_tool_calls_invalid",
			rf + "/data-teams:error:min_completed_tool_calls_invalid"}, []string{"agents-q3", "data-teams"}},
		{"min_session_age_seconds_invalid", []string{
			rf + "/agents-q3:error:min_session_age_seconds_invalid",
			rf + "/data-teams:error:min_session_age_seconds_invalid"}, []string{"agents-q3", "data-teams"}},
		{"immediate_invitation", []string{rf + "/data-teams:warning:immediate_invitation"}, nil},
		{"boolean_true_without_copy", []string{
			rf + "/mcp-research:error:payload_malformed",
			rf + "/mcp-research:warning:exclusion_only_condition@1"}, []string{"mcp-research"}},
		// Condition 2 has no override, so it can select both variants; its cohort filter names
		// another cohort.
		{"exclusion_missing", []string{
			rf + "/agents-q3:error:exclusion_missing@1",
			rf + "/agents-q3:error:exclusion_missing@2",
			rf + "/data-teams:error:exclusion_missing@2"}, nil},
		{"exclusion_only_condition", []string{
			rf + "/agents-q3:error:exclusion_missing@1",
			rf + "/agents-q3:warning:exclusion_only_condition@2",
			rf + "/data-teams:warning:exclusion_only_condition@2"}, nil},
		{"exclusion_inverted", []string{
			rf + "/agents-q3:error:exclusion_inverted@1",
			rf + "/data-teams:error:exclusion_inverted@2"}, nil},
		{"flag_inactive", []string{rf + ":warning:flag_inactive"}, []string{"agents-q3", "data-teams"}},
		{"no_release_condition", []string{rf + ":warning:no_release_condition"}, []string{"agents-q3", "data-teams"}},
		{"variant_unreachable", []string{rf + "/data-teams:warning:variant_unreachable"}, []string{"data-teams"}},
		{"payload_orphan", []string{rf + ":warning:payload_orphan"}, nil},
		// An override to a variant the flag lacks falls back to the split: condition 1 then
		// selects both variants.
		{"unknown_variant_override", []string{rf + ":warning:unknown_variant_override@1"}, nil},
		// The intent-prompt flag's payloads are an array: that flag is one error, the
		// recruitment flag beside it is still linted (and recruits).
		{"flag_malformed", []string{ip + ":error:flag_malformed"}, nil},
		{"prompt_missing", []string{ip + "/true:error:prompt_missing"}, []string{"true"}},
		{"prompt_blank", []string{ip + "/true:error:prompt_blank"}, []string{"true"}},
		{"prompt_too_long", []string{ip + "/true:error:prompt_too_long"}, []string{"true"}},
		{"prompt_payload_missing", []string{ip + "/true:error:payload_missing"}, []string{"true"}},
		{"unconditional_release", []string{
			ip + "/true:error:unconditional_release@2",
			ip + "/true:error:unconditional_release@3"}, nil},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			rep := lintFile(t, filepath.Join("testdata", "rules", c.file+".json"), testCohort)
			if got := findings(rep); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("findings\n got %q\nwant %q", got, c.want)
			}
			errs := 0
			for _, w := range c.want {
				if strings.Contains(w, ":error:") {
					errs++
				}
			}
			if rep.Errors != errs || rep.Errors+rep.Warnings != len(c.want) {
				t.Errorf("counts: %d errors %d warnings, want %d errors of %d", rep.Errors, rep.Warnings, errs, len(c.want))
			}
			not := map[string]bool{}
			for _, k := range c.notRecruit {
				not[k] = true
			}
			for k, ok := range recruiting(rep) {
				campaign := k[strings.IndexByte(k, '/')+1:]
				if ok == not[campaign] {
					t.Errorf("%s: recruiting/in use = %v", k, ok)
				}
			}
		})
	}
}

// Without a cohort id, any cohort not_in filter counts, with one warning; with another id
// every condition lacks the exclusion.
func TestLintExclusionCohortOption(t *testing.T) {
	rep := lintFile(t, "testdata/valid_api.json", 0)
	if got := findings(rep); !reflect.DeepEqual(got, []string{rf + ":warning:exclusion_cohort_unset"}) {
		t.Fatalf("no cohort: %q", got)
	}
	rep = lintFile(t, "testdata/valid_api.json", 12)
	want := []string{rf + "/agents-q3:error:exclusion_missing@1", rf + "/agents-q3:error:exclusion_missing@2", rf + "/data-teams:error:exclusion_missing@2"}
	if got := findings(rep); !reflect.DeepEqual(got, want) {
		t.Fatalf("other cohort: %q", got)
	}
}

// Caller-chosen strings never reach a message, the text or the JSON report unescaped.
func TestLintEscapesCallerStrings(t *testing.T) {
	rep := lintFile(t, "testdata/rules/hostile_keys.json", testCohort)
	want := []string{
		rf + "/agents\u202eq3\n:error:booking_url_not_https",
		rf + "/agents\u202eq3\n:warning:exclusion_only_condition@1",
		rf + ":warning:unknown_variant_override@1",
	}
	if got := findings(rep); !reflect.DeepEqual(got, want) {
		t.Fatalf("findings %q", got)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if out := text.String(); strings.ContainsAny(out, "\u202e\u2066") || strings.Contains(out, "q3\n") {
		t.Errorf("text output shows a raw control or bidi character:\n%s", out)
	}
	if !strings.Contains(text.String(), `campaign "agents\u202eq3\n": will NOT recruit`) {
		t.Errorf("text output:\n%s", text.String())
	}
	for _, p := range rep.Flags[0].Problems {
		if strings.IndexFunc(p.Message, safetext.Hidden) >= 0 {
			t.Errorf("message %q shows a hidden character", p.Message)
		}
	}
	for _, p := range rep.Flags[0].Variants[0].Problems {
		if strings.IndexFunc(p.Message, safetext.Hidden) >= 0 {
			t.Errorf("message %q shows a hidden character", p.Message)
		}
	}
}

func TestUTF16LenAndJSBlank(t *testing.T) {
	for s, want := range map[string]int{"": 0, "abc": 3, "é": 1, "😀": 2, "日本": 2, "a😀b": 4, "\xff": 1} {
		if got := UTF16Len(s); got != want {
			t.Errorf("UTF16Len(%q) = %d, want %d", s, got, want)
		}
	}
	for s, want := range map[string]bool{"": true, " \t\n\r\v\f": true, "\u00a0\u3000\ufeff\u2028\u2029\u202f": true, "\u0085": false, "\u200b": false, "x": false, " . ": false} {
		if got := JSBlank(s); got != want {
			t.Errorf("JSBlank(%q) = %v, want %v", s, got, want)
		}
	}
	// Exactly at the limits is accepted; one unit over is not.
	for _, c := range []struct {
		units, limit int
		s            string
	}{{1000, MaxMessageUnits, strings.Repeat("😀", 500)}, {2000, MaxPromptUnits, strings.Repeat("a", 2000)}} {
		if UTF16Len(c.s) != c.units || c.units > c.limit {
			t.Errorf("limit case %d", c.units)
		}
	}
}

// Only the document as a whole can be rejected, with a message saying what is expected and no
// Go type names.
func TestDecodeFlagsRejects(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"not json":        {`{"results": [`, "not JSON"},
		"empty":           {``, "not JSON"},
		"neither":         {`{"count": 0}`, `neither "results"`},
		"both":            {`{"results": [], "flags": []}`, `both "results"`},
		"array":           {`[]`, `flag definitions are an array; want a JSON object in PostHog's shape: the feature-flags API list {"results": [...]}`},
		"string":          {`"flags"`, "are a string; want a JSON object"},
		"trailing":        {`{"flags": []} {}`, "more than one JSON value"},
		"results object":  {`{"results": {"key": "mcp-intent-prompt"}}`, `"results" is an object; want an array of flags`},
		"flags string":    {`{"flags": "all"}`, `"flags" is a string; want an array of flags`},
		"one flag no key": {`{"key": 5, "active": true}`, `"key" is not a string`},
	} {
		_, _, err := DecodeFlags(strings.NewReader(c.doc))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to say %q", name, err, c.want)
			continue
		}
		if strings.IndexFunc(err.Error(), safetext.Hidden) >= 0 || strings.Contains(err.Error(), "Go ") || strings.Contains(err.Error(), "campaigns.") {
			t.Errorf("%s: error %q", name, err)
		}
	}
	one, _, err := DecodeFlags(strings.NewReader(`{"id": 4211, "key": "mcp-intent-prompt", "active": true, "filters": {"groups": []}}`))
	if err != nil || len(one) != 1 || one[0].Key != IntentPromptFlag || !one[0].Active {
		t.Fatalf("one flag: %+v %v", one, err)
	}
	flags, next, err := DecodeFlags(strings.NewReader(`{"count": 1, "next": "https://us.posthog.com/api/projects/2/feature_flags/?limit=100&offset=100", "results": [{"key": "a", "deleted": true}]}`))
	if err != nil || len(flags) != 1 || !flags[0].Deleted || !strings.HasSuffix(next, "offset=100") {
		t.Fatalf("%v %v %q", flags, err, next)
	}
}

// Each flag decodes on its own: an unrelated flag of any shape is kept by its key (or left
// out without one) and never an error; a checked flag that does not decode is marked
// Malformed with a message in JSON's words, and the other checked flag is still linted.
func TestDecodeFlagsOneFlagAtATime(t *testing.T) {
	doc := `{"results": [
	{"key": "x", "filters": {"groups": [{"rollout_percentage": "100"}]}},
	{"key": "y", "active": "yes"},
	{"key": 123, "active": true},
	{"key": "z", "filters": {"payloads": []}},
	{"key": "w", "filters": {"groups": [{"variant": 5}]}},
	{"active": true},
	"flag",
	{"key": "mcp-interview-recruitment", "active": "yes", "filters": {"groups": []}},
	{"key": "mcp-intent-prompt", "filters": {"groups": [{"properties": [], "rollout_percentage": "100"}]}}
]}`
	flags, _, err := DecodeFlags(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	malformed := map[string]string{}
	for _, f := range flags {
		keys = append(keys, f.Key)
		if f.Malformed != "" {
			malformed[f.Key] = f.Malformed
		}
	}
	if want := []string{"x", "y", "z", "w", rf, ip}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	want := map[string]string{
		rf: `"active" is a string, want true or false`,
		ip: `"filters.groups.rollout_percentage" is a string, want a number`,
	}
	if !reflect.DeepEqual(malformed, want) {
		t.Fatalf("malformed %q, want %q", malformed, want)
	}
	rep := Lint(flags, Options{ExclusionCohort: testCohort})
	if got := findings(rep); !reflect.DeepEqual(got, []string{ip + ":error:flag_malformed", rf + ":error:flag_malformed"}) || rep.Errors != 2 || len(rep.Missing) != 0 {
		t.Fatalf("findings %q (%d errors), missing %q", got, rep.Errors, rep.Missing)
	}
	msg := rep.Flags[0].Problems[0].Message
	if !strings.Contains(msg, `"active" is a string, want true or false`) || strings.Contains(msg, "bool") || strings.Contains(msg, "Go ") {
		t.Errorf("message %q", msg)
	}
}
