package gateway

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mcpulse/mcpulse/ingest"
)

// The gateway corrects a client's clock with one shift per request, applied alike to every
// time of every event of the request (DESIGN.md §8, "Clock correction"). The only clock
// reading a request carries is sent_at (the body's, or posthog-js's `_` query parameter in
// milliseconds): what the client's clock read when it sent the request. Against the receive
// time now, the reading sent_at − now is the client's clock error minus the transit delay, and
// one request cannot tell them apart; so:
//
//   - sent_at ahead of now by a: the clock is at least a fast (a delay only hides fastness).
//     Every time moves back by a − FastClockTolerance (nothing under the tolerance): the
//     corrected times are never more than the tolerance ahead of the receive time.
//   - sent_at behind now by b: b is transit delay plus slowness. Every time moves forward by
//     b − TransitAllowance (nothing under the allowance): a request delivered late by less than
//     the allowance keeps its times, and a slow clock is corrected to within the allowance.
//     PostHog's capture service uses the same deadband (150 s) for the same reason.
//
// Both rules are continuous, so retries of one batch whose delays differ (SDKs keep the first
// sent_at on retries) get corrections that differ by no more than the delays.

// FastClockTolerance is how far ahead of the receive time a sent_at may be before the
// request's times are corrected: sub-second differences are clock noise, not worth a shift.
const FastClockTolerance = time.Second

// DefaultTransitAllowance is Config.TransitAllowance's default: the deadband PostHog's capture
// service applies to the same measurement.
const DefaultTransitAllowance = 150 * time.Second

// MaxFutureTimestamp is how far ahead of the receive time an event's timestamp may still be,
// after the request's correction, before the gateway dates the event at its receipt instead
// (keeping the value sent in PropClientTimestamp). It is PostHog's ingestion rule for the
// same case (a timestamp more than 23 hours in the future is replaced by the time the event
// was received): without it one event dated 2099 sits in every hourly rollup's future for
// ever, and a server's clock years ahead makes each of its events a partition of its own.
// Invitation responses keep their stricter rule on responded_at (ingest.CheckClock).
const MaxFutureTimestamp = 23 * time.Hour

// maxOffset bounds PostHog's per-event offset (milliseconds before sending).
const maxOffset = maxPlausibleSkew

// Property names the gateway adds to an event whose times it changed or filled in (CONTRACTS.md
// "Gateway -> consumer"). Raw values are kept as the client sent them (JSON as received).
const (
	// PropClientTimestamp is the event's timestamp as sent, when the gateway corrected it.
	PropClientTimestamp = "$mcpulse_client_timestamp"
	// PropClientRespondedAt is properties.responded_at as sent, when the gateway corrected it.
	PropClientRespondedAt = "$mcpulse_client_responded_at"
	// PropClientSentAt is the request's sent_at as sent, when it caused a correction.
	PropClientSentAt = "$mcpulse_client_sent_at"
	// PropClientOffset is the event's offset (milliseconds before sending), when it dated the event.
	PropClientOffset = "$mcpulse_client_offset_ms"
	// PropReceivedAt is the gateway's receive time (RFC 3339, UTC), on every event whose times
	// the gateway changed or filled in.
	PropReceivedAt = "$mcpulse_received_at"
)

// gatewayProperties are the properties only the gateway sets; a client's are removed.
var gatewayProperties = []string{PropClientTimestamp, PropClientRespondedAt, PropClientSentAt, PropClientOffset, PropReceivedAt}

// correctedProperties are the time properties the event contract reads (DESIGN.md §2): for
// events named event, the property name is shifted like the timestamp, and raw keeps its value
// as sent. A property of the same name on another event is the client's data, left alone.
var correctedProperties = []struct{ event, name, raw string }{
	{ingest.EventInvitationResponse, "responded_at", PropClientRespondedAt},
}

// requestClock is what a request says about the client's clock.
type requestClock struct {
	now       time.Time       // receive time (gateway clock)
	sentAt    time.Time       // client clock at sending; zero when absent, unparseable or implausible
	rawSentAt json.RawMessage // sent_at as received, for PropClientSentAt
	shift     time.Duration   // added to every client time of the request
	allowance time.Duration   // Config.TransitAllowance
}

// newRequestClock reads sent_at (an RFC 3339 string, or a number of milliseconds / seconds as
// posthog-js sends in `_`) and computes the request's shift.
func newRequestClock(now time.Time, rawSentAt json.RawMessage, allowance time.Duration) requestClock {
	c := requestClock{now: now, allowance: allowance}
	sent, ok := parseSentAt(rawSentAt)
	if !ok || !plausible(now, sent) {
		return c
	}
	c.sentAt, c.rawSentAt = sent, rawSentAt
	c.shift = clockShift(now, sent, allowance)
	return c
}

// plausible reports whether a client's clock reading is close enough to now to be a clock
// error; a reading further off is a bad value and is ignored.
func plausible(now, sent time.Time) bool {
	d := now.Sub(sent)
	return d < maxPlausibleSkew && d > -maxPlausibleSkew
}

// clockShift is the correction added to a client's times given one clock reading.
func clockShift(now, sent time.Time, allowance time.Duration) time.Duration {
	switch d := now.Sub(sent); {
	case d < -FastClockTolerance: // client ahead
		return d + FastClockTolerance
	case d > allowance: // client behind, beyond what transit explains
		return d - allowance
	default:
		return 0
	}
}

// parseSentAt accepts an RFC 3339 string, or digits (a JSON number or a string of digits):
// milliseconds since the epoch, or seconds when 11 digits or fewer (PostHog's rule for `_`).
func parseSentAt(raw json.RawMessage) (time.Time, bool) {
	if isNull(raw) {
		return time.Time{}, false
	}
	s := string(raw)
	if raw[0] == '"' {
		if json.Unmarshal(raw, &s) != nil {
			return time.Time{}, false
		}
	}
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, false
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		if len(s) > 11 {
			return time.UnixMilli(n).UTC(), true
		}
		return time.Unix(n, 0).UTC(), true
	}
	t, err := parseClientTime(s)
	return t, err == nil
}

// parseClientTime parses a client time the way ingest validates timestamps (RFC 3339 with an
// offset; a comma is refused).
func parseClientTime(s string) (time.Time, error) {
	if strings.IndexByte(s, ',') >= 0 {
		return time.Time{}, fmt.Errorf("comma in time")
	}
	return time.Parse(time.RFC3339Nano, s)
}

// applyClock dates one event of a PostHog request: a missing timestamp becomes the receive time
// (or, with an offset, the moment the client sent the request less the offset); every client
// time is shifted by the request's correction; raw values and the receive time are kept in
// properties. top must hold a "properties" object already (normalizePostHog). It reports
// problems with offset; a timestamp it cannot parse is left for validation to report.
func applyClock(top map[string]json.RawMessage, props map[string]json.RawMessage, c requestClock) []Problem {
	rawTS := top["timestamp"]
	tsAbsent := isNull(rawTS)
	changed := false
	setTime := func(t time.Time) json.RawMessage { return mustJSON(t.UTC().Format(time.RFC3339Nano)) }

	offset, hasOffset, problem := parseOffset(top["offset"])
	if problem != "" {
		return []Problem{{Path: "offset", Problem: problem}}
	}
	var clientTS time.Time
	tsOK := false
	if !tsAbsent && rawTS[0] == '"' {
		var s string
		if json.Unmarshal(rawTS, &s) == nil {
			if t, err := parseClientTime(s); err == nil {
				clientTS, tsOK = t, true
			}
		}
	}
	// The request's clock reading; without sent_at, an event carrying both timestamp and
	// offset is its own reading (it was sent at timestamp + offset by the client's clock).
	sentAt, shift := c.sentAt, c.shift
	if sentAt.IsZero() && hasOffset && tsOK {
		if s := clientTS.Add(offset); plausible(c.now, s) {
			sentAt, shift = s, clockShift(c.now, s, c.allowance)
		}
	}
	switch {
	case hasOffset && !sentAt.IsZero():
		// The event happened offset before the client sent the request.
		top["timestamp"] = setTime(sentAt.Add(-offset).Add(shift))
		changed = true
	case hasOffset:
		top["timestamp"] = setTime(c.now.Add(-offset))
		changed = true
	case tsAbsent:
		top["timestamp"] = setTime(c.now)
		changed = true
	case tsOK && shift != 0:
		top["timestamp"] = setTime(clientTS.Add(shift))
		changed = true
	}
	if !hasOffset && !tsAbsent && tsOK && clientTS.Add(shift).Sub(c.now) > MaxFutureTimestamp {
		top["timestamp"] = setTime(c.now)
		changed = true
	}
	if hasOffset {
		props[PropClientOffset] = mustJSON(offset.Milliseconds())
	}
	if changed && !tsAbsent {
		props[PropClientTimestamp] = rawTS
	}
	if shift != 0 {
		for _, p := range correctedProperties {
			if stringField(top, "event") != p.event {
				continue
			}
			raw, ok := props[p.name]
			if !ok || len(raw) == 0 || raw[0] != '"' {
				continue
			}
			var s string
			if json.Unmarshal(raw, &s) != nil {
				continue
			}
			t, err := parseClientTime(s)
			if err != nil {
				continue // validation reports it
			}
			props[p.raw] = raw
			props[p.name] = setTime(t.Add(shift))
			changed = true
		}
	}
	if changed {
		if shift != 0 && len(c.rawSentAt) > 0 && sentAt.Equal(c.sentAt) {
			props[PropClientSentAt] = c.rawSentAt
		}
		props[PropReceivedAt] = setTime(c.now)
	}
	return nil
}

// parseOffset reads PostHog's per-event offset: a JSON number of milliseconds before sending,
// 0 or more. Absent or null is no offset.
func parseOffset(raw json.RawMessage) (time.Duration, bool, string) {
	if isNull(raw) {
		return 0, false, ""
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil || math.IsNaN(f) {
		return 0, false, "must be a number of milliseconds before sending"
	}
	if f < 0 {
		return 0, false, "must not be negative: it counts milliseconds before the request was sent"
	}
	d := time.Duration(f * float64(time.Millisecond))
	if f > float64(maxOffset/time.Millisecond) {
		return 0, false, fmt.Sprintf("%.0f ms is more than %s before sending", f, maxOffset)
	}
	return d, true, ""
}
