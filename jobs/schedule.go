package jobs

import (
	"time"

	"github.com/robfig/cron/v3"
)

// ParseSchedule parses a schedule as the scheduler runs it: a cron spec of five fields or a
// descriptor (@hourly, @daily, @every 15m; cron.ParseStandard's grammar), optionally prefixed
// with CRON_TZ=<zone> or TZ=<zone> (an IANA name). Field specs and @hourly-style descriptors are
// read on the wall clock of their zone, or of loc without a prefix, and every wall-clock time
// they name runs exactly once, also on daylight-saving transition days:
//
//   - a time that falls in the spring-forward gap (02:30 when clocks jump from 02:00 to 03:00)
//     runs at the end of the gap, the first instant that exists after it (03:00); several
//     such times run once, together;
//   - a time in the repeated autumn hour (01:30 when clocks fall back from 02:00 to 01:00)
//     runs at its first occurrence only.
//
// robfig/cron alone skips the first and runs the second twice. @every schedules count elapsed
// time and are returned as cron parses them. The error is cron's, naming the spec's problem
// (an unknown zone included).
func ParseSchedule(spec string, loc *time.Location) (cron.Schedule, error) {
	sched, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	s, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return sched, nil
	}
	zone := s.Location
	if zone == time.Local { // no prefix: the scheduler's zone
		zone = loc
	}
	if zone == nil {
		zone = time.Local
	}
	fields := *s
	fields.Location = time.UTC
	return wallClockSchedule{fields: &fields, loc: zone}, nil
}

// wallClockSchedule runs a cron spec on the wall clock of loc, each wall-clock time once. It
// matches the spec against wall-clock readings written as UTC times (a clock without
// transitions), then maps each reading to the instant it names in loc.
type wallClockSchedule struct {
	fields *cron.SpecSchedule // Location UTC
	loc    *time.Location
}

// Next implements cron.Schedule: the first run after t, or the zero time when the spec names
// no time in the next five years.
func (w wallClockSchedule) Next(t time.Time) time.Time {
	wall := wallReading(t.In(w.loc))
	// A reading whose instant is not after t is skipped: in the repeated hour, the readings
	// already run at their first occurrence. At most a few hours of readings are skipped.
	for range 100_000 {
		wall = w.fields.Next(wall)
		if wall.IsZero() {
			return time.Time{}
		}
		if at := w.instant(wall); at.After(t) {
			return at
		}
	}
	return time.Time{}
}

// instant is the instant a wall-clock reading (written as UTC) names in loc: the earlier of two
// in a repeated hour, and the end of the gap for one the clocks skipped.
func (w wallClockSchedule) instant(wall time.Time) time.Time {
	// The offsets in force a day either side cover any one transition near the reading.
	var candidates [2]time.Time
	for i, probe := range []time.Time{wall.Add(-24 * time.Hour), wall.Add(24 * time.Hour)} {
		_, offset := probe.In(w.loc).Zone()
		candidates[i] = wall.Add(-time.Duration(offset) * time.Second)
	}
	if candidates[1].Before(candidates[0]) {
		candidates[0], candidates[1] = candidates[1], candidates[0]
	}
	for _, at := range candidates {
		if wallReading(at.In(w.loc)).Equal(wall) {
			return at
		}
	}
	// In a gap: the earlier candidate lies before the transition, whose instant ends its zone.
	if _, end := candidates[0].In(w.loc).ZoneBounds(); !end.IsZero() {
		return end
	}
	return candidates[1]
}

// wallReading writes t's wall-clock reading as a UTC time.
func wallReading(t time.Time) time.Time {
	return time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), t.Nanosecond(), time.UTC)
}
