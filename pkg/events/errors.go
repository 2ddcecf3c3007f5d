package events

import (
	"errors"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/fielderr"
)

var (
	// ErrMalformed marks bytes that are not a decodable event.
	ErrMalformed = errclass.New(errclass.Refused, "malformed event")
	// ErrUnknownVersion marks an event written with a schema version this build cannot read.
	ErrUnknownVersion = errclass.New(errclass.Refused, "unknown event schema version")
	// ErrUnknownType marks an event type this build does not know.
	ErrUnknownType = errclass.New(errclass.Refused, "unknown event type")
	// ErrMissingField marks a required field that is absent or empty.
	ErrMissingField = errclass.New(errclass.Refused, "missing required field")
	// ErrInvalidField marks a field whose value is out of its domain.
	ErrInvalidField = errclass.New(errclass.Refused, "invalid field")
)

// FieldError names the field of an event that could not be accepted (fielderr.Error with
// the event type as its document). It wraps one of the sentinel errors above so callers
// can branch with errors.Is.
type FieldError = fielderr.Error

// docEvent is the document of a field error before its event type is known.
const docEvent = "event"

func missing(field string) error {
	return &FieldError{Doc: docEvent, Field: field, Err: ErrMissingField}
}

func invalid(field, reason string) error {
	return &FieldError{Doc: docEvent, Field: field, Reason: reason, Err: ErrInvalidField}
}

// withType stamps the event type onto a *FieldError produced by a payload validator.
func withType(t Type, err error) error {
	var fe *FieldError
	if errors.As(err, &fe) && (fe.Doc == "" || fe.Doc == docEvent) && t != "" {
		fe.Doc = string(t)
	}
	return err
}

// docOf is the document of a field error of an event of type t.
func docOf(t Type) string {
	if t == "" {
		return docEvent
	}
	return string(t)
}
