package campaigns

import (
	"fmt"
	"io"
	"strings"

	"github.com/mcpulse/mcpulse/internal/safetext"
)

// WriteText writes the report for people: per flag its state and problems, per variant
// whether it recruits (or, for the intent prompt, whether the prompt is in use) and its
// problems, then the totals. When neither checked flag was found it says plainly that nothing
// was linted (the totals are then 0 without meaning the flags are fine). Caller-chosen strings (flag and variant keys) are quoted and
// escaped.
func (r Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, key := range r.Missing {
		switch key {
		case RecruitmentFlag:
			fmt.Fprintf(&b, "%s: not found: the server skips recruitment\n", key)
		case IntentPromptFlag:
			fmt.Fprintf(&b, "%s: not found: the SDK's default context description stays\n", key)
		}
	}
	for _, f := range r.Flags {
		state := "active"
		switch {
		case hasCode(f.Problems, CodeFlagMalformed):
			state = "definition unreadable"
		case !f.Active:
			state = "disabled"
		}
		fmt.Fprintf(&b, "%s (%s)\n", safetext.Escape(f.Flag), state)
		writeProblems(&b, "  ", f.Problems)
		for _, v := range f.Variants {
			var verdict string
			switch {
			case v.PromptInUse != nil && *v.PromptInUse:
				verdict = "prompt in use"
			case v.PromptInUse != nil:
				verdict = "prompt NOT in use"
			case v.WillRecruit:
				verdict = "will recruit"
			default:
				verdict = "will NOT recruit"
			}
			name := "campaign"
			if v.PromptInUse != nil {
				name = "variant"
			}
			fmt.Fprintf(&b, "  %s %s: %s\n", name, safetext.Quote(v.CampaignID), verdict)
			writeProblems(&b, "    ", v.Problems)
		}
	}
	if len(r.Flags) == 0 {
		fmt.Fprintf(&b, "nothing was linted: neither %s nor %s is in the flag definitions (absent or deleted)\n", RecruitmentFlag, IntentPromptFlag)
	}
	fmt.Fprintf(&b, "%d error(s), %d warning(s)\n", r.Errors, r.Warnings)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeProblems(b *strings.Builder, indent string, ps []Problem) {
	for _, p := range ps {
		fmt.Fprintf(b, "%s%s %s: %s\n", indent, p.Severity, p.Code, p.Message)
	}
}
