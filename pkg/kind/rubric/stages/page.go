package stages

import (
	"context"
	_ "embed"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/commands"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var (
	_ stage.Paging     = Kind{}
	_ stage.PageActing = Kind{}
)

//go:embed page.html
var pageTemplate string

// JobTemplate implements stage.Paging: the view, its renders, the last verdict's
// dimensions, the loop, the sign-off, the runs of the view and, while the sign-off waits
// for a person, the HE-2 form.
func (Kind) JobTemplate() string { return pageTemplate }

// pageView is one rubric view in this batch: the render beside the reference and the
// previous render, the last verdict's dimensions, the loop, the sign-off and, while the
// sign-off waits for a person, the HE-2 form.
type pageView struct {
	Feature         string               `json:"feature,omitempty"`
	View            string               `json:"view,omitempty"`
	Mode            string               `json:"mode,omitempty"`
	Route           string               `json:"route,omitempty"`
	Adapter         string               `json:"adapter,omitempty"`
	Width           int                  `json:"width"`
	Height          int                  `json:"height"`
	ReferenceStatus string               `json:"reference_status,omitempty"`
	ReferenceSource string               `json:"reference_source,omitempty"`
	Render          *stage.PageArtifact  `json:"render,omitempty"`
	Reference       *stage.PageArtifact  `json:"reference,omitempty"`
	Previous        *stage.PageArtifact  `json:"previous,omitempty"`
	PreviousNote    string               `json:"previous_note,omitempty"`
	Candidate       *stage.PageArtifact  `json:"candidate,omitempty"`
	Dimensions      []dimView            `json:"dimensions,omitempty"`
	Verdict         *argus.Verdict       `json:"verdict,omitempty"`
	Loop            argus.LoopState      `json:"loop"`
	Attempts        []attemptView        `json:"attempts,omitempty"`
	RequiredPasses  int                  `json:"required_passes"`
	MaxIters        int                  `json:"max_iterations"`
	Decision        *rubricwire.Decision `json:"decision,omitempty"`
	SignOff         *argus.SignOff       `json:"sign_off,omitempty"`
	Spotcheck       string               `json:"spotcheck,omitempty"`
	Awaiting        bool                 `json:"awaiting,omitempty"`
	CanSpotcheck    bool                 `json:"can_spotcheck,omitempty"`
	Action          string               `json:"-"`
	CSRF            string               `json:"-"`
	DimNames        []string             `json:"dimension_names,omitempty"`
	Sent            string               `json:"sent,omitempty"`
	History         []historyRow         `json:"history,omitempty"`
	// The view's loop across runs (its record in the views bucket): which loop it is in,
	// what began it, and the form that starts the next one (the way out of a spent
	// budget).
	ViewLoop    int          `json:"view_loop,omitempty"`
	ViewIters   int          `json:"view_iterations,omitempty"`
	Began       []string     `json:"began,omitempty"`
	Reset       *views.Reset `json:"reset,omitempty"`
	CanReset    bool         `json:"can_reset,omitempty"`
	ResetAction string       `json:"-"`
	// ResetLoop is the loop the page's reset form ended (sent=reset), ResetDone whether
	// the aggregator has recorded it yet.
	ResetLoop int  `json:"-"`
	ResetDone bool `json:"-"`
}

type dimView struct {
	Name      string  `json:"name,omitempty"`
	Score     float64 `json:"score"`
	Threshold float64 `json:"threshold"`
	Pass      bool    `json:"pass,omitempty"`
	Anchor    string  `json:"anchor,omitempty"`
	Evidence  string  `json:"evidence,omitempty"`
	Frozen    bool    `json:"frozen,omitempty"`
	Attempts  int     `json:"attempts"`
}

type attemptView struct {
	Dimension string `json:"dimension,omitempty"`
	Attempts  int    `json:"attempts"`
}

type historyRow struct {
	Batch       string    `json:"batch,omitempty"`
	Href        string    `json:"href,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	Status      string    `json:"status"`
	Iteration   int       `json:"iteration"`
	Outcome     string    `json:"outcome,omitempty"`
	Fix         []string  `json:"fix,omitempty"`
	Render      string    `json:"render,omitempty"`
	Current     bool      `json:"current,omitempty"`
}

// JobSection implements stage.Paging. A page a form answered (sent=<decision> or
// sent=reset&loop=<n>) reloads until the aggregator has recorded what was sent.
func (Kind) JobSection(ctx context.Context, env stage.PageEnv, rec *records.Job, req stage.PageRequest) (stage.PageSection, error) {
	v, err := viewPage(ctx, env, rec, req)
	if err != nil {
		return stage.PageSection{}, err
	}
	sec := stage.PageSection{Data: v}
	v.Sent = req.Query.Get("sent")
	if v.Sent != "" && rec.Status == events.StatusAwaitingSpotcheck {
		sec.Refresh = 1
	}
	if v.Sent == "reset" {
		// The loop the form reset: recorded once the view is past it.
		loop, _ := strconv.Atoi(req.Query.Get("loop"))
		v.ResetLoop, v.ResetDone = loop, v.ViewLoop > loop
		if !v.ResetDone {
			sec.Refresh = 1
		}
	}
	return sec, nil
}

func viewPage(ctx context.Context, env stage.PageEnv, rec *records.Job, req stage.PageRequest) (*pageView, error) {
	rs := rubricwire.SpecOf(rec.Spec.KindPart)
	v := &pageView{}
	if rs == nil {
		return v, nil
	}
	v.Feature, v.View, v.Mode, v.Route, v.Adapter = rs.Feature, rs.Target+"/"+rs.State+"/"+rs.Appearance, rs.Mode, rs.Route, rs.Adapter
	v.Width, v.Height, v.ReferenceStatus, v.ReferenceSource = rs.Width, rs.Height, rs.ReferenceStatus, rs.ReferenceSource
	v.Reference = env.BlobArtifact(ctx, rec.Tenant, "reference", rs.Reference)
	rb := rubricOf(ctx, env, rec.Tenant, rs)
	params := rb.LoopParams()
	v.RequiredPasses, v.MaxIters = params.RequiredPasses, params.MaxIterations
	if rs.MaxIterations > 0 {
		v.MaxIters = rs.MaxIterations
	}
	v.DimNames = rb.DimensionNames()
	st, err := rubric.StateOf(rec)
	if err != nil {
		return nil, err
	}
	if st != nil {
		v.Render = env.BlobArtifact(ctx, rec.Tenant, "render", st.Render)
		v.Candidate = env.BlobArtifact(ctx, rec.Tenant, "candidate reference", st.Candidate)
		v.Verdict, v.Loop, v.Decision, v.SignOff = st.LastVerdict, st.Loop, st.Decision, st.SignOff
		for dim, n := range st.Loop.Attempts {
			v.Attempts = append(v.Attempts, attemptView{Dimension: dim, Attempts: n})
		}
		sort.Slice(v.Attempts, func(i, j int) bool { return v.Attempts[i].Dimension < v.Attempts[j].Dimension })
	}
	if v.SignOff != nil {
		v.Spotcheck = v.SignOff.HumanSpotcheck
	}
	if v.Verdict != nil {
		frozen := map[string]bool{}
		for _, f := range v.Loop.Frozen {
			frozen[f] = true
		}
		names := rb.DimensionNames()
		for n := range v.Verdict.Dimensions {
			if _, ok := rb.Dimensions[n]; !ok {
				names = append(names, n)
			}
		}
		for _, n := range names {
			ds, ok := v.Verdict.Dimensions[n]
			if !ok {
				continue
			}
			th := rb.Threshold(n)
			v.Dimensions = append(v.Dimensions, dimView{Name: n, Score: ds.Score, Threshold: th, Pass: ds.Score >= th,
				Anchor: ds.Anchor, Evidence: ds.Evidence, Frozen: frozen[n], Attempts: v.Loop.Attempts[n]})
		}
	}
	history, err := env.Runs(ctx, rec)
	if err != nil {
		return nil, err
	}
	for _, hr := range history {
		row := historyRow{Batch: hr.Batch, Href: stage.JobHref(hr.Tenant, hr.Batch, hr.ACID), SubmittedAt: hr.SubmittedAt, Status: string(hr.Status), Current: hr.Batch == rec.Batch}
		if hs, _ := rubric.StateOf(hr); hs != nil {
			row.Iteration = hs.Loop.Iteration
			if hs.Decision != nil {
				row.Outcome, row.Fix = hs.Decision.Outcome, hs.Decision.FixDimensions
			}
			if hs.Render != nil {
				row.Render = stage.BlobHref(hr.Tenant, hs.Render.SHA256)
			}
		}
		v.History = append(v.History, row)
	}
	// The previous render: the one the judge saw, once the aggregator records it;
	// until then the last render of this view in an earlier run.
	switch {
	case st != nil && st.Previous != nil:
		v.Previous = env.BlobArtifact(ctx, rec.Tenant, "previous render", st.Previous)
		v.PreviousNote = "the previous render the judge ranked this one against"
	default:
		for _, hr := range history {
			if hs, _ := rubric.StateOf(hr); hr.SubmittedAt.Before(rec.SubmittedAt) && hs != nil && hs.Render != nil {
				v.Previous = env.BlobArtifact(ctx, rec.Tenant, "previous render", hs.Render)
				v.PreviousNote = "the last render of this view in an earlier run (batch " + hr.Batch + ")"
				break
			}
		}
		if v.Previous == nil {
			v.PreviousNote = "no earlier run of this view"
			if v.Decision != nil && v.Decision.Unchanged {
				v.PreviousNote = "no earlier run; this run's last render was a confirmation found unchanged from the render before it, which the record does not keep separately"
			}
		}
	}
	canPublish := env.Publisher() != nil
	v.Awaiting = rec.Status == events.StatusAwaitingSpotcheck
	v.CanSpotcheck = v.Awaiting && canPublish
	if v.CanSpotcheck {
		v.Action = stage.JobHref(rec.Tenant, rec.Batch, rec.ACID) + "/spotcheck"
	}
	if vb := env.Buckets().Views; vb != nil && rs.Blocked == "" {
		vr, _, err := views.Load(ctx, vb, views.Key(rec.Tenant, rs))
		if err != nil {
			return nil, err
		}
		v.ViewLoop, v.ViewIters, v.Began, v.Reset = vr.Generation, vr.Loop.Iteration, vr.Began, vr.Reset
		// A loop that has started can be reset once this run of the view has ended.
		v.CanReset = vr.Loop.Feature != "" && rec.Final() && canPublish
		if v.CanReset {
			v.ResetAction = stage.JobHref(rec.Tenant, rec.Batch, rec.ACID) + "/reset"
		}
	}
	if v.CanSpotcheck || v.CanReset {
		v.CSRF = req.CSRF()
	}
	return v, nil
}

// rubricOf is the rubric a view was judged with, the built-in one if it cannot be read.
func rubricOf(ctx context.Context, env stage.PageEnv, tenant string, rs *rubricwire.Spec) *argus.Rubric {
	if rs.Rubric.SHA256 != "" {
		data, err := env.ReadBlob(ctx, tenant, rs.Rubric.SHA256)
		if err == nil {
			if parsed, err := argus.ParseRubric(data); err == nil {
				return parsed
			}
		}
		env.Log().Warn("rubric unreadable, showing the built-in one", "tenant", tenant, "feature", rs.Feature, "err", err)
	}
	return argus.DefaultRubric()
}

// JobActions implements stage.PageActing: a view's HE-2 spot-check and its loop reset.
func (Kind) JobActions() map[string]stage.PageAction {
	return map[string]stage.PageAction{
		"spotcheck": {What: "A spot-check is recorded", Do: spotcheck},
		"reset":     {What: "A loop is reset", Do: resetView},
	}
}

// viewOf is a job's view spec when it is a view that can take a form's input; a reply
// of not found otherwise.
func viewOf(rec *records.Job) (*rubricwire.Spec, bool) {
	rs := rubricwire.SpecOf(rec.Spec.KindPart)
	return rs, rs != nil && rs.Blocked == ""
}

// spotcheck records a reviewer's HE-2 decision on a sign-off that waits for one.
func spotcheck(ctx context.Context, env stage.PageEnv, rec *records.Job, form url.Values, by string) (stage.PageReply, error) {
	rs, ok := viewOf(rec)
	if !ok {
		return stage.PageReply{Code: http.StatusNotFound}, nil
	}
	if rec.Status != events.StatusAwaitingSpotcheck {
		return stage.PageReply{Code: http.StatusConflict, Title: "Nothing to spot-check", Message: "This view's sign-off is not waiting for a person (its status is " + string(rec.Status) + ")."}, nil
	}
	pub := env.Publisher()
	if pub == nil {
		return stage.PageReply{Code: http.StatusServiceUnavailable, Title: "Read-only console", Message: "This console cannot publish spot-checks; use `tribunal spotcheck`."}, nil
	}
	decision, dim := form.Get("decision"), form.Get("dimension")
	approved := decision == "approve"
	if !approved {
		if decision != "reject" {
			return stage.PageReply{Code: http.StatusBadRequest, Title: "Unknown decision", Message: "Approve, or reject naming the dimension the judge got wrong."}, nil
		}
		known := false
		for _, n := range rubricOf(ctx, env, rec.Tenant, rs).DimensionNames() {
			known = known || n == dim
		}
		if !known {
			return stage.PageReply{Code: http.StatusBadRequest, Title: "Which dimension?", Message: "A rejection names the rubric dimension the judge got wrong."}, nil
		}
	} else {
		dim = ""
	}
	tenant, batch, job := rec.Tenant, rec.Batch, rec.ACID
	if err := commands.Spotcheck(pub, tenant, batch, job, approved, dim, by); err != nil {
		return stage.PageReply{}, err
	}
	env.AwaitApplied(ctx, func(ctx context.Context) (bool, error) {
		rec, err := env.LoadJob(ctx, tenant, batch, job)
		return rec != nil && rec.Status != events.StatusAwaitingSpotcheck, err
	})
	env.Log().Info("spot-check recorded", "tenant", tenant, "batch", batch, "job", job, "approved", approved, "dimension", dim, "by", strings.TrimPrefix(by, "console:"))
	return stage.PageReply{Redirect: stage.JobHref(tenant, batch, job) + "?sent=" + url.QueryEscape(decision)}, nil
}

// resetView starts a new loop of a rubric view (view.reset), from the job page of one of
// its runs: the way out of a spent iteration budget.
func resetView(ctx context.Context, env stage.PageEnv, rec *records.Job, form url.Values, by string) (stage.PageReply, error) {
	rs, ok := viewOf(rec)
	if !ok {
		return stage.PageReply{Code: http.StatusNotFound}, nil
	}
	if !rec.Final() {
		return stage.PageReply{Code: http.StatusConflict, Title: "Still running", Message: "This run of the view has not ended yet (its status is " + string(rec.Status) + "); reset its loop once it has."}, nil
	}
	pub := env.Publisher()
	if pub == nil {
		return stage.PageReply{Code: http.StatusServiceUnavailable, Title: "Read-only console", Message: "This console cannot publish; use `tribunal view-reset`."}, nil
	}
	reason := strings.TrimSpace(form.Get("reason"))
	if len(reason) > 2000 {
		return stage.PageReply{Code: http.StatusBadRequest, Title: "Reason too long", Message: "Say why in at most 2,000 characters."}, nil
	}
	tenant, batch, job := rec.Tenant, rec.Batch, rec.ACID
	loop, err := commands.ResetView(ctx, env.Buckets(), pub, tenant, batch, job, by, reason)
	if err != nil {
		return stage.PageReply{Code: http.StatusConflict, Title: "Nothing to reset", Message: err.Error()}, nil
	}
	if vb := env.Buckets().Views; vb != nil {
		key := views.Key(tenant, rs)
		env.AwaitApplied(ctx, func(ctx context.Context) (bool, error) {
			v, _, err := views.Load(ctx, vb, key)
			return v.Generation > loop, err
		})
	}
	env.Log().Info("view loop reset", "tenant", tenant, "batch", batch, "job", job, "loop", loop, "by", strings.TrimPrefix(by, "console:"))
	return stage.PageReply{Redirect: stage.JobHref(tenant, batch, job) + "?sent=reset&loop=" + strconv.Itoa(loop)}, nil
}
