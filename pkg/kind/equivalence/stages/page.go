package stages

import (
	"context"
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ stage.Paging = Kind{}

//go:embed page.html
var pageTemplate string

// JobTemplate implements stage.Paging: the gate, the documents and each case with its
// transcripts.
func (Kind) JobTemplate() string { return pageTemplate }

type pageView struct {
	Variant     string              `json:"variant,omitempty"`
	Round       int                 `json:"round"`
	MinCases    int                 `json:"min_cases"`
	RunnerModel string              `json:"runner_model,omitempty"`
	Original    stage.PageArtifact  `json:"original"`
	Candidate   stage.PageArtifact  `json:"candidate"`
	Report      *equivalence.Report `json:"report,omitempty"`
	Cases       []caseView          `json:"cases,omitempty"`
	Transcripts bool                `json:"transcripts,omitempty"`
}

type caseView struct {
	ID        string                  `json:"id,omitempty"`
	Tag       string                  `json:"tag,omitempty"`
	Input     string                  `json:"input,omitempty"`
	Result    *equivalence.CaseResult `json:"result,omitempty"`
	Original  *stage.PageArtifact     `json:"original,omitempty"`
	Candidate *stage.PageArtifact     `json:"candidate,omitempty"`
}

// JobSection implements stage.Paging.
func (Kind) JobSection(ctx context.Context, env stage.PageEnv, rec *records.Job, _ stage.PageRequest) (stage.PageSection, error) {
	res, err := equivalence.ResultOf(rec)
	if err != nil {
		env.Log().Warn("job page", "job", rec.Key(), "err", err)
	}
	if res == nil {
		res = &equivalence.Result{}
	}
	v := &pageView{}
	if len(rec.Result) > 0 {
		v.Report = &res.Report
	}
	es := equivalence.SpecOf(rec.Spec.KindPart)
	if es == nil {
		return stage.PageSection{Data: v}, nil
	}
	v.Variant, v.Round, v.MinCases, v.RunnerModel = es.Variant, es.Round, es.MinCases, es.RunnerModel
	v.Original = env.SourceArtifact(ctx, rec.Tenant, "original document", es.Original)
	v.Candidate = env.SourceArtifact(ctx, rec.Tenant, "candidate document", es.Candidate)
	results := map[string]*equivalence.CaseResult{}
	for i := range res.Report.Cases {
		results[res.Report.Cases[i].CaseID] = &res.Report.Cases[i]
	}
	transcripts := map[string]map[string]events.Blob{}
	for _, t := range res.Transcripts {
		if t.CaseID == "" || t.Blob.SHA256 == "" {
			continue
		}
		if transcripts[t.CaseID] == nil {
			transcripts[t.CaseID] = map[string]events.Blob{}
		}
		transcripts[t.CaseID][t.Side] = t.Blob
	}
	v.Transcripts = len(transcripts) > 0
	seen := map[string]bool{}
	for _, c := range es.Cases {
		seen[c.ID] = true
		cv := caseView{ID: c.ID, Tag: c.Tag, Input: c.Input, Result: results[c.ID]}
		if t := transcripts[c.ID]; t != nil {
			if b, ok := t["original"]; ok {
				cv.Original = env.BlobArtifact(ctx, rec.Tenant, "original transcript", &b)
			}
			if b, ok := t["candidate"]; ok {
				cv.Candidate = env.BlobArtifact(ctx, rec.Tenant, "candidate transcript", &b)
			}
		}
		v.Cases = append(v.Cases, cv)
	}
	for i := range res.Report.Cases {
		if cr := &res.Report.Cases[i]; !seen[cr.CaseID] {
			v.Cases = append(v.Cases, caseView{ID: cr.CaseID, Result: cr})
		}
	}
	return stage.PageSection{Data: v}, nil
}
