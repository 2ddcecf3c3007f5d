package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/ab"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

var (
	abTemplate     = mustTemplate("ab.v2")
	repairTemplate = mustTemplate("repair.v1")
	abSchema       = &Schema{Name: "ab_verdict", JSON: json.RawMessage(`{
  "type": "object",
  "additionalProperties": false,
  "required": ["raw_winner", "confidence", "biggest_gap", "reasoning"],
  "properties": {
    "raw_winner": {"type": "string", "enum": ["A", "B", "tie"]},
    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    "biggest_gap": {"type": "string", "minLength": 1},
    "reasoning": {"type": "string"}
  }
}`)}
)

// ABPromptHash identifies the `ab` instructions every verdict was judged under.
func ABPromptHash() string { return abTemplate.Hash + "+" + repairTemplate.Hash }

// Material is one blinded artifact as a judge sees it: bytes and a media type, never a
// name, a path or a role.
type Material struct {
	Class     string // "image", "text" or "html"
	MediaType string
	Data      []byte
}

// ABInput is one blinded comparison.
type ABInput struct {
	// Key is the AC id, for recorded answers and logs only; it never reaches a model.
	Key       string
	Criterion string
	A, B      Material
}

// ABMessages builds the blind prompt: the rules, then the criterion and both slots
// fenced as data. Images go as image parts for vision models.
func ABMessages(in ABInput) []Message {
	user := []Part{{Text: Fence("CRITERION", in.Criterion)}}
	for _, s := range []struct {
		name string
		m    Material
	}{{"A", in.A}, {"B", in.B}} {
		label := "ARTIFACT " + s.name
		if s.m.Class == "image" {
			user = append(user,
				Part{Text: fmt.Sprintf("Slot %s is an image (%s), attached next.", s.name, s.m.MediaType)},
				Part{Image: &Image{MediaType: s.m.MediaType, Data: s.m.Data}})
			continue
		}
		user = append(user, Part{Text: fmt.Sprintf("Slot %s (%s):\n", s.name, s.m.MediaType) + Fence(label, string(s.m.Data))})
	}
	user = append(user, Part{Text: "Answer with the JSON object only."})
	return []Message{
		{Role: "system", Parts: []Part{{Text: abTemplate.Text}}},
		{Role: "user", Parts: user},
	}
}

// JudgeAB asks p for one blind comparison, re-asks once with the problem named when the
// answer is not a valid verdict, and returns the vote. A provider that stays unreachable
// yields status "unavailable"; an answer that stays invalid yields "schema_violation".
func JudgeAB(ctx context.Context, p Provider, model string, instance string, in ABInput, params Params) events.Vote {
	if model == "" {
		model = p.DefaultModel()
	}
	vote := events.Vote{Order: "AB", Judge: events.JudgeInfo{Provider: p.Name(), Model: model, Instance: instance, PromptHash: ABPromptHash()}}
	req := Request{Kind: events.KindAB, Key: in.Key, Model: model, Messages: ABMessages(in), Schema: abSchema, Params: params}
	start := time.Now()
	defer func() { vote.Judge.LatencyMillis = time.Since(start).Milliseconds() }()
	for attempt := 0; attempt < 2; attempt++ {
		resp, err := p.Complete(ctx, req)
		if err != nil {
			// The caller checks ctx first: a cancelled call is a shutdown, not an outage.
			vote.Status = "unavailable"
			vote.Error = err.Error()
			return vote
		}
		if resp.Model != "" {
			vote.Judge.Model = resp.Model
		}
		vote.Judge.PromptTokens += resp.PromptTokens
		vote.Judge.CompletionTokens += resp.CompletionTokens
		v, perr := ab.ParseRawVerdict([]byte(resp.Content))
		if perr == nil {
			vote.Status = "ok"
			vote.RawWinner, vote.Confidence, vote.BiggestGap, vote.Reasoning = v.RawWinner, v.Confidence, v.BiggestGap, v.Reasoning
			vote.Error, vote.Raw = "", ""
			return vote
		}
		vote.Status = "schema_violation"
		vote.Error = perr.Error()
		vote.Raw = truncate(resp.Content, 2000)
		repair, rerr := render(repairTemplate, map[string]string{"Problem": perr.Error()})
		if rerr != nil {
			vote.Error = rerr.Error()
			return vote
		}
		req.Messages = append(req.Messages,
			Message{Role: "assistant", Parts: []Part{{Text: resp.Content}}},
			Message{Role: "user", Parts: []Part{{Text: repair}}})
	}
	return vote
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
