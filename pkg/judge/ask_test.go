package judge_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// TestAskCarriesSampling: the sampling a provider reports for the answering call reaches
// the usage and the verdict's judge info, with the server's model id as the reported
// model while the verdict keeps naming the model asked for.
func TestAskCarriesSampling(t *testing.T) {
	temp := float32(0.2)
	calls := 0
	p := judgetest.FuncProvider(func(_ context.Context, req judge.Request) (judge.Response, error) {
		calls++
		s := events.Sampling{Temperature: &temp, MaxTokens: 4096, ResponseFormat: events.FormatJSONSchema}
		if calls == 2 {
			// The repair re-ask fell back to JSON mode: the verdict says so.
			s.ResponseFormat = events.FormatJSONObject
		}
		content := `{"ok": true}`
		if calls == 1 {
			content = "not json"
		}
		return judge.Response{Content: content, Model: "asked-2026-01-01", Sampling: s}, nil
	})
	parse := func(b []byte) (map[string]bool, error) {
		var v map[string]bool
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, errors.New("not JSON")
		}
		return v, nil
	}
	out, err := judge.Ask(context.Background(), p, judge.Request{Kind: "critic", Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: "x"}}}}},
		judge.Usage{Provider: "func", Model: "asked"}, parse)
	if err != nil || out.Status != events.VoteOK {
		t.Fatalf("status %s err %v", out.Status, err)
	}
	ji := out.Usage.JudgeInfo()
	s := ji.Sampling
	if ji.Model != "asked" || s == nil || !s.Pinned() || *s.Temperature != 0.2 || s.MaxTokens != 4096 ||
		s.ResponseFormat != events.FormatJSONObject || s.ReportedModel != "asked-2026-01-01" {
		t.Errorf("judge info %+v, sampling %v", ji, s)
	}

	// A provider that failed before answering leaves no sampling: nothing was sampled.
	fail := judgetest.FuncProvider(func(context.Context, judge.Request) (judge.Response, error) {
		return judge.Response{}, judge.ErrUnavailable
	})
	out, _ = judge.Ask(context.Background(), fail, judge.Request{}, judge.Usage{Provider: "func", Model: "m"}, parse)
	if out.Usage.Sampling != nil {
		t.Errorf("unanswered call has sampling %v", out.Usage.Sampling)
	}
}

// TestAskCall: a kind's call asks the provider's default model when it names none, with
// the kind, key and parameters on the request and the prompt and instance on the usage;
// a refused call asks nothing and is blocked with its reason.
func TestAskCall(t *testing.T) {
	t.Parallel()
	p, seen := judgetest.AnswersInTurn(`"yes"`)
	maxTokens := 77
	c := judge.Call{Kind: events.KindCritic, Key: "AC-1", Instance: "i-1", PromptHash: "critic.v1:h", Params: judge.Params{MaxTokens: maxTokens}}
	msgs := []judge.Message{{Role: "user", Parts: []judge.Part{{Text: "x"}}}}
	parse := func(b []byte) (string, error) {
		var s string
		return s, json.Unmarshal(b, &s)
	}
	out := judge.AskCall(context.Background(), p, c, msgs, &judge.Schema{Name: "s"}, parse)
	if out.Status != events.VoteOK || out.Answer != "yes" || len(*seen) != 1 {
		t.Fatalf("outcome %+v after %d calls", out, len(*seen))
	}
	req := (*seen)[0]
	if req.Kind != "critic" || req.Key != "AC-1" || req.Model != p.DefaultModel() || req.Params.MaxTokens != maxTokens || req.Schema.Name != "s" {
		t.Errorf("request %+v", req)
	}
	if u := out.Usage; u.Provider != p.Name() || u.Model != p.DefaultModel() || u.Instance != "i-1" || u.PromptHash != "critic.v1:h" || u.Calls != 1 {
		t.Errorf("usage %+v", u)
	}

	c.Model = "named"
	refused := judge.Refused[string](p, c, "missing input")
	if refused.Status != events.VoteBlocked || refused.Error != "missing input" || refused.Usage.Model != "named" || refused.Usage.Calls != 0 || len(*seen) != 1 {
		t.Errorf("refused call %+v after %d calls", refused, len(*seen))
	}
}

// TestAskFinalAnswerKeepsTheViolation: a provider whose answer is final (the external
// judge) refuses the repair re-ask with ErrAnswerFinal; the outcome is the first answer's
// schema violation with its raw text, not an outage, and counts one call.
func TestAskFinalAnswerKeepsTheViolation(t *testing.T) {
	t.Parallel()
	asked := 0
	p := judgetest.FuncProvider(func(_ context.Context, req judge.Request) (judge.Response, error) {
		asked++
		if asked > 1 {
			return judge.Response{}, fmt.Errorf("external: %w", judge.ErrAnswerFinal)
		}
		return judge.Response{Content: `{"raw_winner":"C"}`}, nil
	})
	parse := func([]byte) (struct{}, error) { return struct{}{}, errors.New("raw_winner: must be A, B or tie") }
	out, err := judge.Ask(context.Background(), p, judge.Request{Kind: "ab"}, judge.Usage{}, parse)
	if out.Status != events.VoteSchemaViolation || out.Raw != `{"raw_winner":"C"}` || out.Usage.Calls != 1 || err == nil || errors.Is(err, judge.ErrAnswerFinal) {
		t.Fatalf("outcome %+v, err %v; want the first answer's violation, one call", out, err)
	}
	if asked != 2 {
		t.Fatalf("provider asked %d times; want the answer and the refused re-ask", asked)
	}
}
