package suppression_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcpulse/mcpulse/suppression"
)

func TestListFiltersByStateAndCampaign(t *testing.T) {
	s := newOpsStack(t)
	ctx := context.Background()
	recent := suppression.FormatTime(time.Now().Add(-time.Hour))
	put := func(id, campaign, state string) string {
		var ttl time.Duration
		if state == suppression.StateCooldown {
			ttl = suppression.CooldownPeriod - time.Hour
		}
		opsPutRecord(t, s.rdb, id, suppression.Record{CampaignID: campaign, Response: state, RespondedAt: recent}, ttl)
		return opsHash(id)
	}
	a := put("a", "alpha", suppression.StateAccepted)
	b := put("b", "alpha", suppression.StateDeclined)
	c := put("c", "alpha", suppression.StateCooldown)
	d := put("d", "beta", suppression.StateCooldown)
	e := put("e", "beta", suppression.StateDeclined)
	// Keys that are not records: pending keys (one whose id ends in ":response"), a watermark.
	opsPutPending(t, s.rdb, "a", "inv-1", "x:response")
	if err := s.rdb.Set(ctx, suppression.ResetKey(a), `{"reset_at":"2026-01-01T00:00:00.000Z","actor":"x","reason":"y"}`, 0).Err(); err != nil {
		t.Fatal(err)
	}
	// A value the MCP server should never write.
	bad := opsHash("f")
	if err := s.rdb.Set(ctx, suppression.ResponseKey(bad), "not json", 0).Err(); err != nil {
		t.Fatal(err)
	}

	list := func(opts suppression.ListOptions) ([]string, []suppression.ListEntry, suppression.ListStats) {
		t.Helper()
		opts.Redis = s.rdb
		opts.ScanCount = 3
		var hashes []string
		var entries []suppression.ListEntry
		stats, err := suppression.List(ctx, opts, func(e suppression.ListEntry) error {
			hashes = append(hashes, e.IdentityHash)
			entries = append(entries, e)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(hashes)
		return hashes, entries, stats
	}
	sorted := func(h ...string) []string { slices.Sort(h); return h }

	all, entries, stats := list(suppression.ListOptions{})
	if want := sorted(a, b, c, d, e, bad); !slices.Equal(all, want) {
		t.Errorf("all = %q, want %q", all, want)
	}
	if stats.Scanned != 6 || stats.Listed != 6 || stats.Unreadable != 1 {
		t.Errorf("stats = %+v", stats)
	}
	for _, en := range entries {
		switch en.IdentityHash {
		case bad:
			if en.Error == "" || en.State != "" {
				t.Errorf("unreadable entry = %+v", en)
			}
		case c, d:
			if en.TTLMillis <= 0 || en.State != suppression.StateCooldown || !strings.Contains(en.Text(), "6d2") {
				t.Errorf("cooldown entry = %+v, %q", en, en.Text())
			}
		default:
			if en.TTLMillis != -1 || en.RespondedAt != recent || !strings.HasSuffix(en.Text(), "  -") {
				t.Errorf("permanent entry = %+v, %q", en, en.Text())
			}
		}
	}

	for _, tc := range []struct {
		state, campaign string
		want            []string
	}{
		{"cooldown", "", sorted(c, d)},
		{"declined", "", sorted(b, e)},
		{"accepted", "", sorted(a)},
		{suppression.StateDeclined, "", sorted(b, e)},
		{"", "alpha", sorted(a, b, c)},
		{"cooldown", "beta", sorted(d)},
		{"accepted", "beta", nil},
	} {
		got, _, stats := list(suppression.ListOptions{State: tc.state, Campaign: tc.campaign})
		if !slices.Equal(got, tc.want) {
			t.Errorf("state %q campaign %q: %q, want %q", tc.state, tc.campaign, got, tc.want)
		}
		if stats.Listed != len(tc.want) || stats.Scanned != 6 {
			t.Errorf("state %q campaign %q: stats %+v", tc.state, tc.campaign, stats)
		}
	}

	if _, err := suppression.List(ctx, suppression.ListOptions{Redis: s.rdb, State: "pending"}, func(suppression.ListEntry) error { return nil }); err == nil {
		t.Error("an unknown state was accepted")
	}
	stop := errors.New("stop")
	n := 0
	if _, err := suppression.List(ctx, suppression.ListOptions{Redis: s.rdb}, func(suppression.ListEntry) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Errorf("emit error: %v after %d", err, n)
	}
}

func TestListEntryTextEscapesCampaign(t *testing.T) {
	e := suppression.ListEntry{IdentityHash: strings.Repeat("a", 64), State: suppression.StateDeclined, CampaignID: "x\x1b[31m", RespondedAt: "2026-11-20T10:00:00.000Z", TTLMillis: -1}
	got := e.Text()
	if strings.Contains(got, "\x1b") || !strings.Contains(got, `"x\x1b[31m"`) {
		t.Errorf("Text() = %q", got)
	}
	want := fmt.Sprintf("%s  %-21s  %s  %s  -", e.IdentityHash, suppression.StateDeclined, `"x\x1b[31m"`, e.RespondedAt)
	if got != want {
		t.Errorf("Text() = %q, want %q", got, want)
	}
}
