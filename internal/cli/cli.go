// Package cli holds what tribunal's commands share with the commands a kind supplies
// (stage.Commanding): the exit status an error carries and the JSON a command prints. It
// stands on the foundation layer, below the kinds' stages, so that a kind's commands and
// cmd/tribunal's use the one definition rather than copies.
package cli

import (
	"encoding/json"
	"fmt"
	"io"
)

// ExitError carries a process exit code through cobra: cmd/tribunal exits with Code,
// printing Err first when there is one.
type ExitError struct {
	Code int
	Err  error
}

// Exit is an ExitError of code and err (nil when the code is the whole message, as a
// failed check's 1 after its report).
func Exit(code int, err error) ExitError { return ExitError{Code: code, Err: err} }

func (e ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit %d", e.Code)
	}
	return e.Err.Error()
}

// Unwrap is the error the exit code carries.
func (e ExitError) Unwrap() error { return e.Err }

// WriteJSON writes v as indented JSON, the form every --json output takes.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
