package stages

import (
	"context"
	_ "embed"
	"encoding/json"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ stage.Paging = Kind{}

//go:embed page.html
var pageTemplate string

// JobTemplate implements stage.Paging: the verdict, the artifacts un-blinded, their diff
// and the votes.
func (Kind) JobTemplate() string { return pageTemplate }

// pageView is an ab comparison un-blinded: the reviewer sees which artifact was ours.
type pageView struct {
	Ours          stage.PageArtifact `json:"ours"`
	Reference     stage.PageArtifact `json:"reference"`
	Assignment    string             `json:"assignment,omitempty"`
	RawWinner     string             `json:"raw_winner,omitempty"`
	Winner        string             `json:"winner,omitempty"`
	Confidence    *float64           `json:"confidence,omitempty"`
	Threshold     float64            `json:"threshold"`
	Positions     string             `json:"positions,omitempty"`
	Suggest       bool               `json:"suggest,omitempty"`
	Tag           string             `json:"tag,omitempty"`
	Impact        string             `json:"impact,omitempty"`
	BiggestGap    string             `json:"biggest_gap,omitempty"`
	Agreement     string             `json:"agreement,omitempty"`
	Consistent    *bool              `json:"consistent,omitempty"`
	Status        string             `json:"status"`
	BlockedReason string             `json:"blocked_reason,omitempty"`
	Votes         []voteView         `json:"votes,omitempty"`
	Suggestion    *ab.Suggestion     `json:"suggestion,omitempty"`
	JudgeInfo     *ab.JudgeInfo      `json:"judge_info,omitempty"`
	Answer        string             `json:"answer,omitempty"`
	// Slots says which artifact each slot was, for the judge's words in BiggestGap.
	Slots string `json:"slots,omitempty"`
	// Diff is ours against the reference, line by line, when both are text.
	Diff any `json:"diff,omitempty"`
}

type voteView struct {
	Judge      string  `json:"judge,omitempty"`
	Order      string  `json:"order,omitempty"`
	Status     string  `json:"status"`
	RawWinner  string  `json:"raw_winner,omitempty"`
	Confidence float64 `json:"confidence"`
	BiggestGap string  `json:"biggest_gap,omitempty"`
	Error      string  `json:"error,omitempty"`
	Cached     bool    `json:"cached,omitempty"`
	// Slots says which artifact each slot of this call was.
	Slots string `json:"slots,omitempty"`
	// Sampling is how the call was sampled, in one line; Unpinned marks a call that
	// pinned no temperature.
	Sampling string `json:"sampling,omitempty"`
	Unpinned bool   `json:"unpinned,omitempty"`
}

// JobSection implements stage.Paging: the comparison un-blinded, with the batch's
// suggestion for the AC once the batch completed.
func (Kind) JobSection(ctx context.Context, env stage.PageEnv, rec *records.Job, req stage.PageRequest) (stage.PageSection, error) {
	spec := ab.SpecOf(rec.Spec.KindPart)
	v := &pageView{}
	res, err := ab.ResultOf(rec)
	if err != nil {
		env.Log().Warn("job page", "job", rec.Key(), "err", err)
	}
	if res == nil {
		res = &ab.Result{}
	}
	assign := ab.Assign(rec.ACID, rec.Iteration)
	if res.Comparison.LabelAssignment.Valid() {
		assign = res.Comparison.LabelAssignment
	}
	v.Assignment, v.Slots = assign.String(), assign.Legend()
	oursSlot, refSlot := ab.LabelA, ab.LabelB
	if assign.A == ab.Reference {
		oursSlot, refSlot = ab.LabelB, ab.LabelA
	}
	if spec != nil {
		v.Threshold, v.Positions = spec.Threshold, spec.Positions
		v.Ours = env.SourceArtifact(ctx, rec.Tenant, "ours", spec.Ours)
		v.Reference = env.SourceArtifact(ctx, rec.Tenant, "reference", spec.Reference)
	}
	v.Ours.Slot, v.Reference.Slot = oursSlot, refSlot
	if c := &res.Comparison; c.ACID != "" {
		v.Status, v.BlockedReason = string(c.Status), c.BlockedReason
		v.RawWinner, v.Winner, v.Confidence, v.BiggestGap = c.RawWinner, string(c.Winner), c.Confidence, c.BiggestGap
		if c.Tribunal != nil {
			v.JudgeInfo, v.Answer = c.Tribunal.Judge, c.Tribunal.Answer
		}
	}
	if d := rec.Decided; d != nil && ab.DecidedOf(d.KindPart) != nil {
		a := ab.DecidedOf(d.KindPart)
		v.RawWinner, v.Winner, v.BiggestGap = a.RawWinner, a.Winner, a.BiggestGap
		v.Suggest, v.Tag, v.Impact, v.Agreement, v.Consistent = a.Suggest, a.Tag, a.Impact, a.Agreement, a.Consistent
		if rec.Status == events.StatusCompared {
			conf := a.Confidence
			v.Confidence = &conf
		}
	}
	for _, vote := range res.Votes {
		legend := assign
		if vote.Order == "BA" {
			legend = assign.Swapped()
		}
		v.Votes = append(v.Votes, voteView{Judge: vote.Judge.Provider + "/" + vote.Judge.Model, Order: vote.Order, Status: string(vote.Status),
			RawWinner: vote.RawWinner, Confidence: vote.Confidence, BiggestGap: vote.BiggestGap, Error: vote.Error, Cached: vote.Judge.Cached,
			Slots: legend.Legend(), Sampling: vote.Judge.Sampling.String(), Unpinned: vote.Judge.Sampling != nil && !vote.Judge.Sampling.Pinned()})
	}
	if v.Ours.Textual() && v.Reference.Textual() {
		v.Diff = env.Diff(v.Ours.Text, v.Reference.Text)
	}
	if h := req.Batch; h != nil && h.Completion != nil && h.Completion.ManifestRef != nil {
		v.Suggestion = suggestionFor(ctx, env, rec.Tenant, rec.ACID, *h.Completion.ManifestRef)
	}
	return stage.PageSection{Data: v}, nil
}

// suggestionFor finds an AC's suggestion in its batch's ab manifest: the manifest, not
// the job record, is where suggestions are numbered and worded.
func suggestionFor(ctx context.Context, env stage.PageEnv, tenant, acID string, ref events.Blob) *ab.Suggestion {
	data, err := env.ReadBlob(ctx, tenant, ref.SHA256)
	if err != nil {
		env.Log().Warn("read ab manifest", "tenant", tenant, "err", err)
		return nil
	}
	var m ab.Manifest
	if json.Unmarshal(data, &m) != nil {
		return nil
	}
	for i := range m.Suggestions {
		for _, f := range m.Suggestions[i].Files {
			if f == acID {
				return &m.Suggestions[i]
			}
		}
	}
	return nil
}
