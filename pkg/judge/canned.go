package judge

import (
	"fmt"
	"sync/atomic"
)

// Canned answers. The offline judge (pkg/judge/scripted) answers without a model, from
// canned answers each kind makes for its own requests (kind.Scripted). The registry of
// kinds (pkg/registry) hands them to this package when the program starts (SetCanned), so
// the offline judge finds them without importing any kind, and a kind added later is
// answered with no change to it.

// Canned is the canned answer a fixture setting stands for to requests of kind req (a
// kind's name, or another request its stages make), checked by the kind that makes
// them, and the name the fixture goes by; ok is false when no kind makes such requests.
type Canned func(req, setting string) (answer []byte, name string, ok bool, err error)

var canned atomic.Pointer[Canned]

// SetCanned sets where the offline judge finds canned answers. pkg/registry calls it when
// the program starts; nothing else should.
func SetCanned(c Canned) { canned.Store(&c) }

// CannedAnswer is the canned answer of setting to requests of kind req, and its name.
func CannedAnswer(req, setting string) ([]byte, string, error) {
	if c := canned.Load(); c != nil {
		if answer, name, ok, err := (*c)(req, setting); ok {
			return answer, name, err
		}
	}
	return nil, "", fmt.Errorf("no registered kind makes %s requests", req)
}
