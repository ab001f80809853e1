package suppression_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/demo/gen"
	"github.com/mcpulse/mcpulse/ingest"
	"github.com/mcpulse/mcpulse/suppression"
)

// publishCorpus generates a corpus into dir and sends it through the real consumer.
func (p *pipeline) publishCorpus(cfg gen.Config, dir, name string) string {
	p.t.Helper()
	path := filepath.Join(dir, name)
	if _, err := gen.WriteFiles(cfg, path); err != nil {
		p.t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		p.t.Fatal(err)
	}
	defer f.Close()
	if _, err := ingest.PublishFile(context.Background(), p.pub, f, name, nil); err != nil {
		p.t.Fatal(err)
	}
	p.drain()
	return path
}

// further are the kinds the generator injects (the first two come from its recruitment flows).
func further() []string {
	var out []string
	for _, k := range suppression.ViolationKinds[2:] {
		out = append(out, k.Kind)
	}
	return out
}

// gen's clean corpus gives none of the further kinds; one with injected violations gives
// exactly the counts, ids and per-campaign counts its .expected.json lists.
func TestContactAuditFindsTheInjectedViolationsExactly(t *testing.T) {
	p := newPipeline(t)
	ctx := context.Background()
	dir := t.TempDir()
	end := time.Now().UTC().Truncate(time.Hour)
	now := time.Now().UTC()

	clean := p.publishCorpus(gen.Config{Events: 3000, Seed: 11, End: end}, dir, "clean.jsonl")
	if _, err := os.Stat(clean + gen.ContactExclusionSuffix); err == nil {
		t.Errorf("a clean corpus came with an exclusion members file")
	}
	a, err := suppression.AuditContactPolicyWith(ctx, p.ch, time.Time{}, now, true,
		suppression.ContactPolicyOptions{Excluded: map[string]bool{"contact-excluded_person-0@cases.example": true}})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range further() {
		if a.ByKind[k] != 0 {
			t.Errorf("clean corpus: %d %s violations (%v), want none", a.ByKind[k], k, a.InvitationIDs(k))
		}
	}
	if a.Invitations == 0 {
		t.Fatal("clean corpus: no invitation audited")
	}

	path := p.publishCorpus(gen.Config{Events: 2000, Seed: 12, End: end, ContactViolations: 3}, dir, "cases.jsonl")
	o, err := gen.WriteFiles(gen.Config{Events: 2000, Seed: 12, End: end, ContactViolations: 3}, filepath.Join(dir, "again.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	want := o.ContactPolicy
	if want == nil || want.ExclusionMembers != "cases.jsonl"+gen.ContactExclusionSuffix && want.ExclusionMembers != "again.jsonl"+gen.ContactExclusionSuffix {
		t.Fatalf("expected contact policy %+v", want)
	}
	members, err := suppression.ReadExclusionMembers(path+gen.ContactExclusionSuffix, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(members) != 3 {
		t.Errorf("exclusion members %d, want 3", len(members))
	}
	a, err = suppression.AuditContactPolicyWith(ctx, p.ch, time.Time{}, now, false,
		suppression.ContactPolicyOptions{Excluded: members, ExclusionSource: "file"})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range further() {
		got := a.InvitationIDs(k)
		slices.Sort(got)
		if int64(a.ByKind[k]) != want.Counts[k] || want.Counts[k] != 3 || fmt.Sprint(got) != fmt.Sprint(want.InvitationIDs[k]) {
			t.Errorf("%s: %d %v, want %d %v", k, a.ByKind[k], got, want.Counts[k], want.InvitationIDs[k])
		}
	}
	for c, byKind := range want.ByCampaign {
		for k, n := range byKind {
			if got := a.ByCampaign[c].Count(k); int64(got) != n {
				t.Errorf("campaign %s %s: %d, want %d", c, k, got, n)
			}
		}
	}
	var stored uint64
	if err := p.ch.QueryRow(ctx, "SELECT count() FROM mcpulse.contact_policy_violations FINAL WHERE kind NOT IN ('sent_while_suppressed', 'repeat_within_7_days')").Scan(&stored); err != nil || stored != 15 {
		t.Errorf("stored further violations %d, %v; want 15", stored, err)
	}
}
