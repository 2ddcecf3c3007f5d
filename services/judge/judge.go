// Package judge is the judge service: for every gates.done it asks its provider for a
// blind verdict and publishes verdict.emitted. It reads artifacts by digest and sees slots
// A and B only; it never learns roles, paths or diffs because no event it reads has them.
package judge

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	pj "github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Service judges gated jobs.
type Service struct {
	store    blob.Store
	provider pj.Provider
	cache    jetstream.KeyValue
	instance string
	params   pj.Params
	log      *slog.Logger
}

// Config configures the judge service.
type Config struct {
	// Provider answers every judge call; hold it to shared rate limits by wrapping it
	// with pkg/judge.Limited (app.Start does, for judges and renderers alike).
	Provider pj.Provider
	// Cache, when set, is the judge-call cache shared by every judge instance: an
	// unchanged comparison is answered from it without calling the provider.
	Cache jetstream.KeyValue
	// Instance names this process in every verdict.
	Instance string
	Params   pj.Params
	Logger   *slog.Logger
}

// New builds the judge service.
func New(store blob.Store, cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Service{store: store, provider: cfg.Provider, cache: cfg.Cache, instance: cfg.Instance, params: cfg.Params,
		log: cfg.Logger.With("service", bus.Judge, "instance", cfg.Instance)}
}

// Handle implements bus.Handler.
func (s *Service) Handle(ctx context.Context, ev events.Event) ([]events.Event, error) {
	gd, ok := ev.Payload.(*events.GatesDone)
	if !ok {
		return nil, bus.Permanent(fmt.Errorf("judge got %s", ev.Type))
	}
	ctx = pj.WithTenant(ctx, ev.Tenant)
	var extra *events.VerdictEmitted
	var err error
	switch gd.Kind {
	case events.KindAB:
	case events.KindCritic:
		extra, err = s.handleCritic(ctx, ev, gd)
	case events.KindEquivalence:
		extra, err = s.handleEquivalence(ctx, ev, gd)
	case events.KindRubric:
		extra, err = s.handleRubric(ctx, ev, gd)
	default:
		return nil, bus.Permanent(fmt.Errorf("judge kind %q is not served by this judge", gd.Kind))
	}
	if err != nil {
		return nil, err
	}
	if extra != nil {
		return []events.Event{events.New(extra, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
	}
	slots := map[string]pj.Material{}
	for _, sl := range gd.Slots {
		data, _, err := blob.ReadAll(ctx, s.store, blob.Ref{Tenant: ev.Tenant, SHA256: sl.Artifact.Blob.SHA256})
		if err != nil {
			return nil, fmt.Errorf("read slot %s: %w", sl.Name, err)
		}
		slots[sl.Name] = pj.Material{Class: sl.Artifact.Class, MediaType: sl.Artifact.Blob.MediaType, Data: data}
	}
	models := gd.Judges
	if len(models) == 0 {
		models = []string{""}
	}
	orders := []string{"AB"}
	if gd.Positions == "swap" {
		orders = append(orders, "BA")
	}
	var votes []events.Vote
	for _, model := range models {
		for _, order := range orders {
			in := pj.ABInput{Key: ev.JobID, Criterion: gd.Criterion, A: slots["A"], B: slots["B"]}
			if order == "BA" {
				in.A, in.B = in.B, in.A
			}
			v, err := s.vote(ctx, model, order, in, gd.Slots)
			if err != nil {
				return nil, err
			}
			votes = append(votes, v)
			telemetry.JudgeCall(gd.Kind, v.Judge, v.Status)
		}
	}
	out := &events.VerdictEmitted{Kind: gd.Kind, Votes: votes}
	return []events.Event{events.New(out, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, "", &ev.Envelope)}, nil
}

func (s *Service) vote(ctx context.Context, model, order string, in pj.ABInput, slots []events.Slot) (events.Vote, error) {
	if model == "" {
		model = s.provider.DefaultModel()
	}
	key := s.cacheKey(model, order, in.Criterion, slots)
	if v, ok := s.cached(ctx, key); ok {
		v.Judge.Cached = true
		v.Judge.Instance = s.instance
		return v, nil
	}
	v := pj.JudgeAB(ctx, s.provider, model, s.instance, in, s.params)
	if ctx.Err() != nil {
		// Shutting down: hand the message back rather than record an outage.
		return events.Vote{}, ctx.Err()
	}
	v.Order = order
	if v.Status == "ok" && s.cache != nil {
		if data, err := json.Marshal(v); err == nil {
			if _, err := s.cache.Put(ctx, key, data); err != nil {
				s.log.WarnContext(ctx, "judge cache write failed", "err", err)
			}
		}
	}
	return v, nil
}

func (s *Service) cached(ctx context.Context, key string) (events.Vote, bool) {
	if s.cache == nil {
		return events.Vote{}, false
	}
	e, err := s.cache.Get(ctx, key)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			s.log.WarnContext(ctx, "judge cache read failed", "err", err)
		}
		return events.Vote{}, false
	}
	var v events.Vote
	if err := json.Unmarshal(e.Value(), &v); err != nil {
		return events.Vote{}, false
	}
	return v, true
}

// cacheKey covers everything that can change an answer: provider, model, prompt
// template, sampling parameters, the criterion, both artifacts and their order.
func (s *Service) cacheKey(model, order, criterion string, slots []events.Slot) string {
	h := sha256.New()
	write := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	write("ab", s.provider.Name(), model, pj.ABPromptHash(), order, criterion)
	for _, sl := range slots {
		write(sl.Name, sl.Artifact.Blob.SHA256, sl.Artifact.Blob.MediaType)
	}
	write(s.paramsKey())
	return "ab." + hex.EncodeToString(h.Sum(nil))
}

// paramsKey renders the sampling parameters for cache keys.
func (s *Service) paramsKey() string {
	k := "m" + strconv.Itoa(s.params.MaxTokens)
	if s.params.Temperature != nil {
		k += ",t" + strconv.FormatFloat(float64(*s.params.Temperature), 'g', -1, 32)
	}
	if s.params.Seed != nil {
		k += ",s" + strconv.Itoa(*s.params.Seed)
	}
	return k
}
