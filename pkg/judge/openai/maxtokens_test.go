package openai

import (
	"context"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// TestAnswersCappedByDefault: with no limit configured, every request still carries one,
// so a model talked into a long answer cannot run up the bill or outgrow an event.
func TestAnswersCappedByDefault(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		model                string
		configured, param    int
		wantMax, wantMaxComp int
	}{
		{"default", "judge-model", 0, 0, DefaultMaxTokens, 0},
		{"reasoning model default", "o3-mini", 0, 0, 0, DefaultReasoningMaxTokens},
		{"configured", "judge-model", 1000, 0, 1000, 0},
		{"configured, reasoning model", "gpt-5-mini", 1000, 0, 0, 1000},
		{"request's own limit wins", "judge-model", 1000, 300, 300, 0},
		{"no limit asked for", "judge-model", -1, 0, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t, fakellm.Options{})
			p := newProvider(t, s, func(c *Config) { c.Model, c.MaxTokens = tt.model, tt.configured })
			req := simpleRequest()
			req.Params.MaxTokens = tt.param
			if _, err := p.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			got := s.Requests()[0]
			if got.MaxTokens != tt.wantMax || got.MaxCompletionTokens != tt.wantMaxComp {
				t.Errorf("max_tokens %d, max_completion_tokens %d; want %d, %d", got.MaxTokens, got.MaxCompletionTokens, tt.wantMax, tt.wantMaxComp)
			}
		})
	}
}
