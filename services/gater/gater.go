// Package gater is the gater service: deterministic gates over rendered artifacts, and for
// `ab` the blinding step. A job whose gates pass goes to the judges as gates.done with its
// artifacts in slots A and B and no role labels; anything else goes to the aggregator as
// gates.failed and never reaches a judge.
package gater

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service gates rendered jobs.
type Service struct {
	store    blob.Store
	views    jetstream.KeyValue
	adapters *GatesAdapters
	log      *slog.Logger
}

// New builds the gater.
func New(store blob.Store, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{store: store, log: log.With("service", bus.Gater)}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	rd, ok := ev.Payload.(*events.RenderDone)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("gater got %s", ev.Type))
	}
	out := func(p events.Payload) []events.Event {
		telemetry.GateFailures(p)
		return []events.Event{events.New(p, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}
	}
	if rd.Blocked != "" {
		return out(&events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Blocked: rd.Blocked}), nil
	}
	switch rd.Spec.Kind {
	case events.KindAB:
		gates, err := s.artifactGates(ctx, ev.Tenant, rd.Artifacts, []string{"ours", "reference"})
		if err != nil {
			return nil, err
		}
		if !AllGreen(gates) {
			return out(&events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Gates: gates}), nil
		}
		assign := ab.Assign(rd.Spec.ACID, ev.Iteration)
		slot := func(r ab.Role) events.Artifact { return rd.Artifacts[string(r)] }
		return out(&events.GatesDone{
			Kind:      events.KindAB,
			Criterion: rd.Spec.Criterion,
			Gates:     blind(gates),
			Slots:     []events.Slot{{Name: "A", Artifact: slot(assign.A)}, {Name: "B", Artifact: slot(assign.B)}},
			Positions: rd.Spec.AB.Positions,
			Judges:    rd.Spec.AB.Judges,
		}), nil
	case events.KindCritic:
		gates, err := s.artifactGates(ctx, ev.Tenant, rd.Artifacts, []string{"output"})
		if err != nil {
			return nil, err
		}
		if !AllGreen(gates) {
			return out(&events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Gates: gates}), nil
		}
		return out(&events.GatesDone{Kind: events.KindCritic, Criterion: rd.Spec.Critic.Task, Gates: blind(gates),
			Slots: []events.Slot{{Name: "output", Artifact: rd.Artifacts["output"]}}}), nil
	case events.KindRubric:
		p, err := s.gateRubric(ctx, ev, rd)
		if err != nil {
			return nil, err
		}
		return out(p), nil
	case events.KindEquivalence:
		pairs, gates, err := s.transcriptGates(ctx, ev.Tenant, rd.Spec.Equivalence, rd.Transcripts)
		if err != nil {
			return nil, err
		}
		if !AllGreen(gates) {
			return out(&events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Gates: gates}), nil
		}
		return out(&events.GatesDone{Kind: events.KindEquivalence, Gates: blind(gates), Cases: pairs}), nil
	}
	return out(&events.GatesFailed{Kind: rd.Spec.Kind, ACID: rd.Spec.ACID, Blocked: fmt.Sprintf("no gates for judge kind %q", rd.Spec.Kind)}), nil
}

// transcriptGates checks that every case has both transcripts, readable and intact, and
// pairs them for the judge.
func (s *Service) transcriptGates(ctx context.Context, tenant string, spec *events.EquivalenceSpec, ts []events.Transcript) ([]events.CasePair, []events.Gate, error) {
	bySide := map[string]events.Transcript{}
	for _, t := range ts {
		bySide[t.Side+"/"+t.CaseID] = t
	}
	var pairs []events.CasePair
	var gates []events.Gate
	for _, c := range spec.Cases {
		pair := events.CasePair{CaseID: c.ID, Tag: c.Tag, Input: c.Input}
		for _, side := range []string{"original", "candidate"} {
			t, ok := bySide[side+"/"+c.ID]
			g, err := s.readableGate(ctx, tenant, "transcript_readable:"+side+"/"+c.ID, t.Blob.SHA256, ok)
			if err != nil {
				return nil, nil, err
			}
			gates = append(gates, g)
			if !ok {
				continue
			}
			a := events.Artifact{Blob: t.Blob, Class: "text"}
			if side == "original" {
				pair.Original = a
			} else {
				pair.Candidate = a
			}
		}
		pairs = append(pairs, pair)
	}
	return pairs, gates, nil
}

// readableGate reads one rendered artifact back in full: the store verifies the digest on
// read, so a pass means the judge will get exactly the bytes that were rendered. present is
// false when the render did not produce the artifact at all. Only an infrastructure error
// (storage unreachable) is returned, so the message is retried instead of failing the job.
func (s *Service) readableGate(ctx context.Context, tenant, name, sha string, present bool) (events.Gate, error) {
	g := events.Gate{Name: name, Status: "pass"}
	if !present {
		g.Status, g.Detail = "fail", "missing from render"
		return g, nil
	}
	rc, _, err := s.store.Open(ctx, blob.Ref{Tenant: tenant, SHA256: sha})
	if err == nil {
		_, err = discard(rc)
	}
	switch {
	case err == nil:
	case errors.Is(err, blob.ErrNotFound):
		g.Status, g.Detail = "fail", "not in blob storage"
	case errors.Is(err, blob.ErrDigestMismatch):
		g.Status, g.Detail = "fail", "stored bytes do not match their digest"
	default:
		return g, fmt.Errorf("gate %s: %w", name, err)
	}
	return g, nil
}

// artifactGates checks that every artifact exists and still hashes to its digest: a judge
// must never be handed bytes that are not the ones rendered.
func (s *Service) artifactGates(ctx context.Context, tenant string, arts map[string]events.Artifact, roles []string) ([]events.Gate, error) {
	var gates []events.Gate
	for _, role := range roles {
		a, ok := arts[role]
		g, err := s.readableGate(ctx, tenant, "artifact_readable:"+role, a.Blob.SHA256, ok)
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
		if g.Status == "fail" {
			return false
		}
	}
	return true
}

// blind renames per-role gates so the judge-facing event names no role: the judge only
// learns that every artifact passed.
func blind(gates []events.Gate) []events.Gate {
	n := 0
	for _, g := range gates {
		if g.Status == "pass" {
			n++
		}
	}
	return []events.Gate{{Name: "artifacts_readable", Status: "pass", Detail: fmt.Sprintf("%d/%d", n, len(gates))}}
}
