package stage

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// ReadableGate reads one rendered artifact back in full: the store verifies the digest on
// read, so a pass means the judge will get exactly the bytes that were rendered. present is
// false when the render did not produce the artifact at all. Only an infrastructure error
// (storage unreachable) is returned, so the message is retried instead of failing the job.
func ReadableGate(ctx context.Context, store blob.Store, tenant, name, sha string, present bool) (events.Gate, error) {
	g := events.Gate{Name: name, Status: events.GatePass}
	if !present {
		g.Status, g.Detail = events.GateFail, "missing from render"
		return g, nil
	}
	rc, _, err := store.Open(ctx, blob.Ref{Tenant: tenant, SHA256: sha})
	if err == nil {
		_, err = io.Copy(io.Discard, rc)
		rc.Close()
	}
	switch {
	case err == nil:
	case errors.Is(err, blob.ErrNotFound):
		g.Status, g.Detail = events.GateFail, "not in blob storage"
	case errors.Is(err, blob.ErrDigestMismatch):
		g.Status, g.Detail = events.GateFail, "stored bytes do not match their digest"
	default:
		return g, fmt.Errorf("gate %s: %w", name, err)
	}
	return g, nil
}

// ArtifactGates checks that every artifact of roles exists and still hashes to its digest:
// a judge must never be handed bytes that are not the ones rendered.
func ArtifactGates(ctx context.Context, store blob.Store, tenant string, arts map[string]events.Artifact, roles ...string) ([]events.Gate, error) {
	var gates []events.Gate
	for _, role := range roles {
		a, ok := arts[role]
		g, err := ReadableGate(ctx, store, tenant, "artifact_readable:"+role, a.Blob.SHA256, ok)
		if err != nil {
			return nil, err
		}
		gates = append(gates, g)
	}
	return gates, nil
}

// AllGreen is derived from the gates themselves, never taken from anyone's word.
func AllGreen(gates []events.Gate) bool {
	for _, g := range gates {
		if g.Status.Failed() {
			return false
		}
	}
	return true
}

// Blind folds per-role gates into one, so the judge-facing event names no role: the judge
// only learns that every artifact passed.
func Blind(gates []events.Gate) []events.Gate {
	n := 0
	for _, g := range gates {
		if g.Status == events.GatePass {
			n++
		}
	}
	return []events.Gate{{Name: "artifacts_readable", Status: events.GatePass, Detail: fmt.Sprintf("%d/%d", n, len(gates))}}
}

// GateJob runs k's gates over a job's render, as the gater does and the audit does again:
// the kind's own gates, and then what every gated job carries whatever its kind for the
// judge: the batch's budget and judge mode, carried here once rather than by every
// kind's gate.
func GateJob(ctx context.Context, k Stages, env *GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error) {
	out, err := k.Gate(ctx, env, ev, rd)
	if gd, ok := out.(*events.GatesDone); ok && err == nil {
		gd.Budget, gd.JudgeMode, gd.Repeats = rd.Spec.Budget, rd.Spec.JudgeMode, rd.Spec.Repeats
	}
	return out, err
}
