package campaigns

import (
	"bytes"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// payloadErrors are the codes that stop the server recruiting for a campaign.
var payloadErrors = map[string]bool{
	CodePayloadMissing: true, CodePayloadMalformed: true, CodeMessageMissing: true, CodeMessageBlank: true,
	CodeMessageTooLong: true, CodeBookingURLMissing: true, CodeBookingURLInvalid: true, CodeBookingURLNotHTTPS: true,
	CodeMinCallsInvalid: true, CodeMinAgeInvalid: true,
}

// FuzzDecodeFlags decodes any document and lints what it accepts: nothing panics, every message
// is free of hidden characters, the totals count the problems, a campaign with a payload error
// never recruits, and a disabled flag neither recruits nor uses its prompt. Seeds:
// testdata/fuzz/FuzzDecodeFlags (the valid and rule fixtures, and hostile documents).
func FuzzDecodeFlags(f *testing.F) {
	f.Fuzz(func(t *testing.T, doc []byte) {
		flags, _, err := DecodeFlags(bytes.NewReader(doc))
		if err != nil {
			if strings.IndexFunc(err.Error(), safetext.Hidden) >= 0 {
				t.Fatalf("error shows a hidden character: %q", err)
			}
			return
		}
		for _, cohort := range []int64{0, 641799} {
			rep := Lint(flags, Options{ExclusionCohort: cohort})
			errs, warns := 0, 0
			check := func(ps []Problem) (payloadErr bool) {
				for _, p := range ps {
					if p.Code == "" || strings.IndexFunc(p.Message, safetext.Hidden) >= 0 {
						t.Fatalf("problem %+v", p)
					}
					switch p.Severity {
					case SeverityError:
						errs++
					case SeverityWarning:
						warns++
					default:
						t.Fatalf("severity %q", p.Severity)
					}
					payloadErr = payloadErr || payloadErrors[p.Code]
				}
				return payloadErr
			}
			for _, fr := range rep.Flags {
				check(fr.Problems)
				for _, v := range fr.Variants {
					bad := check(v.Problems)
					inUse := v.WillRecruit || (v.PromptInUse != nil && *v.PromptInUse)
					if inUse && (bad || !fr.Active) {
						t.Fatalf("%s/%q in use despite %+v (active %v)", fr.Flag, v.CampaignID, v.Problems, fr.Active)
					}
				}
			}
			if errs != rep.Errors || warns != rep.Warnings {
				t.Fatalf("totals %d/%d, counted %d/%d", rep.Errors, rep.Warnings, errs, warns)
			}
			var b strings.Builder
			if err := rep.WriteText(&b); err != nil {
				t.Fatal(err)
			}
		}
	})
}
