package jobs

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has installed

	"github.com/ClickHouse/clickhouse-go/v2"
	"github.com/redis/go-redis/v9"
	"github.com/robfig/cron/v3"
)

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// runsBetween lists the runs of sched in [from, to), by driving Next (no sleeping).
func runsBetween(t *testing.T, sched cron.Schedule, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for at := sched.Next(from.Add(-time.Nanosecond)); !at.IsZero() && at.Before(to); at = sched.Next(at) {
		out = append(out, at)
		if len(out) > 100_000 {
			t.Fatal("runaway schedule")
		}
	}
	return out
}

// unregisteredScheduler builds the scheduler as `mcpulse scheduler` would, with clients that
// are never dialled (nothing here runs a job).
func unregisteredScheduler(t *testing.T, cfg SchedulerConfig) *cron.Cron {
	t.Helper()
	ch, err := clickhouse.Open(&clickhouse.Options{Addr: []string{"127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { ch.Close(); rdb.Close() })
	cfg.ClickHouse, cfg.Redis = ch, rdb
	c, err := NewScheduler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The jobs the scheduler registers run exactly once on both daylight-saving transition days:
// a time in the spring-forward gap at the end of the gap (robfig/cron alone skips it), a time
// in the repeated autumn hour at its first occurrence only (robfig/cron alone runs it twice).
// Zones come from CRON_TZ=, TZ=, or the scheduler's Location.
func TestScheduledJobsRunOnceOnDaylightSavingDays(t *testing.T) {
	ny := mustZone(t, "America/New_York")
	c := unregisteredScheduler(t, SchedulerConfig{
		ReconcileSchedule:    "CRON_TZ=America/New_York 30 2 * * *", // in the spring gap
		ContactAuditSchedule: "TZ=America/New_York 30 1 * * *",      // in the autumn repeat
		AlertSchedule:        "0 * * * *",                           // hourly, on Location
		Alerts:               &evaluations{},
		Location:             ny,
	})
	entries := map[string]cron.Schedule{}
	for _, e := range c.Entries() {
		entries[[]string{"", JobReconcile, JobContactAudit, JobAlerts}[e.ID]] = e.Schedule
	}
	local := func(day string, h, m int) time.Time {
		d, _ := time.ParseInLocation("2006-01-02", day, ny)
		return time.Date(d.Year(), d.Month(), d.Day(), h, m, 0, 0, ny)
	}
	utc := func(s string) time.Time { t, _ := time.Parse(time.RFC3339, s); return t }
	for _, tc := range []struct {
		job      string
		from, to time.Time
		want     []time.Time
	}{
		{JobReconcile, local("2026-03-07", 0, 0), local("2026-03-10", 0, 0), []time.Time{
			local("2026-03-07", 2, 30), utc("2026-03-08T07:00:00Z") /* 03:00 EDT, the end of the gap */, local("2026-03-09", 2, 30)}},
		{JobReconcile, local("2026-10-31", 0, 0), local("2026-11-03", 0, 0), []time.Time{
			local("2026-10-31", 2, 30), local("2026-11-01", 2, 30), local("2026-11-02", 2, 30)}},
		{JobContactAudit, local("2026-03-07", 0, 0), local("2026-03-10", 0, 0), []time.Time{
			local("2026-03-07", 1, 30), local("2026-03-08", 1, 30), local("2026-03-09", 1, 30)}},
		{JobContactAudit, local("2026-10-31", 0, 0), local("2026-11-03", 0, 0), []time.Time{
			local("2026-10-31", 1, 30), utc("2026-11-01T05:30:00Z") /* 01:30 EDT, not 01:30 EST */, local("2026-11-02", 1, 30)}},
	} {
		inUTC := func(ts []time.Time) string {
			out := make([]string, len(ts))
			for i, x := range ts {
				out[i] = x.UTC().Format(time.RFC3339) + " (" + x.In(ny).Format("15:04 MST") + ")"
			}
			return strings.Join(out, ", ")
		}
		got := runsBetween(t, entries[tc.job], tc.from, tc.to)
		if inUTC(got) != inUTC(tc.want) {
			t.Errorf("%s from %s: runs %s, want %s", tc.job, tc.from, inUTC(got), inUTC(tc.want))
		}
	}
	// Hourly: 23 runs on the 23-hour day (02:00 runs with 03:00), 24 on the 25-hour day (the
	// repeated 01:00 once), never the same wall-clock hour twice.
	for day, want := range map[string]int{"2026-03-07": 24, "2026-03-08": 23, "2026-11-01": 24, "2026-11-02": 24} {
		runs := runsBetween(t, entries[JobAlerts], local(day, 0, 0), local(day, 0, 0).AddDate(0, 0, 1))
		seen := map[string]bool{}
		for _, r := range runs {
			label := r.In(ny).Format("15:04")
			if seen[label] {
				t.Errorf("%s: %s ran twice", day, label)
			}
			seen[label] = true
		}
		if len(runs) != want {
			t.Errorf("%s: %d hourly runs, want %d: %v", day, len(runs), want, runs)
		}
	}
}

// Over a whole year in zones with one-hour, half-hour, southern-hemisphere and no transitions,
// every daily spec runs exactly once per local day, and no spec runs one wall-clock time twice.
func TestEveryWallClockTimeRunsOnceAllYear(t *testing.T) {
	zones := []string{"America/New_York", "Europe/London", "Europe/Paris", "Australia/Sydney", "Australia/Lord_Howe",
		"America/Santiago", "Asia/Kolkata", "UTC"}
	specs := []struct {
		spec    string
		perDay  int  // runs on every local day (0: not checked)
		sundays bool // only on Sundays
	}{
		{"30 2 * * *", 1, false}, {"30 1 * * *", 1, false}, {"0 0 * * *", 1, false}, {"0 2 * * *", 1, false},
		{"59 1 * * *", 1, false}, {"0 3 * * *", 1, false}, {"@daily", 1, false}, {"15 2 * * 0", 1, true},
		{"0 * * * *", 0, false}, {"*/20 * * * *", 0, false}, {"45 */2 * * *", 0, false}, {"@hourly", 0, false},
	}
	for _, zone := range zones {
		loc := mustZone(t, zone)
		from := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
		to := from.AddDate(1, 0, 0)
		for _, sp := range specs {
			spec := sp.spec
			for _, written := range []string{spec, "CRON_TZ=" + zone + " " + spec} {
				sched, err := ParseSchedule(written, loc)
				if err != nil {
					t.Fatalf("%s: %v", written, err)
				}
				runs := runsBetween(t, sched, from, to)
				perDay, labels := map[string]int{}, map[string]bool{}
				for _, r := range runs {
					perDay[r.In(loc).Format("2006-01-02")]++
					label := r.In(loc).Format("2006-01-02 15:04")
					if labels[label] {
						t.Errorf("%s in %s: %s ran twice", written, zone, label)
					}
					labels[label] = true
				}
				if sp.perDay == 0 {
					continue
				}
				for d := from; d.Before(to); d = d.AddDate(0, 0, 1) {
					want := sp.perDay
					if sp.sundays && d.Weekday() != time.Sunday {
						want = 0
					}
					if n := perDay[d.Format("2006-01-02")]; n != want {
						t.Errorf("%s in %s: %d runs on %s, want %d", written, zone, n, d.Format("2006-01-02"), want)
					}
				}
			}
		}
	}
}

// A zone that does not exist is refused with cron's reason, naming the job and the spec.
func TestScheduleWithAnUnknownZoneIsRefused(t *testing.T) {
	cfg := SchedulerConfig{ReconcileSchedule: "CRON_TZ=Mars/Olympus_Mons 0 3 * * *"}
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), `reconcile schedule "CRON_TZ=Mars/Olympus_Mons 0 3 * * *"`) || !strings.Contains(err.Error(), "Mars/Olympus_Mons") {
		t.Errorf("Validate: %v", err)
	}
	// @every counts elapsed time: no wall clock, no transition.
	s, err := ParseSchedule("@every 15m", mustZone(t, "America/New_York"))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 1, 5, 50, 0, 0, time.UTC)
	if next := s.Next(at); next.Sub(at) != 15*time.Minute {
		t.Errorf("@every 15m across the autumn transition: next %s after %s", next, at)
	}
}
