package judge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/critic"
	"github.com/tribunal-dev/tribunal/pkg/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// handleCritic scores one output against its task.
func (s *Service) handleCritic(ctx context.Context, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	data, _, err := blob.ReadAll(ctx, s.store, blob.Ref{Tenant: ev.Tenant, SHA256: gd.Slots[0].Artifact.Blob.SHA256})
	if err != nil {
		return nil, fmt.Errorf("read output: %w", err)
	}
	in := pj.CriticInput{Key: ev.JobID, Task: gd.Criterion, Output: string(data)}
	model := s.model(gd)
	key := s.answerKey("critic", model, pj.CriticPromptHash(), gd.Criterion, gd.Slots[0].Artifact.Blob.SHA256)
	var o pj.Outcome[critic.Answer]
	cached := s.cachedAnswer(ctx, key, &o)
	if !cached {
		o = pj.JudgeCritic(ctx, s.provider, model, s.instance, in, s.params)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		s.storeAnswer(ctx, key, o.Status, o)
	}
	v := &events.CriticVote{Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw}
	v.Judge.Instance, v.Judge.Cached = s.instance, cached
	telemetry.JudgeCall(events.KindCritic, v.Judge, v.Status)
	if o.Status == "ok" {
		v.Correctness, v.Slop, v.Scope, v.Rationale = o.Answer.Correctness, o.Answer.Slop, o.Answer.Scope, o.Answer.Rationale
		v.ClaimedVerdict, v.ClaimedQuality = o.Answer.Verdict, o.Answer.Quality
	}
	return &events.VerdictEmitted{Kind: events.KindCritic, Critic: v}, nil
}

// handleEquivalence compares the two transcripts of every case.
func (s *Service) handleEquivalence(ctx context.Context, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error) {
	model := s.model(gd)
	out := &events.VerdictEmitted{Kind: events.KindEquivalence}
	for _, c := range gd.Cases {
		orig, err := s.transcript(ctx, ev.Tenant, c.Original)
		if err != nil {
			return nil, fmt.Errorf("case %s original transcript: %w", c.CaseID, err)
		}
		cand, err := s.transcript(ctx, ev.Tenant, c.Candidate)
		if err != nil {
			return nil, fmt.Errorf("case %s candidate transcript: %w", c.CaseID, err)
		}
		key := s.answerKey("equivalence", model, pj.EquivalencePromptHash(), c.Input, c.Original.Blob.SHA256, c.Candidate.Blob.SHA256)
		var o pj.Outcome[equivalence.Answer]
		cached := s.cachedAnswer(ctx, key, &o)
		if !cached {
			o = pj.JudgeEquivalence(ctx, s.provider, model, s.instance, pj.EquivalenceInput{
				Key: ev.JobID + "/" + c.CaseID, CaseInput: c.Input, Original: orig, Candidate: cand,
			}, s.params)
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			s.storeAnswer(ctx, key, o.Status, o)
		}
		origBlob, candBlob := c.Original.Blob, c.Candidate.Blob
		v := events.CaseVote{CaseID: c.CaseID, Judge: o.Usage.JudgeInfo(), Status: o.Status, Error: o.Error, Raw: o.Raw, Original: &origBlob, Candidate: &candBlob}
		v.Judge.Instance, v.Judge.Cached = s.instance, cached
		telemetry.JudgeCall(events.KindEquivalence, v.Judge, v.Status)
		if o.Status == "ok" {
			v.Verdict, v.BehaviourDelta = o.Answer.Verdict, o.Answer.BehaviourDelta
			e := o.Answer.EfficiencySignal
			v.Efficiency = events.EfficiencySignal{OriginalDirectness: e.OriginalDirectness, CandidateDirectness: e.CandidateDirectness, InterpretationNotes: e.InterpretationNotes}
		}
		out.Cases = append(out.Cases, v)
	}
	return out, nil
}

func (s *Service) transcript(ctx context.Context, tenant string, a events.Artifact) (equivalence.Transcript, error) {
	data, _, err := blob.ReadAll(ctx, s.store, blob.Ref{Tenant: tenant, SHA256: a.Blob.SHA256})
	if err != nil {
		return equivalence.Transcript{}, err
	}
	return equivalence.ParseRunnerOutput(data)
}

func (s *Service) model(gd *events.GatesDone) string {
	if len(gd.Judges) > 0 && gd.Judges[0] != "" {
		return gd.Judges[0]
	}
	return s.provider.DefaultModel()
}

// answerKey is the judge-call cache key of a non-ab answer: everything that can change it.
func (s *Service) answerKey(kind, model, promptHash string, parts ...string) string {
	h := sha256.New()
	for _, p := range append([]string{kind, s.provider.Name(), model, promptHash, s.paramsKey()}, parts...) {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return kind + "." + hex.EncodeToString(h.Sum(nil))
}

func (s *Service) cachedAnswer(ctx context.Context, key string, into any) bool {
	if s.cache == nil {
		return false
	}
	e, err := s.cache.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			s.log.WarnContext(ctx, "judge cache read failed", "err", err)
		}
		return false
	}
	return json.Unmarshal(e.Value(), into) == nil
}

// storeAnswer caches valid answers only: an outage or a schema violation is worth
// asking again next time.
func (s *Service) storeAnswer(ctx context.Context, key, status string, v any) {
	if s.cache == nil || status != "ok" {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	if _, err := s.cache.Put(ctx, key, data); err != nil {
		s.log.WarnContext(ctx, "judge cache write failed", "err", err)
	}
}
