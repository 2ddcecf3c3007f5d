// Package errclass is tribunal's one taxonomy of errors: every error a package returns
// for a caller to act on is of one of five classes, which say what the caller can do
// about it, whatever the package.
//
//   - Refused: the input is not acceptable and never will be (a malformed event, a field
//     out of its domain, an answer that breaks its schema, a blob over its size); a
//     *fielderr.Error is Refused and names the document and the field. Retrying the same
//     input cannot succeed: it goes to dead letters, blocks its AC or is answered 4xx.
//   - Unavailable: a dependency could not answer now (a judge provider, a browser, the
//     disk, a result not complete yet); the same call may succeed later.
//   - Conflict: another writer got there first (a compare-and-set lost, an id already
//     used for something else); re-read and decide again.
//   - NotFound: what was asked for does not exist (a blob, a job record, a rerun key).
//   - Internal: tribunal's own state is inconsistent (a corrupt record); a bug to report.
//
// A package's sentinels keep their own names and messages, so errors.Is against them
// works as before; New makes them of a class, which errors.Is against the class reports,
// and Of names the class of any error.
package errclass

import "errors"

// The five classes. Compare with errors.Is; Of returns one of them.
var (
	Refused     = errors.New("refused")
	Unavailable = errors.New("unavailable")
	Conflict    = errors.New("conflict")
	NotFound    = errors.New("not found")
	Internal    = errors.New("internal")
)

// classes are the five in the order Of tries them.
var classes = []error{Refused, Unavailable, Conflict, NotFound, Internal}

// New is a sentinel error with message msg of class c: its Error is msg alone, and
// errors.Is reports it as itself and as c.
func New(c error, msg string) error { return &classed{class: c, msg: msg} }

type classed struct {
	class error
	msg   string
}

func (e *classed) Error() string { return e.msg }

// Is reports the error's class as a match.
func (e *classed) Is(target error) bool { return target == e.class }

// Of is the class of err: the first class errors.Is finds in its chain, Internal for an
// error of none (an unclassified error is a bug until it is given one), nil for nil.
func Of(err error) error {
	if err == nil {
		return nil
	}
	for _, c := range classes {
		if errors.Is(err, c) {
			return c
		}
	}
	return Internal
}
