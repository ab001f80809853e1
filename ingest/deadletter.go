package ingest

import (
	"errors"
	"strings"
)

// DeadLetterClass says why a dead letter was refused, from a small fixed set: fit for a metric
// label, a dashboard group and an alert, where the one-line reason beside it quotes
// caller-chosen values. It travels as the Kafka header HeaderErrorClass and is stored in
// dead_letters.reason_class; nothing classifies reason text.
type DeadLetterClass string

// The dead-letter classes.
const (
	ClassBadJSON           DeadLetterClass = "bad_json"            // not JSON, or not one JSON object
	ClassInvalidUUID       DeadLetterClass = "invalid_uuid"        // uuid missing, not a UUID, the nil UUID
	ClassInvalidEvent      DeadLetterClass = "invalid_event"       // event missing or not a string
	ClassInvalidDistinctID DeadLetterClass = "invalid_distinct_id" // distinct_id missing, too long, not JavaScript-exact
	ClassInvalidTimestamp  DeadLetterClass = "invalid_timestamp"   // timestamp missing, not RFC 3339, out of range
	ClassInvalidProperties DeadLetterClass = "invalid_properties"  // properties missing, or a property breaks its kind's rules
	ClassClock             DeadLetterClass = "clock"               // an invitation response dated in the future (CheckClock)
	ClassTooLarge          DeadLetterClass = "too_large"           // a line or message over the size limit
	ClassNotEncodable      DeadLetterClass = "not_encodable"       // parsed, but could not be encoded again
	ClassAuditInvalid      DeadLetterClass = "audit_invalid"       // an audit-topic message that is not a valid audit event
	ClassStoreRefused      DeadLetterClass = "store_refused"       // valid, but ClickHouse refuses to store it for good
	ClassOther             DeadLetterClass = "other"               // anything else
)

var knownClasses = map[DeadLetterClass]bool{
	ClassBadJSON: true, ClassInvalidUUID: true, ClassInvalidEvent: true, ClassInvalidDistinctID: true,
	ClassInvalidTimestamp: true, ClassInvalidProperties: true, ClassClock: true, ClassTooLarge: true,
	ClassNotEncodable: true, ClassAuditInvalid: true, ClassStoreRefused: true, ClassOther: true,
}

// ParseDeadLetterClass reads a HeaderErrorClass value: one of the classes, ClassOther for any
// other text (the header is untrusted: anyone who can write the topic sets it), "" for none.
func ParseDeadLetterClass(header string) DeadLetterClass {
	switch c := DeadLetterClass(header); {
	case header == "":
		return ""
	case knownClasses[c]:
		return c
	}
	return ClassOther
}

// HeaderErrorClass is the dead-letter message header holding its DeadLetterClass.
const HeaderErrorClass = "mcpulse-error-class"

// ErrBadJSON is wrapped by Parse's error for input that is not exactly one JSON object.
var ErrBadJSON = errors.New("bad JSON")

// ClassOf returns the class of an error Parse, CheckClock or a Publisher returned:
// ClassBadJSON, the class of a *ValidationError (its first problem's field, or ClassClock),
// ClassNotEncodable, ClassTooLarge, or ClassOther.
func ClassOf(err error) DeadLetterClass {
	var v *ValidationError
	switch {
	case err == nil:
		return ClassOther
	case errors.Is(err, ErrBadJSON):
		return ClassBadJSON
	case errors.As(err, &v):
		return v.Class()
	case errors.Is(err, ErrNotEncodable):
		return ClassNotEncodable
	case errors.Is(err, ErrMessageTooLarge):
		return ClassTooLarge
	}
	return ClassOther
}

// Class is the validation error's DeadLetterClass: ClassClock for CheckClock's, else the class
// of the envelope field its first problem names.
func (v *ValidationError) Class() DeadLetterClass {
	if v.clock {
		return ClassClock
	}
	if len(v.Problems) == 0 {
		return ClassOther
	}
	field, _, _ := strings.Cut(v.Problems[0].Path, ".")
	switch field {
	case "uuid":
		return ClassInvalidUUID
	case "event":
		return ClassInvalidEvent
	case "distinct_id":
		return ClassInvalidDistinctID
	case "timestamp":
		return ClassInvalidTimestamp
	case "properties":
		return ClassInvalidProperties
	}
	return ClassOther
}
