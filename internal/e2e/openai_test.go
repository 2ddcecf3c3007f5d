package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// fakeJudge starts a fake OpenAI-compatible server and every service, the judge using
// the real openai provider against it.
func fakeJudge(t *testing.T, opts fakellm.Options) (*Env, *fakellm.Server) {
	t.Helper()
	p, fake := OpenAIJudge(t, "fake-model", opts)
	env := NewEnv(t)
	env.Start(p, "judge-openai", bus.Services...)
	return env, fake
}

// abRules is the `ab` system prompt as embedded.
func abRules(t *testing.T) string {
	t.Helper()
	return ab.Messages(ab.Input{})[0].Parts[0].Text
}

// userText is the text of a request's first user message.
func userText(req goopenai.ChatCompletionRequest) string {
	for _, m := range req.Messages {
		if m.Role == goopenai.ChatMessageRoleUser {
			return fakellm.Text(m)
		}
	}
	return ""
}

// tokenRe finds the per-AC token batchFiles writes into every artifact.
var tokenRe = regexp.MustCompile(`tok([A-Za-z]*)(\d+)[xy]`)

// callsPerAC counts requests per AC index (from the artifact tokens in the user text);
// each request must name exactly one AC.
func callsPerAC(t *testing.T, reqs []goopenai.ChatCompletionRequest) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range reqs {
		ids := map[string]bool{}
		for _, m := range tokenRe.FindAllStringSubmatch(userText(r), -1) {
			ids[m[1]+m[2]] = true
		}
		if len(ids) != 1 {
			t.Fatalf("request names %d ACs: %v", len(ids), ids)
		}
		for id := range ids {
			out[id]++
		}
	}
	return out
}

// TestOpenAIProviderFlow: the openai provider through the whole flow against a fake
// server: one call per AC with structured output and the rules as the system prompt;
// a resubmission is answered from the judge-call cache; a swap batch calls twice per AC.
func TestOpenAIProviderFlow(t *testing.T) {
	env, fake := fakeJudge(t, fakellm.Options{})
	rules := abRules(t)
	b := WriteBatch(t, batchFiles{N: 10, Salt: "a"}.build())
	res := env.Wait(env.Submit(b, e2eTenant), 30*time.Second)
	if res.Summary.Compared != 10 {
		t.Fatalf("summary %+v", res.Summary)
	}
	if n := fake.Calls(); n != 10 {
		t.Fatalf("fake server got %d calls, want 10", n)
	}
	for i, r := range fake.Requests() {
		rf := r.ResponseFormat
		if rf == nil || rf.Type != goopenai.ChatCompletionResponseFormatTypeJSONSchema || rf.JSONSchema == nil ||
			rf.JSONSchema.Name != "ab_verdict" || !rf.JSONSchema.Strict || rf.JSONSchema.Schema == nil {
			t.Fatalf("request %d: response_format %+v, want the ab_verdict json_schema", i, rf)
		}
		if schema, err := rf.JSONSchema.Schema.MarshalJSON(); err != nil || !strings.Contains(string(schema), `"raw_winner"`) {
			t.Errorf("request %d: schema %s does not describe the verdict", i, schema)
		}
		if len(r.Messages) < 2 || r.Messages[0].Role != goopenai.ChatMessageRoleSystem || fakellm.Text(r.Messages[0]) != rules {
			t.Errorf("request %d: first message is not the ab.v2 rules", i)
		}
	}
	for id, c := range callsPerAC(t, fake.Requests()) {
		if c != 1 {
			t.Errorf("AC %s: %d calls, want 1", id, c)
		}
	}
	for _, r := range res.Rows {
		if r.Cached || r.Judge != "openai/fake-model" {
			t.Errorf("first run row %+v: want a fresh openai/fake-model verdict", r)
		}
	}

	// The same files again: a new batch, judged entirely from the cache.
	sub2 := env.Submit(b, e2eTenant)
	res2 := env.Wait(sub2, 30*time.Second)
	if res2.BatchID == res.BatchID {
		t.Fatalf("resubmission reused batch id %s", res.BatchID)
	}
	if n := fake.Calls(); n != 10 {
		t.Fatalf("resubmission made %d new calls, want 0 (judge-call cache)", n-10)
	}
	if res2.Summary.Compared != 10 {
		t.Fatalf("resubmission summary %+v", res2.Summary)
	}
	first := rowsByID(res.Rows)
	for _, r := range res2.Rows {
		if !r.Cached {
			t.Errorf("resubmitted row %s not marked cached", r.ACID)
		}
		if f := first[r.ACID]; f.Winner != r.Winner || f.RawWinner != r.RawWinner {
			t.Errorf("cached row %s decided %s/%s, first run %s/%s", r.ACID, r.Winner, r.RawWinner, f.Winner, f.RawWinner)
		}
	}

	// Both positions, over new contents: two calls per AC, in both orders.
	fake.Reset()
	swap := WriteBatch(t, batchFiles{N: 10, Salt: "s", Extra: "positions: swap\n"}.build())
	res3 := env.Wait(env.Submit(swap, e2eTenant), 30*time.Second)
	if res3.Summary.Compared != 10 {
		t.Fatalf("swap summary %+v", res3.Summary)
	}
	reqs := fake.Requests()
	if len(reqs) != 20 {
		t.Fatalf("swap batch made %d calls, want 20", len(reqs))
	}
	per := callsPerAC(t, reqs)
	if len(per) != 10 {
		t.Errorf("swap calls cover %d ACs, want 10", len(per))
	}
	firstSlot := map[string]map[string]bool{} // AC -> which artifact (x/y) sat in slot A
	for _, r := range reqs {
		u := userText(r)
		m := tokenRe.FindStringSubmatchIndex(u[strings.Index(u, "ARTIFACT A"):])
		if m == nil {
			t.Fatalf("no artifact token in slot A")
		}
		tok := u[strings.Index(u, "ARTIFACT A"):][m[0]:m[1]]
		id, side := tok[3:len(tok)-1], tok[len(tok)-1:]
		if firstSlot[id] == nil {
			firstSlot[id] = map[string]bool{}
		}
		firstSlot[id][side] = true
	}
	for id, c := range per {
		if c != 2 || len(firstSlot[id]) != 2 {
			t.Errorf("AC %s: %d calls, slot A held %v; want 2 calls in both orders", id, c, firstSlot[id])
		}
	}
}
