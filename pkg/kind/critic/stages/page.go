package stages

import (
	"context"
	_ "embed"

	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var _ stage.Paging = Kind{}

//go:embed page.html
var pageTemplate string

// JobTemplate implements stage.Paging: the task, the output and the scores.
func (Kind) JobTemplate() string { return pageTemplate }

type pageView struct {
	Task   string             `json:"task,omitempty"`
	Output stage.PageArtifact `json:"output"`
	Result *critic.Result     `json:"result,omitempty"`
}

// JobSection implements stage.Paging.
func (Kind) JobSection(ctx context.Context, env stage.PageEnv, rec *records.Job, _ stage.PageRequest) (stage.PageSection, error) {
	res, err := critic.ResultOf(rec)
	if err != nil {
		env.Log().Warn("job page", "job", rec.Key(), "err", err)
	}
	v := &pageView{Result: res}
	if cs := critic.SpecOf(rec.Spec.KindPart); cs != nil {
		v.Task = cs.Task
		v.Output = env.SourceArtifact(ctx, rec.Tenant, "output", cs.Output)
	}
	return stage.PageSection{Data: v}, nil
}
