// Package renderer is the renderer service: it turns render.requested into render.done by
// running the job's sensor and storing what it produced in blob storage. For `ab` jobs the
// sensor is static: both artifacts are ingested by the same rules (package ingest).
package renderer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingest"
)

// Service renders jobs.
type Service struct {
	store   blob.Store
	fetcher *ingest.Fetcher
	runner  Runner
	sensors *Sensors
	log     *slog.Logger
}

// Runner is the equivalence sensor: it applies both documents of a job to every case
// and stores the transcripts. A blocked reason says why it could not (a document that
// is missing or not text); an error is an infrastructure failure worth a retry.
type Runner interface {
	Run(ctx context.Context, ev events.Event, spec *events.EquivalenceSpec) ([]events.Transcript, string, error)
}

// WithRunner sets the equivalence runner.
func (s *Service) WithRunner(r Runner) *Service {
	s.runner = r
	return s
}

// New builds the renderer.
func New(store blob.Store, fetch ingest.FetchOptions, log *slog.Logger) *Service {
	if log == nil {
		log = slog.Default()
	}
	return &Service{store: store, fetcher: ingest.NewFetcher(fetch), log: log.With("service", bus.Renderer)}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	req, ok := ev.Payload.(*events.RenderRequested)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("renderer got %s", ev.Type))
	}
	done := &events.RenderDone{Spec: req.Spec}
	if req.Spec.Problem != "" {
		// The AC's entry is at fault, not one of its artifacts: its reason as it is.
		done.Blocked = req.Spec.Problem
		s.log.InfoContext(ctx, "render blocked", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", done.Blocked)
		return []events.Event{events.New(done, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
	}
	switch req.Spec.Kind {
	case events.KindAB:
		arts, blocked, err := s.renderAB(ctx, ev.Tenant, req.Spec.AB)
		if err != nil {
			return nil, err
		}
		done.Artifacts, done.Blocked = arts, blocked
	case events.KindCritic:
		if strings.TrimSpace(req.Spec.Critic.Task) == "" {
			done.Blocked = "missing input"
			break
		}
		a, blocked, err := s.ingest(ctx, ev.Tenant, req.Spec.Critic.Output)
		if err != nil {
			return nil, fmt.Errorf("ingest critic output %q: %w", req.Spec.Critic.Output.Name, err)
		}
		if blocked != "" {
			done.Blocked = blocked
			if blocked != "missing input" {
				done.Blocked = fmt.Sprintf("output %q: %s", req.Spec.Critic.Output.Name, blocked)
			}
			break
		}
		done.Artifacts = map[string]events.Artifact{"output": a}
	case events.KindRubric:
		if err := s.renderRubric(ctx, ev, req.Spec.Rubric, done); err != nil {
			return nil, err
		}
	case events.KindEquivalence:
		if s.runner == nil {
			done.Blocked = "no runner configured for equivalence jobs"
			break
		}
		ts, blocked, err := s.runner.Run(ctx, ev, req.Spec.Equivalence)
		if err != nil {
			return nil, err
		}
		done.Transcripts, done.Blocked = ts, blocked
	default:
		done.Blocked = fmt.Sprintf("no sensor for judge kind %q", req.Spec.Kind)
	}
	if done.Blocked != "" {
		s.log.InfoContext(ctx, "render blocked", "tenant", ev.Tenant, "batch", ev.BatchID, "job", ev.JobID, "reason", done.Blocked)
	}
	return []events.Event{events.New(done, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}

// renderAB ingests both sides with the same rules. The first blocked side blocks the job;
// both reasons are reported when both sides are blocked.
func (s *Service) renderAB(ctx context.Context, tenant string, spec *events.ABSpec) (map[string]events.Artifact, string, error) {
	arts := map[string]events.Artifact{}
	var reasons []string
	for _, side := range []struct {
		role string
		src  events.Source
	}{{"ours", spec.Ours}, {"reference", spec.Reference}} {
		a, blocked, err := s.ingest(ctx, tenant, side.src)
		if err != nil {
			return nil, "", fmt.Errorf("ingest %s artifact %q: %w", side.role, side.src.Name, err)
		}
		if blocked != "" {
			reasons = append(reasons, fmt.Sprintf("%s artifact %q: %s", side.role, side.src.Name, blocked))
			continue
		}
		arts[side.role] = a
	}
	if len(reasons) > 0 {
		return nil, joinReasons(reasons), nil
	}
	return arts, "", nil
}

// ingest returns the artifact, or a blocked reason when the artifact is at fault, or an
// error when the infrastructure is (a storage outage is retried, never blamed on the AC).
func (s *Service) ingest(ctx context.Context, tenant string, src events.Source) (events.Artifact, string, error) {
	switch {
	case src.Error != "":
		return events.Artifact{}, src.Error, nil
	case src.Blob != nil:
		ref := blob.Ref{Tenant: tenant, SHA256: src.Blob.SHA256}
		data, attrs, err := blob.ReadAll(ctx, s.store, ref)
		if errors.Is(err, blob.ErrNotFound) {
			return events.Artifact{}, "missing artifact: not in blob storage", nil
		}
		if errors.Is(err, blob.ErrDigestMismatch) {
			return events.Artifact{}, "unreadable artifact: stored bytes do not match their digest", nil
		}
		if err != nil {
			return events.Artifact{}, "", err
		}
		r := ingest.Classify(src.Name, data, attrs.MediaType)
		if r.Blocked != "" {
			return events.Artifact{}, r.Blocked, nil
		}
		return events.Artifact{Blob: events.Blob{SHA256: ref.SHA256, MediaType: r.MediaType, Size: attrs.Size}, Class: r.Class}, "", nil
	case src.URL != "":
		f, err := s.fetcher.Fetch(ctx, src.URL)
		if err != nil {
			return events.Artifact{}, "", err
		}
		if f.Blocked != "" {
			return events.Artifact{}, f.Blocked, nil
		}
		attrs, err := blob.PutBytes(ctx, s.store, tenant, f.Data, f.MediaType)
		if err != nil {
			return events.Artifact{}, "", fmt.Errorf("store fetched %s: %w", src.URL, err)
		}
		return events.Artifact{Blob: events.Blob{SHA256: attrs.Ref.SHA256, MediaType: f.MediaType, Size: attrs.Size}, Class: f.Class}, "", nil
	}
	return events.Artifact{}, "missing artifact", nil
}

func joinReasons(r []string) string {
	out := r[0]
	for _, x := range r[1:] {
		out += "; " + x
	}
	return out
}
