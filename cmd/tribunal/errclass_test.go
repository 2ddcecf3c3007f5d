package main

import (
	"errors"
	"fmt"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/rerun"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bounds"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/fielderr"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/ingress/body"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/netguard"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

// TestErrorTaxonomy (issue 25, item 5): the sentinels callers act on are each of one of
// errclass's five classes, through any wrapping, and keep the message they had; a field
// error is refused input whatever its sentinel.
func TestErrorTaxonomy(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		err   error
		class error
	}{
		{events.ErrMalformed, errclass.Refused}, {events.ErrUnknownVersion, errclass.Refused},
		{events.ErrUnknownType, errclass.Refused}, {events.ErrMissingField, errclass.Refused},
		{events.ErrInvalidField, errclass.Refused}, {bounds.ErrExceeded, errclass.Refused},
		{kind.ErrRefused, errclass.Refused}, {kind.ErrNotForKind, errclass.Refused},
		{sensor.ErrRefused, errclass.Refused}, {netguard.ErrForbidden, errclass.Refused},
		{blob.ErrDigestMismatch, errclass.Refused}, {blob.ErrTooLarge, errclass.Refused},
		{blob.ErrInvalidRef, errclass.Refused}, {bus.ErrPayloadTooLarge, errclass.Refused},
		{judge.ErrSchemaViolation, errclass.Refused}, {judge.ErrBudgetExhausted, errclass.Refused},
		{body.ErrMediaType, errclass.Refused}, {ingress.ErrQuota, errclass.Refused},
		{strictjson.ErrNotObject, errclass.Refused}, {ab.ErrNoArtifacts, errclass.Refused},
		{ab.ErrVerifyMap, errclass.Refused}, {critic.ErrMissingInput, errclass.Refused},
		{judge.ErrUnavailable, errclass.Unavailable}, {web.ErrNoBrowser, errclass.Unavailable},
		{command.ErrGatesBlocked, errclass.Unavailable}, {sensor.ErrNoSensor, errclass.Unavailable},
		{diskspace.ErrNoSpace, errclass.Unavailable}, {blob.ErrUsageUnknown, errclass.Unavailable},
		{client.ErrNotComplete, errclass.Unavailable},
		{bus.ErrDuplicateMismatch, errclass.Conflict}, {external.ErrAnswered, errclass.Conflict},
		{blob.ErrNotFound, errclass.NotFound}, {records.ErrNotRecorded, errclass.NotFound},
		{client.ErrNotFound, errclass.NotFound}, {rerun.ErrUnknown, errclass.NotFound},
		{records.ErrCorrupt, errclass.Internal},
		{&fielderr.Error{Doc: "critic", Field: "slop", Reason: "want 0 to 10"}, errclass.Refused},
		// The refusals that are types rather than sentinels are Refused too.
		{&rulebook.Refusal{Reason: rulebook.RefusedType, Err: errors.New("no")}, errclass.Refused},
		{&budget.Refusal{Unpriced: "m"}, errclass.Refused}, {&spend.Refusal{Reason: spend.ReasonModel}, errclass.Refused},
		{&client.RefusedError{Batch: "b.yaml", Problems: []string{"no"}}, errclass.Refused},
	} {
		wrapped := fmt.Errorf("context: %w", c.err)
		if got := errclass.Of(wrapped); got != c.class || !errors.Is(wrapped, c.err) {
			t.Errorf("%q is %v, want %v", c.err, got, c.class)
		}
	}
}
