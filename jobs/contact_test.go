package jobs

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/mcpulse/mcpulse/suppression"
)

// The contact audit's options are read at each run; when they cannot be (the cohort API is
// down, the members file went away) the run fails and says why, before reading ClickHouse.
func TestContactAuditFailsWhenItsOptionsCannotBeRead(t *testing.T) {
	var logs syncBuffer
	calls := 0
	cfg := SchedulerConfig{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		ContactPolicy: func(context.Context) (suppression.ContactPolicyOptions, error) {
			calls++
			return suppression.ContactPolicyOptions{}, errors.New("PostHog cohort persons API answered 503")
		},
	}
	for range 2 {
		if err := ContactAuditOnce(cfg); err == nil || !strings.Contains(err.Error(), "503") {
			t.Fatalf("run: %v, want the options' error", err)
		}
	}
	if calls != 2 || !strings.Contains(logs.String(), "contact-policy audit failed") {
		t.Errorf("options read %d times, logs %s; want once per run, the failure logged", calls, logs.String())
	}
}
