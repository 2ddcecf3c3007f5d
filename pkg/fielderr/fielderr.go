// Package fielderr is tribunal's one error for a field that could not be accepted, in an
// event, a judge's answer, a runner's transcript or a verdict. Every reader of such a
// document reports problems with it, naming the document and the field, so the repair
// re-ask can tell a model exactly what to fix and an operator can tell which part of a
// prompt, a model or a service drifted.
package fielderr

import (
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// Error is one field that could not be accepted.
type Error struct {
	// Doc names the document the field belongs to: "critic", "ab verdict",
	// "render.requested", ...
	Doc string
	// Field is the dotted path of the field ("envelope.tenant",
	// "dimensions.layout_spacing.score", "efficiency_signal.original_directness").
	Field string
	// Value is the offending value as text, "" when the field is missing.
	Value string
	// Reason says what the field must be.
	Reason string
	// Err, when set, is a sentinel callers branch on with errors.Is.
	Err error
}

// Error implements error: "<doc>: field <field>[ = <value>][: <err>][: <reason>]".
func (e *Error) Error() string {
	var b strings.Builder
	doc := e.Doc
	if doc == "" {
		doc = "document"
	}
	b.WriteString(doc)
	b.WriteString(": field ")
	b.WriteString(e.Field)
	if e.Value != "" {
		b.WriteString(" = ")
		b.WriteString(e.Value)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Unwrap returns the sentinel, if any.
func (e *Error) Unwrap() error { return e.Err }

// Is makes every field error of class errclass.Refused: a field that could not be
// accepted is refused input, whatever its sentinel.
func (e *Error) Is(target error) bool { return target == errclass.Refused }
