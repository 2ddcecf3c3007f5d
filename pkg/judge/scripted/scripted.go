// Package scripted is the offline judge: recorded answers instead of a model, for tests,
// the quickstart and benchmarks. Every verdict it produces says provider "scripted".
package scripted

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/argus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
)

// Provider answers from recordings instead of a model: one fixed raw winner for every
// `ab` AC (the seed's fixture-winner test hook), or answers from a file keyed by AC id.
// Tests and the offline quickstart use it; every verdict it produces says
// provider "scripted", so no one mistakes it for a model's judgment.
type Provider struct {
	model   string
	fixed   map[string]string
	answers map[string]json.RawMessage
	latency time.Duration
	calls   atomic.Int64
	mu      sync.Mutex
	byKey   map[string]int
}

// Options configure a scripted provider.
type Options struct {
	// Winner is the fixed raw winner ("A", "B" or "tie") for `ab` ACs without a recorded
	// answer. Empty means every AC needs a recorded answer.
	Winner string
	// Confidence goes with Winner; zero means 1.
	Confidence float64
	// AnswersFile is a JSON object mapping AC ids to the answer object the model would
	// have returned, e.g. {"AC-1": {"raw_winner": "B", "confidence": 0.8, "biggest_gap": "..."}}.
	AnswersFile string
	// EquivalenceVerdict is the fixed verdict of every equivalence case without a
	// recorded answer (equivalent, candidate-regressed or candidate-diverged).
	EquivalenceVerdict string
	// CriticScores are the fixed correctness, slop and scope of every critic AC without
	// a recorded answer.
	CriticScores *[3]int
	// Runner answers every runner call without a recorded answer with a fixed transcript.
	Runner bool
	// RubricPass answers every rubric call without a recorded answer with a verdict that
	// scores every dimension of the built-in rubric 1.
	RubricPass bool
	// Latency simulates a model's response time (benchmarks).
	Latency time.Duration
}

// fixedNote marks every canned answer, so no one mistakes it for a model's judgment.
const fixedNote = "scripted fixture answer: no model was asked"

// NewScripted builds a scripted provider.
func New(o Options) (*Provider, error) {
	s := &Provider{latency: o.Latency, answers: map[string]json.RawMessage{}, fixed: map[string]string{}, byKey: map[string]int{}}
	// names make the model name every verdict carries: the ab fixture winner and the
	// answers file, which is what readers of ab results need; the other kinds' fixtures
	// only name the model when nothing else does.
	var names, extras []string
	canned := func(kind, name string, v any, check func([]byte) error) error {
		data, _ := json.Marshal(v)
		if err := check(data); err != nil {
			return fmt.Errorf("scripted %s answer: %w", kind, err)
		}
		s.fixed[kind] = string(data)
		extras = append(extras, name)
		return nil
	}
	if o.Winner != "" {
		w := strings.ToUpper(o.Winner)
		if w == "TIE" {
			w = "tie"
		}
		if w != "A" && w != "B" && w != "tie" {
			return nil, fmt.Errorf("scripted winner %q: want A, B or tie", o.Winner)
		}
		conf := o.Confidence
		if conf == 0 {
			conf = 1
		}
		fixed, _ := json.Marshal(map[string]any{"raw_winner": w, "confidence": conf, "biggest_gap": fixedNote})
		s.fixed["ab"] = string(fixed)
		names = append(names, "fixed-"+w)
	}
	if v := o.EquivalenceVerdict; v != "" {
		delta := ""
		if v != equivalence.VerdictEquivalent {
			delta = fixedNote
		}
		err := canned("equivalence", "fixed-"+v, map[string]any{"verdict": v, "behaviour_delta": delta,
			"efficiency_signal": map[string]any{"original_directness": 3, "candidate_directness": 3, "interpretation_notes": fixedNote}},
			func(b []byte) error { _, err := equivalence.ParseAnswer(b); return err })
		if err != nil {
			return nil, err
		}
	}
	if c := o.CriticScores; c != nil {
		// The seed's output object carries the judge's own verdict and quality; the
		// fixture claims the ones its scores derive.
		q, v := critic.Derive(c[0], c[1], c[2])
		err := canned("critic", fmt.Sprintf("fixed-critic-%d-%d-%d", c[0], c[1], c[2]),
			map[string]any{"correctness": c[0], "slop": c[1], "scope": c[2], "verdict": v, "quality": q, "rationale": fixedNote},
			func(b []byte) error { _, err := critic.ParseAnswer(b); return err })
		if err != nil {
			return nil, err
		}
	}
	if o.RubricPass {
		r := argus.DefaultRubric()
		dims := map[string]any{}
		for _, d := range r.DimensionNames() {
			dims[d] = map[string]any{"score": 1, "anchor": r.Dimensions[d].Anchor, "evidence": fixedNote}
		}
		err := canned("rubric", "fixed-rubric-pass", map[string]any{"iteration": 1, "feature": "fixture", "target": "fixture",
			"dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": true, "failed_dimensions": []string{}, "notes": fixedNote},
			func(b []byte) error { _, err := argus.ParseVerdict(b); return err })
		if err != nil {
			return nil, err
		}
	}
	if o.Runner {
		err := canned(equivalence.KindRunner, "fixed-runner", map[string]any{"transcript": "scripted runner: no model was asked",
			"self_report": map[string]any{"steps_followed": []string{}, "steps_skipped": []string{}, "ambiguities": []any{},
				"improvisation": []string{}, "deviation_urges": []string{}, "final_output": fixedNote}},
			func(b []byte) error { _, err := equivalence.ParseRunnerOutput(b); return err })
		if err != nil {
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

// CallsFor counts the calls made for one key (an AC id, "<AC>/<case>/original", ...).
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
	s.mu.Lock()
	s.byKey[req.Key]++
	s.mu.Unlock()
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
