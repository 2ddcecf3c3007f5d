package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"
)

// Scripted answers from recordings instead of a model: one fixed raw winner for every
// `ab` AC (the seed's fixture-winner test hook), or answers from a file keyed by AC id.
// Tests and the offline quickstart use it; every verdict it produces says
// provider "scripted", so no one mistakes it for a model's judgment.
type Scripted struct {
	model   string
	fixed   string
	answers map[string]json.RawMessage
	latency time.Duration
	calls   atomic.Int64
}

// ScriptedOptions configure a scripted provider.
type ScriptedOptions struct {
	// Winner is the fixed raw winner ("A", "B" or "tie") for `ab` ACs without a recorded
	// answer. Empty means every AC needs a recorded answer.
	Winner string
	// Confidence goes with Winner; zero means 1.
	Confidence float64
	// AnswersFile is a JSON object mapping AC ids to the answer object the model would
	// have returned, e.g. {"AC-1": {"raw_winner": "B", "confidence": 0.8, "biggest_gap": "..."}}.
	AnswersFile string
	// Latency simulates a model's response time (benchmarks).
	Latency time.Duration
}

// NewScripted builds a scripted provider.
func NewScripted(o ScriptedOptions) (*Scripted, error) {
	s := &Scripted{latency: o.Latency, answers: map[string]json.RawMessage{}}
	var names []string
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
		fixed, _ := json.Marshal(map[string]any{"raw_winner": w, "confidence": conf, "biggest_gap": "scripted fixture answer: no model was asked"})
		s.fixed = string(fixed)
		names = append(names, "fixed-"+w)
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
	if len(names) == 0 {
		return nil, fmt.Errorf("scripted provider needs a fixed winner or an answers file")
	}
	s.model = strings.Join(names, "+")
	return s, nil
}

// Name implements Provider.
func (s *Scripted) Name() string { return "scripted" }

// DefaultModel implements Provider: the recording's name stands in for a model.
func (s *Scripted) DefaultModel() string { return s.model }

// Calls counts Complete calls, for tests that assert how many judge calls a run made.
func (s *Scripted) Calls() int64 { return s.calls.Load() }

// Complete implements Provider.
func (s *Scripted) Complete(ctx context.Context, req Request) (Response, error) {
	s.calls.Add(1)
	start := time.Now()
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return Response{}, ctx.Err()
		}
	}
	content := ""
	if a, ok := s.answers[req.Key]; ok {
		content = string(a)
	} else if s.fixed != "" && req.Kind == "ab" {
		content = s.fixed
	} else {
		return Response{}, fmt.Errorf("%w: scripted provider has no answer for %s %q", ErrUnavailable, req.Kind, req.Key)
	}
	model := req.Model
	if model == "" {
		model = s.model
	}
	return Response{Content: content, Model: model, Latency: time.Since(start), Attempts: 1}, nil
}
