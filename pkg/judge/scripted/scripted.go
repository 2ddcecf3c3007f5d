// Package scripted is the offline judge: recorded answers instead of a model, for tests,
// the quickstart and benchmarks. Every verdict it produces says provider "scripted".
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// Provider answers from recordings instead of a model: a fixed answer for every request
// of a kind (a kind's fixture, such as ab's fixed winner, the seed's fixture-winner test
// hook), or answers from a file keyed by AC id.
// Tests and the offline quickstart use it; every verdict it produces says
// provider "scripted", so no one mistakes it for a model's judgment.
type Provider struct {
	model   string
	fixed   map[string]string
	answers map[string]json.RawMessage
	latency time.Duration
	calls   atomic.Int64
	mu      sync.Mutex
	// byKey counts the calls of each key with a recorded answer (a list answers its
	// n-th call with its n-th entry), and of every key when Options.CountEveryKey asks:
	// a count for each of a 1,000,000-AC benchmark's keys was 55 MB of its heap.
	byKey    map[string]int
	countAll bool
}

// Options configure a scripted provider.
type Options struct {
	// AnswersFile is a JSON object mapping AC ids to the answer object the model would
	// have returned, e.g. {"AC-1": {"raw_winner": "B", "confidence": 0.8, "biggest_gap": "..."}}.
	AnswersFile string
	// Fixtures are canned answers by request kind (a kind's name, or another request its
	// stages make): the fixture setting each is answered with, as the kind that makes
	// the requests reads it (kind.Scripted; the judge's flags list each kind's,
	// kind.Fixtured): {"ab": "A"} answers every ab AC without a recorded answer with A.
	Fixtures map[string]string
	// Named is the request whose fixture's name is the model's name, with the answers
	// file's (the fixed winner of ab: scripted/fixed-A); the other fixtures name the
	// model only when nothing else does.
	Named string
	// Latency simulates a model's response time (benchmarks).
	Latency time.Duration
	// CountEveryKey keeps a count of calls for every key, answered by a fixture too,
	// for tests that ask CallsFor; otherwise only keys with a recorded answer are
	// counted.
	CountEveryKey bool
}

// New builds a scripted provider. Every canned answer comes from the kind whose requests
// it answers (judge.CannedAnswer, which the registry of kinds fills), checked by that
// kind's own parser: this package knows no kind's answer.
func New(o Options) (*Provider, error) {
	s := &Provider{latency: o.Latency, answers: map[string]json.RawMessage{}, fixed: map[string]string{}, byKey: map[string]int{}, countAll: o.CountEveryKey}
	// names make the model name every verdict carries: the named fixture (Named) and
	// the answers file; the other fixtures only name the model when nothing else does.
	var names, extras []string
	canned := func(req, setting string, naming bool) error {
		answer, name, err := judge.CannedAnswer(req, setting)
		if err != nil {
			return fmt.Errorf("scripted %s answer: %w", req, err)
		}
		s.fixed[req] = string(answer)
		if naming {
			names = append(names, name)
		} else {
			extras = append(extras, name)
		}
		return nil
	}
	for _, req := range slices.Sorted(maps.Keys(o.Fixtures)) {
		if o.Fixtures[req] == "" {
			continue
		}
		if err := canned(req, o.Fixtures[req], req == o.Named); err != nil {
			return nil, err
		}
	}
	if o.AnswersFile != "" {
		data, err := os.ReadFile(o.AnswersFile)
		if err != nil {
			return nil, fmt.Errorf("scripted answers: %w", err)
		}
		if err := json.Unmarshal(data, &s.answers); err != nil {
			return nil, fmt.Errorf("scripted answers %s: want a JSON object of AC id -> answer: %w", o.AnswersFile, err)
		}
		names = append(names, "recorded-"+filepath.Base(o.AnswersFile))
	}
	if len(names) == 0 && len(extras) > 0 {
		names = []string{"fixtures"}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("scripted provider needs a fixed winner or an answers file (or another fixed answer)")
	}
	s.model = strings.Join(names, "+")
	return s, nil
}

// Name implements Provider.
func (s *Provider) Name() string { return "scripted" }

// DefaultModel implements Provider: the recording's name stands in for a model.
func (s *Provider) DefaultModel() string { return s.model }

// Calls counts Complete calls, for tests that assert how many judge calls a run made.
func (s *Provider) Calls() int64 { return s.calls.Load() }

// CallsFor counts the calls made for one key (an AC id, "<AC>/<case>/original", ...):
// a key with a recorded answer, or any key with Options.CountEveryKey.
func (s *Provider) CallsFor(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.byKey[key]
}

// AsksNoModel implements judge.Recorded: recorded answers are no GenAI calls.
func (s *Provider) AsksNoModel() bool { return true }

// Complete implements Provider.
func (s *Provider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	s.calls.Add(1)
	if _, recorded := s.answers[req.Key]; recorded || s.countAll {
		s.mu.Lock()
		s.byKey[req.Key]++
		s.mu.Unlock()
	}
	start := time.Now()
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return judge.Response{}, ctx.Err()
		}
	}
	content := ""
	if a, ok := s.answers[req.Key]; ok {
		content = string(a)
		// A list of answers is a sequence: the n-th call for the key gets the n-th one,
		// the last one repeating (a loop that fails, then passes).
		var seq []json.RawMessage
		if len(a) > 0 && a[0] == '[' && json.Unmarshal(a, &seq) == nil && len(seq) > 0 {
			s.mu.Lock()
			n := s.byKey[req.Key]
			s.mu.Unlock()
			content = string(seq[min(n, len(seq))-1])
		}
	} else if f, ok := s.fixed[req.Kind]; ok {
		content = f
	} else {
		return judge.Response{}, fmt.Errorf("%w: scripted provider has no answer for %s %q", judge.ErrUnavailable, req.Kind, req.Key)
	}
	model := req.Model
	if model == "" {
		model = s.model
	}
	// Nothing is sampled: the recording answers whatever the parameters, which are
	// reported as asked so a verdict still says what it was asked under.
	sampling := events.Sampling{Temperature: req.Params.Temperature, Seed: req.Params.Seed, MaxTokens: req.Params.MaxTokens,
		ResponseFormat: events.FormatNone, ReportedModel: model}
	return judge.Response{Content: content, Model: model, Latency: time.Since(start), Attempts: 1, Sampling: sampling}, nil
}
