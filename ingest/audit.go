package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// AuditActionReset is the action of an ops suppression reset.
const AuditActionReset = "suppression_reset"

// AuditEvent records one ops action on the suppression state, published to TopicAudit (keyed by
// identity hash) and stored by the consumers in table suppression_audit.
type AuditEvent struct {
	UUID           string          `json:"uuid"`            // RFC 4122; the row key in suppression_audit
	Action         string          `json:"action"`          // AuditActionReset
	At             time.Time       `json:"at"`              // when the action took effect (the reset watermark)
	IdentityHash   string          `json:"identity_hash"`   // 64 lowercase hex characters
	DistinctID     string          `json:"distinct_id"`     // "" when the operator gave only the hash
	InstanceURL    string          `json:"instance_url"`    // "" when the operator gave only the hash
	Actor          string          `json:"actor"`           // who did it
	Reason         string          `json:"reason"`          // why
	DeletedKeys    []string        `json:"deleted_keys"`    // the Redis keys the action deleted
	PreviousRecord json.RawMessage `json:"previous_record"` // the :response record before the action, or null
}

// ParseAuditEvent decodes and checks an audit event; the error lists every problem.
func ParseAuditEvent(data []byte) (*AuditEvent, error) {
	var a AuditEvent
	if err := json.Unmarshal(data, &a); err != nil {
		return nil, fmt.Errorf("bad JSON: %w", err)
	}
	var errs []error
	if id, err := uuid.Parse(a.UUID); err != nil || id == uuid.Nil || len(a.UUID) != 36 {
		errs = append(errs, errors.New("uuid: not a UUID"))
	}
	if a.Action != AuditActionReset {
		errs = append(errs, fmt.Errorf("action: unknown %s", quoteForError(a.Action)))
	}
	if a.At.IsZero() {
		errs = append(errs, errors.New("at: required"))
	}
	if len(a.IdentityHash) != 64 {
		errs = append(errs, errors.New("identity_hash: want 64 hex characters"))
	}
	if a.Actor == "" {
		errs = append(errs, errors.New("actor: required"))
	}
	if a.Reason == "" {
		errs = append(errs, errors.New("reason: required"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	a.At = a.At.UTC()
	return &a, nil
}
