package judge_test

import (
	"context"
	"encoding/json"
	"errors"
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
