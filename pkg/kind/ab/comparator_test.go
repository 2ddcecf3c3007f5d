package ab_test

import (
	"context"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// TestComparatorRequestCarriesSeedRules: the request a model receives over the wire
// (captured by a real OpenAI-compatible server on loopback) carries seed 003's rules
// that the earlier prompt left out: the Confidence Criteria table with each band's
// condition, the explanation a tie owes, the relative-comparison rule, and the five
// dimensions under the seed's names.
func TestComparatorRequestCarriesSeedRules(t *testing.T) {
	t.Parallel()
	fake := fakellm.New(fakellm.Options{})
	t.Cleanup(fake.Close)
	p, err := openai.New(openai.Config{BaseURL: fake.BaseURL(), Model: "fake-model", Timeout: 10 * time.Second, MaxAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	in := ab.Input{Key: "AC-7", Criterion: "The page explains the error and how to fix it.",
		A: ab.Material{Class: "text", MediaType: "text/markdown", Data: []byte("# One\nFix: add the field.")},
		B: ab.Material{Class: "text", MediaType: "text/markdown", Data: []byte("# Two\nSomething failed.")}}
	if v := ab.Judge(context.Background(), p, "fake-model", "t", in, judge.Params{}); v.Status != "ok" {
		t.Fatalf("vote %+v", v)
	}
	reqs := fake.Requests()
	if len(reqs) != 1 || len(reqs[0].Messages) < 2 || reqs[0].Messages[0].Role != goopenai.ChatMessageRoleSystem {
		t.Fatalf("captured %d requests: %+v", len(reqs), reqs)
	}
	system := strings.Join(strings.Fields(fakellm.Text(reqs[0].Messages[0])), " ")
	for _, want := range []string{
		// Confidence Criteria: 0.9-1.0 / 0.7-0.89 / 0.5-0.69 / 0.0-0.49 and their conditions.
		"0.9-1.0, very high: clear differences on several dimensions, and nothing that argues the other way",
		"0.7-0.89, high: differences on the key dimensions, with some dimensions equal",
		"0.5-0.69, moderate: differences on only some dimensions, the rest equal",
		"0.0-0.49, low: minimal differences, or results that are mixed across the dimensions; consider a tie",
		// "If TIE: explanation of why the difference could not be determined".
		"If the answer is a tie, the reasoning also explains why no difference could be determined",
		// The red flag: relative superiority, not absolute quality.
		"This is a relative comparison: decide which artifact is better than the other, not how good either is in absolute terms",
		// The seed's five dimensions, named as the seed names them.
		"- Correctness:", "- Completeness:", "- Process Adherence:", "- Code Quality:", "- Efficiency:",
	} {
		if !strings.Contains(system, want) {
			t.Errorf("the system message lacks %q", want)
		}
	}
	for _, gone := range []string{"adherence:", "craft:", "economy:"} {
		if strings.Contains(system, gone) {
			t.Errorf("the system message still names the dimension %q", gone)
		}
	}
	// The AC id stays out of what the model sees.
	for _, m := range reqs[0].Messages {
		if strings.Contains(fakellm.Text(m), "AC-7") {
			t.Errorf("a %s message names the AC id", m.Role)
		}
	}
}
