package events

import (
	"errors"
	"fmt"
)

var (
	// ErrMalformed marks bytes that are not a decodable event.
	ErrMalformed = errors.New("malformed event")
	// ErrUnknownVersion marks an event written with a schema version this build cannot read.
	ErrUnknownVersion = errors.New("unknown event schema version")
	// ErrUnknownType marks an event type this build does not know.
	ErrUnknownType = errors.New("unknown event type")
	// ErrMissingField marks a required field that is absent or empty.
	ErrMissingField = errors.New("missing required field")
	// ErrInvalidField marks a field whose value is out of its domain.
	ErrInvalidField = errors.New("invalid field")
)

// FieldError names the field of an event that could not be accepted. It wraps one of the
// sentinel errors above so callers can branch with errors.Is.
type FieldError struct {
	// Type is the event type, when known.
	Type Type
	// Field is the dotted path of the offending field ("envelope.tenant", "ab.ours").
	Field  string
	Reason string
	Err    error
}

func (e *FieldError) Error() string {
	prefix := "event"
	if e.Type != "" {
		prefix = string(e.Type)
	}
	if e.Reason == "" {
		return fmt.Sprintf("%s: field %s: %v", prefix, e.Field, e.Err)
	}
	return fmt.Sprintf("%s: field %s: %v: %s", prefix, e.Field, e.Err, e.Reason)
}

func (e *FieldError) Unwrap() error { return e.Err }

func missing(field string) error {
	return &FieldError{Field: field, Err: ErrMissingField}
}

func invalid(field, reason string) error {
	return &FieldError{Field: field, Reason: reason, Err: ErrInvalidField}
}

// withType stamps the event type onto a *FieldError produced by a payload validator.
func withType(t Type, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) && fe.Type == "" {
		fe.Type = t
	}
	return err
}
