package ab

import (
	"context"
	"embed"
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

//go:embed prompts/*.md
var prompts embed.FS

var (
	template = judge.MustTemplate(prompts, "ab.v3")
	// schema is verdictSchema as the model is sent it.
	schema = judge.Schema{Name: "ab_verdict", JSON: VerdictSchema()}
)

// PromptHash identifies the `ab` instructions every verdict was judged under.
func PromptHash() string { return judge.PromptHash(template) }

// Material is one blinded artifact as a judge sees it: bytes and a media type, never a
// name, a path or a role.
type Material struct {
	Class     string // "image", "text" or "html"
	MediaType string
	Data      []byte
}

// Input is one blinded comparison.
type Input struct {
	// Key is the AC id, for recorded answers and logs only; it never reaches a model.
	Key       string
	Criterion string
	A, B      Material
}

// Messages builds the blind prompt: the rules, then the criterion and both slots fenced as
// data. Images go as image parts for vision models.
func Messages(in Input) []judge.Message {
	user := []judge.Part{{Text: judge.Fence("CRITERION", in.Criterion)}}
	for _, s := range []struct {
		name string
		m    Material
	}{{"A", in.A}, {"B", in.B}} {
		label := "ARTIFACT " + s.name
		if s.m.Class == "image" {
			user = append(user,
				judge.Part{Text: fmt.Sprintf("Slot %s is an image (%s), attached next.", s.name, s.m.MediaType)},
				judge.Part{Image: &judge.Image{MediaType: s.m.MediaType, Data: s.m.Data}})
			continue
		}
		user = append(user, judge.Part{Text: fmt.Sprintf("Slot %s (%s):\n", s.name, s.m.MediaType) + judge.Fence(label, string(s.m.Data))})
	}
	user = append(user, judge.Part{Text: "Answer with the JSON object only."})
	return []judge.Message{
		{Role: "system", Parts: []judge.Part{{Text: template.Text}}},
		{Role: "user", Parts: user},
	}
}

// Attachments are the two slots as a judge that reads files gets them (the external
// judge, seed 000's agent): artifact_A and artifact_B, their media types and bytes.
func Attachments(in Input) []judge.Attachment {
	return []judge.Attachment{
		{Name: "artifact_A", MediaType: in.A.MediaType, Data: in.A.Data},
		{Name: "artifact_B", MediaType: in.B.MediaType, Data: in.B.Data},
	}
}

// Judge asks p for one blind comparison, re-asks once with the problem named when the
// answer is not a valid verdict, and returns the vote. A provider that stays unreachable
// yields status "unavailable"; an answer that stays invalid yields "schema_violation".
func Judge(ctx context.Context, p judge.Provider, model string, instance string, in Input, params judge.Params) events.Vote {
	c := judge.Call{Kind: events.KindAB, Key: in.Key, Model: model, Instance: instance, PromptHash: PromptHash(), Params: params,
		Attachments: Attachments(in)}
	out := judge.AskCall(ctx, p, c, Messages(in), judge.CopySchema(schema), ParseRawVerdict)
	vote := events.Vote{Order: "AB", Judge: out.Usage.JudgeInfo(), Status: out.Status, Error: out.Error, Raw: out.Raw}
	if out.Status == events.VoteOK {
		vote.RawWinner, vote.Confidence, vote.BiggestGap, vote.Reasoning = out.Answer.RawWinner, out.Answer.Confidence, out.Answer.BiggestGap, out.Answer.Reasoning
	}
	return vote
}
