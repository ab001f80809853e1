package demo

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/demo/outcome"
	"github.com/mcpulse/mcpulse/suppression"
)

// ContactViolations is how many invitations breaking each further contact-policy rule the demo
// corpus holds (gen's ContactViolations; demo shape only), so the contact-policy panel and
// alert have something to show.
const ContactViolations = 2

// auditContactPolicy runs the contact-policy audit the scheduler runs, with the corpus's
// exclusion members file, storing its violations for the dashboards, and lists how the
// further kinds it found differ from what the generator expects (counts, invitation ids, per
// campaign). want nil (no contact cases generated) checks nothing but still audits.
func auditContactPolicy(ctx context.Context, ch driver.Conn, corpus string, want *outcome.ContactPolicy, now time.Time) ([]string, error) {
	opts := suppression.ContactPolicyOptions{}
	if want != nil {
		members, err := suppression.ReadExclusionMembers(corpus+gen.ContactExclusionSuffix, nil)
		if err != nil {
			return nil, err
		}
		opts.Excluded, opts.ExclusionSource = members, "file "+want.ExclusionMembers
	}
	a, err := suppression.AuditContactPolicyWith(ctx, ch, time.Time{}, now, false, opts)
	if err != nil {
		return nil, fmt.Errorf("contact-policy audit: %w", err)
	}
	if want == nil {
		return nil, nil
	}
	var out []string
	for k, n := range want.Counts {
		got := a.InvitationIDs(k)
		slices.Sort(got)
		if int64(a.ByKind[k]) != n || !slices.Equal(got, want.InvitationIDs[k]) {
			out = append(out, fmt.Sprintf("contact policy %s: want %d %v, got %d %v", k, n, want.InvitationIDs[k], a.ByKind[k], got))
		}
	}
	for c, byKind := range want.ByCampaign {
		for k, n := range byKind {
			if got := a.ByCampaign[c].Count(k); int64(got) != n {
				out = append(out, fmt.Sprintf("contact policy %s in campaign %q: want %d, got %d", k, c, n, got))
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
