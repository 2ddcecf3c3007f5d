package e2e

import (
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// TestSchemaViolation: an answer that stays invalid after the one repair re-ask makes
// its AC a schema violation (2 calls) while the rest of the batch is compared, and the
// batch exits 3; an answer that is invalid once and then valid is compared (2 calls).
func TestSchemaViolation(t *testing.T) {
	// batchFiles writes token "tokv<i>x|y" into AC-(i+1)'s artifacts.
	const (
		badTok   = "tokv0" // AC-1: never valid
		flakyTok = "tokv1" // AC-2: valid after the repair re-ask
		badReply = "I think A is better, honestly."
	)
	env, fake := fakeJudge(t, fakellm.Options{Respond: func(req goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		u := userText(req)
		switch {
		case strings.Contains(u, badTok+"x") || strings.Contains(u, badTok+"y"):
			return fakellm.Reply{Content: badReply}
		case (strings.Contains(u, flakyTok+"x") || strings.Contains(u, flakyTok+"y")) && len(req.Messages) == 2:
			return fakellm.Reply{Content: `{"raw_winner": "A", "confidence": 7}`}
		}
		return fakellm.Reply{}
	}})
	res := env.Wait(env.Submit(WriteBatch(t, batchFiles{N: 6, Salt: "v"}.build()), e2eTenant), 30*time.Second)

	rows := rowsByID(res.Rows)
	if r := rows["AC-1"]; r.Status != "schema_violation" {
		t.Errorf("AC-1: %+v, want schema_violation", r)
	}
	for _, id := range []string{"AC-2", "AC-3", "AC-4", "AC-5", "AC-6"} {
		if r := rows[id]; r.Status != "compared" {
			t.Errorf("%s: %+v, want compared", id, r)
		}
	}
	if s := res.Summary; s.Total != 6 || s.Compared != 5 || s.Violations != 1 || s.ExitCode != 3 {
		t.Errorf("summary %+v, want 6 total, 5 compared, 1 violation, exit code 3", s)
	}

	reqs := fake.Requests()
	per := callsPerAC(t, reqs)
	want := map[string]int{"v0": 2, "v1": 2, "v2": 1, "v3": 1, "v4": 1, "v5": 1}
	for id, n := range want {
		if per[id] != n {
			t.Errorf("AC with token tok%s: %d calls, want %d (all: %v)", id, per[id], n, per)
		}
	}
	if len(reqs) != 8 {
		t.Errorf("%d calls in all, want 8", len(reqs))
	}
	// The re-ask shows the model its answer and names the problem; the rules stay first.
	rules := abRules(t)
	reasks := 0
	for _, r := range reqs {
		if len(r.Messages) == 2 {
			continue
		}
		reasks++
		if len(r.Messages) != 4 || fakellm.Text(r.Messages[0]) != rules || r.Messages[2].Role != goopenai.ChatMessageRoleAssistant ||
			r.Messages[3].Role != goopenai.ChatMessageRoleUser || !strings.Contains(fakellm.Text(r.Messages[3]), "could not be accepted") {
			t.Errorf("re-ask is not [rules, user, previous answer, repair]: %+v", r.Messages)
		}
	}
	if reasks != 2 {
		t.Errorf("%d re-asks, want 2", reasks)
	}
}
