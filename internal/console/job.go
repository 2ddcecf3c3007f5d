package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	rubriccommands "github.com/tribunal-dev/tribunal/pkg/kind/rubric/commands"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/kind/critic"
	"github.com/tribunal-dev/tribunal/pkg/kind/equivalence"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/views"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

type jobData struct {
	Tenant      string      `json:"tenant,omitempty"`
	Batch       string      `json:"batch,omitempty"`
	Job         string      `json:"job,omitempty"`
	Kind        string      `json:"kind"`
	Status      string      `json:"status"`
	Final       bool        `json:"final,omitempty"`
	BlockStage  string      `json:"block_stage,omitempty"`
	BlockReason string      `json:"block_reason,omitempty"`
	Criterion   string      `json:"criterion,omitempty"`
	SubmittedAt time.Time   `json:"submitted_at"`
	DecidedAt   time.Time   `json:"decided_at"`
	DecidedBy   string      `json:"decided_by,omitempty"`
	Judges      []string    `json:"judges,omitempty"`
	Iteration   int         `json:"iteration"`
	AB          *abView     `json:"ab,omitempty"`
	Rubric      *rubricView `json:"rubric,omitempty"`
	Critic      *criticView `json:"critic,omitempty"`
	Equivalence *equivView  `json:"equivalence,omitempty"`
	// Calls are the judge calls of every kind, each with its prompt and answer a page away.
	Calls []callView `json:"calls,omitempty"`
}

func (s *server) job(w http.ResponseWriter, r *http.Request, c caller) {
	d, v, ok := s.jobPage(w, r, c)
	if !ok {
		return
	}
	v.Page = d
	s.render(w, r, http.StatusOK, "job.html", v)
}

// jobPage is one AC's page, by kind; ok is false when it answered already (a 404).
func (s *server) jobPage(w http.ResponseWriter, r *http.Request, c caller) (jobData, view, bool) {
	tenant, batch, h, ok := s.scope(w, r, c)
	if !ok {
		return jobData{}, view{}, false
	}
	job := r.PathValue("job")
	if events.ValidateName(job) != nil {
		s.notFound(w, r)
		return jobData{}, view{}, false
	}
	ctx := r.Context()
	rec, err := s.loadJob(ctx, tenant, batch, job)
	if err != nil {
		s.fail(w, r, err)
		return jobData{}, view{}, false
	}
	if rec == nil || rec.Tenant != tenant {
		s.notFound(w, r)
		return jobData{}, view{}, false
	}
	d := jobData{Tenant: tenant, Batch: batch, Job: job, Kind: string(rec.Spec.Kind), Status: string(rec.Status), Final: rec.Final(),
		BlockStage: rec.BlockStage, BlockReason: rec.BlockReason, Criterion: rec.Spec.Criterion, SubmittedAt: rec.SubmittedAt,
		DecidedAt: rec.DecidedAt, DecidedBy: rec.DecidedBy, Judges: rec.Judges, Iteration: rec.Iteration, Calls: callsOf(rec)}
	v := view{Title: job + " in " + batch, Crumbs: append(batchCrumbs(tenant, batch), crumb{Label: job, Href: jobHref(tenant, batch, job)})}
	// Each kind has a page of its own; a kind without one shows the common part only.
	if page, ok := kindPages[rec.Spec.Kind]; ok {
		if err := page(s, ctx, &d, &v, rec, h, r, c); err != nil {
			s.fail(w, r, err)
			return jobData{}, view{}, false
		}
	}
	if rec.Status == events.StatusPending {
		v.Refresh = s.refresh
	}
	return d, v, true
}

// kindPages fill a kind's part of the job page.
var kindPages = map[events.Kind]func(s *server, ctx context.Context, d *jobData, v *view, rec *records.Job, h *records.Batch, r *http.Request, c caller) error{
	events.KindAB: func(s *server, ctx context.Context, d *jobData, _ *view, rec *records.Job, h *records.Batch, _ *http.Request, _ caller) error {
		d.AB = s.abPage(ctx, rec, h)
		return nil
	},
	events.KindRubric: func(s *server, ctx context.Context, d *jobData, v *view, rec *records.Job, _ *records.Batch, r *http.Request, c caller) error {
		var err error
		if d.Rubric, err = s.rubricPage(ctx, rec, c); err != nil {
			return err
		}
		d.Rubric.Sent = r.URL.Query().Get("sent")
		if d.Rubric.Sent != "" && rec.Status == events.StatusAwaitingSpotcheck {
			v.Refresh = 1
		}
		if d.Rubric.Sent == "reset" {
			// The loop the form reset: recorded once the view is past it.
			loop, _ := strconv.Atoi(r.URL.Query().Get("loop"))
			d.Rubric.ResetLoop, d.Rubric.ResetDone = loop, d.Rubric.ViewLoop > loop
			if !d.Rubric.ResetDone {
				v.Refresh = 1
			}
		}
		return nil
	},
	events.KindCritic: func(s *server, ctx context.Context, d *jobData, _ *view, rec *records.Job, _ *records.Batch, _ *http.Request, _ caller) error {
		d.Critic = s.criticPage(ctx, rec)
		return nil
	},
	events.KindEquivalence: func(s *server, ctx context.Context, d *jobData, _ *view, rec *records.Job, _ *records.Batch, _ *http.Request, _ caller) error {
		d.Equivalence = s.equivPage(ctx, rec)
		return nil
	},
}

// abView is an ab comparison un-blinded: the reviewer sees which artifact was ours.
type abView struct {
	Ours          artifactView   `json:"ours"`
	Reference     artifactView   `json:"reference"`
	Assignment    string         `json:"assignment,omitempty"`
	RawWinner     string         `json:"raw_winner,omitempty"`
	Winner        string         `json:"winner,omitempty"`
	Confidence    *float64       `json:"confidence,omitempty"`
	Threshold     float64        `json:"threshold"`
	Positions     string         `json:"positions,omitempty"`
	Suggest       bool           `json:"suggest,omitempty"`
	Tag           string         `json:"tag,omitempty"`
	Impact        string         `json:"impact,omitempty"`
	BiggestGap    string         `json:"biggest_gap,omitempty"`
	Agreement     string         `json:"agreement,omitempty"`
	Consistent    *bool          `json:"consistent,omitempty"`
	Status        string         `json:"status"`
	BlockedReason string         `json:"blocked_reason,omitempty"`
	Votes         []voteView     `json:"votes,omitempty"`
	Suggestion    *ab.Suggestion `json:"suggestion,omitempty"`
	JudgeInfo     *ab.JudgeInfo  `json:"judge_info,omitempty"`
	Answer        string         `json:"answer,omitempty"`
	// Slots says which artifact each slot was, for the judge's words in BiggestGap.
	Slots string `json:"slots,omitempty"`
	// Diff is ours against the reference, line by line, when both are text.
	Diff *textDiff `json:"diff,omitempty"`
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

func (s *server) abPage(ctx context.Context, rec *records.Job, h *records.Batch) *abView {
	spec := ab.SpecOf(rec.Spec.KindPart)
	v := &abView{}
	res, err := ab.ResultOf(rec)
	if err != nil {
		s.log.Warn("job page", "job", rec.Key(), "err", err)
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
		v.Ours = s.sourceArtifact(ctx, rec.Tenant, "ours", spec.Ours)
		v.Reference = s.sourceArtifact(ctx, rec.Tenant, "reference", spec.Reference)
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
	if textual(v.Ours) && textual(v.Reference) {
		v.Diff = sideBySide(v.Ours.Text, v.Reference.Text)
	}
	if h.Completion != nil && h.Completion.ManifestRef != nil {
		v.Suggestion = s.suggestionFor(ctx, rec.Tenant, rec.ACID, *h.Completion.ManifestRef)
	}
	return v
}

// suggestionFor finds an AC's suggestion in its batch's ab manifest: the manifest, not
// the job record, is where suggestions are numbered and worded.
func (s *server) suggestionFor(ctx context.Context, tenant, acID string, ref events.Blob) *ab.Suggestion {
	data, _, err := blob.ReadAll(ctx, s.cfg.Store, blob.Ref{Tenant: tenant, SHA256: ref.SHA256})
	if err != nil {
		s.log.Warn("read ab manifest", "tenant", tenant, "err", err)
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

// rubricView is one rubric view in this batch: the render beside the reference and the
// previous render, the last verdict's dimensions, the loop, the sign-off and, while the
// sign-off waits for a person, the HE-2 form.
type rubricView struct {
	Feature         string               `json:"feature,omitempty"`
	View            string               `json:"view,omitempty"`
	Mode            string               `json:"mode,omitempty"`
	Route           string               `json:"route,omitempty"`
	Adapter         string               `json:"adapter,omitempty"`
	Width           int                  `json:"width"`
	Height          int                  `json:"height"`
	ReferenceStatus string               `json:"reference_status,omitempty"`
	ReferenceSource string               `json:"reference_source,omitempty"`
	Render          *artifactView        `json:"render,omitempty"`
	Reference       *artifactView        `json:"reference,omitempty"`
	Previous        *artifactView        `json:"previous,omitempty"`
	PreviousNote    string               `json:"previous_note,omitempty"`
	Candidate       *artifactView        `json:"candidate,omitempty"`
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

func (s *server) rubricPage(ctx context.Context, rec *records.Job, c caller) (*rubricView, error) {
	rs := rubricwire.SpecOf(rec.Spec.KindPart)
	v := &rubricView{}
	if rs == nil {
		return v, nil
	}
	v.Feature, v.View, v.Mode, v.Route, v.Adapter = rs.Feature, rs.Target+"/"+rs.State+"/"+rs.Appearance, rs.Mode, rs.Route, rs.Adapter
	v.Width, v.Height, v.ReferenceStatus, v.ReferenceSource = rs.Width, rs.Height, rs.ReferenceStatus, rs.ReferenceSource
	v.Reference = s.blobArtifact(ctx, rec.Tenant, "reference", rs.Reference)
	rubric := s.rubricOf(ctx, rec.Tenant, rs)
	params := rubric.LoopParams()
	v.RequiredPasses, v.MaxIters = params.RequiredPasses, params.MaxIterations
	if rs.MaxIterations > 0 {
		v.MaxIters = rs.MaxIterations
	}
	v.DimNames = rubric.DimensionNames()
	rb, err := rubricState(rec)
	if err != nil {
		return nil, err
	}
	if rb != nil {
		v.Render = s.blobArtifact(ctx, rec.Tenant, "render", rb.Render)
		v.Candidate = s.blobArtifact(ctx, rec.Tenant, "candidate reference", rb.Candidate)
		v.Verdict, v.Loop, v.Decision, v.SignOff = rb.LastVerdict, rb.Loop, rb.Decision, rb.SignOff
		for dim, n := range rb.Loop.Attempts {
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
		names := rubric.DimensionNames()
		for n := range v.Verdict.Dimensions {
			if _, ok := rubric.Dimensions[n]; !ok {
				names = append(names, n)
			}
		}
		for _, n := range names {
			ds, ok := v.Verdict.Dimensions[n]
			if !ok {
				continue
			}
			th := rubric.Threshold(n)
			v.Dimensions = append(v.Dimensions, dimView{Name: n, Score: ds.Score, Threshold: th, Pass: ds.Score >= th,
				Anchor: ds.Anchor, Evidence: ds.Evidence, Frozen: frozen[n], Attempts: v.Loop.Attempts[n]})
		}
	}
	history, err := s.viewHistory(ctx, rec)
	if err != nil {
		return nil, err
	}
	for _, hr := range history {
		row := historyRow{Batch: hr.Batch, Href: jobHref(hr.Tenant, hr.Batch, hr.ACID), SubmittedAt: hr.SubmittedAt, Status: string(hr.Status), Current: hr.Batch == rec.Batch}
		if hs, _ := rubricState(hr); hs != nil {
			row.Iteration = hs.Loop.Iteration
			if hs.Decision != nil {
				row.Outcome, row.Fix = hs.Decision.Outcome, hs.Decision.FixDimensions
			}
			if hs.Render != nil {
				row.Render = blobHref(hr.Tenant, hs.Render.SHA256)
			}
		}
		v.History = append(v.History, row)
	}
	// The previous render: the one the judge saw, once the aggregator records it;
	// until then the last render of this view in an earlier run.
	switch {
	case rb != nil && rb.Previous != nil:
		v.Previous = s.blobArtifact(ctx, rec.Tenant, "previous render", rb.Previous)
		v.PreviousNote = "the previous render the judge ranked this one against"
	default:
		for _, hr := range history {
			if hs, _ := rubricState(hr); hr.SubmittedAt.Before(rec.SubmittedAt) && hs != nil && hs.Render != nil {
				v.Previous = s.blobArtifact(ctx, rec.Tenant, "previous render", hs.Render)
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
	v.Awaiting = rec.Status == events.StatusAwaitingSpotcheck
	v.CanSpotcheck = v.Awaiting && s.cfg.Pub != nil
	if v.CanSpotcheck {
		v.Action = jobHref(rec.Tenant, rec.Batch, rec.ACID) + "/spotcheck"
	}
	if s.cfg.Buckets.Views != nil && rs.Blocked == "" {
		vr, _, err := views.Load(ctx, s.cfg.Buckets.Views, views.Key(rec.Tenant, rs))
		if err != nil {
			return nil, err
		}
		v.ViewLoop, v.ViewIters, v.Began, v.Reset = vr.Generation, vr.Loop.Iteration, vr.Began, vr.Reset
		// A loop that has started can be reset once this run of the view has ended.
		v.CanReset = vr.Loop.Feature != "" && rec.Final() && s.cfg.Pub != nil
		if v.CanReset {
			v.ResetAction = jobHref(rec.Tenant, rec.Batch, rec.ACID) + "/reset"
		}
	}
	if v.CanSpotcheck || v.CanReset {
		v.CSRF = s.auth.csrf(c)
	}
	return v, nil
}

// rubricOf is the rubric a view was judged with, the built-in one if it cannot be read.
func (s *server) rubricOf(ctx context.Context, tenant string, rs *rubricwire.Spec) *argus.Rubric {
	if rs.Rubric.SHA256 != "" {
		data, _, err := blob.ReadAll(ctx, s.cfg.Store, blob.Ref{Tenant: tenant, SHA256: rs.Rubric.SHA256})
		if err == nil {
			if parsed, err := argus.ParseRubric(data); err == nil {
				return parsed
			}
		}
		s.log.Warn("rubric unreadable, showing the built-in one", "tenant", tenant, "feature", rs.Feature, "err", err)
	}
	return argus.DefaultRubric()
}

// rubricPost checks a form post on a rubric view's job page (the spot-check and the
// reset): the caller's team, the job's name, the console's own form (origin and CSRF
// token), and that the job is a view. ok false means the answer was written.
func (s *server) rubricPost(w http.ResponseWriter, r *http.Request, c caller, action string) (tenant, batch, job string, rec *records.Job, ok bool) {
	tenant, batch, _, ok = s.scope(w, r, c)
	if !ok {
		return "", "", "", nil, false
	}
	job = r.PathValue("job")
	if events.ValidateName(job) != nil {
		s.notFound(w, r)
		return "", "", "", nil, false
	}
	if !sameOrigin(r) || !s.auth.checkCSRF(c, r.PostFormValue("csrf")) {
		s.errorPage(w, r, http.StatusForbidden, "Refused", action+" only from the console's own form. Reload the page and try again.")
		return "", "", "", nil, false
	}
	rec, err := s.loadJob(r.Context(), tenant, batch, job)
	if err != nil {
		s.fail(w, r, err)
		return "", "", "", nil, false
	}
	if rec == nil || rubricwire.SpecOf(rec.Spec.KindPart) == nil || rubricwire.SpecOf(rec.Spec.KindPart).Blocked != "" {
		s.notFound(w, r)
		return "", "", "", nil, false
	}
	return tenant, batch, job, rec, true
}

// spotcheck records a reviewer's HE-2 decision on a sign-off that waits for one.
func (s *server) spotcheck(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, job, rec, ok := s.rubricPost(w, r, c, "A spot-check is recorded")
	if !ok {
		return
	}
	if rec.Status != events.StatusAwaitingSpotcheck {
		s.errorPage(w, r, http.StatusConflict, "Nothing to spot-check", "This view's sign-off is not waiting for a person (its status is "+string(rec.Status)+").")
		return
	}
	if s.cfg.Pub == nil {
		s.errorPage(w, r, http.StatusServiceUnavailable, "Read-only console", "This console cannot publish spot-checks; use `tribunal spotcheck`.")
		return
	}
	decision, dim := r.PostFormValue("decision"), r.PostFormValue("dimension")
	approved := decision == "approve"
	if !approved {
		if decision != "reject" {
			s.errorPage(w, r, http.StatusBadRequest, "Unknown decision", "Approve, or reject naming the dimension the judge got wrong.")
			return
		}
		known := false
		for _, n := range s.rubricOf(r.Context(), tenant, rubricwire.SpecOf(rec.Spec.KindPart)).DimensionNames() {
			known = known || n == dim
		}
		if !known {
			s.errorPage(w, r, http.StatusBadRequest, "Which dimension?", "A rejection names the rubric dimension the judge got wrong.")
			return
		}
	} else {
		dim = ""
	}
	if err := rubriccommands.Spotcheck(s.cfg.Pub, tenant, batch, job, approved, dim, "console:"+c.name); err != nil {
		s.fail(w, r, err)
		return
	}
	s.awaitApplied(r.Context(), func(ctx context.Context) (bool, error) {
		rec, err := s.loadJob(ctx, tenant, batch, job)
		return rec != nil && rec.Status != events.StatusAwaitingSpotcheck, err
	})
	s.log.Info("spot-check recorded", "tenant", tenant, "batch", batch, "job", job, "approved", approved, "dimension", dim, "by", c.name)
	http.Redirect(w, r, jobHref(tenant, batch, job)+"?sent="+url.QueryEscape(decision), http.StatusSeeOther)
}

// resetView starts a new loop of a rubric view (view.reset), from the job page of one of
// its runs: the way out of a spent iteration budget.
func (s *server) resetView(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, job, rec, ok := s.rubricPost(w, r, c, "A loop is reset")
	if !ok {
		return
	}
	if !rec.Final() {
		s.errorPage(w, r, http.StatusConflict, "Still running", "This run of the view has not ended yet (its status is "+string(rec.Status)+"); reset its loop once it has.")
		return
	}
	if s.cfg.Pub == nil {
		s.errorPage(w, r, http.StatusServiceUnavailable, "Read-only console", "This console cannot publish; use `tribunal view-reset`.")
		return
	}
	reason := strings.TrimSpace(r.PostFormValue("reason"))
	if len(reason) > 2000 {
		s.errorPage(w, r, http.StatusBadRequest, "Reason too long", "Say why in at most 2,000 characters.")
		return
	}
	loop, err := rubriccommands.ResetView(r.Context(), s.cfg.Buckets, s.cfg.Pub, tenant, batch, job, "console:"+c.name, reason)
	if err != nil {
		s.errorPage(w, r, http.StatusConflict, "Nothing to reset", err.Error())
		return
	}
	if kv := s.cfg.Buckets.Views; kv != nil {
		key := views.Key(tenant, rubricwire.SpecOf(rec.Spec.KindPart))
		s.awaitApplied(r.Context(), func(ctx context.Context) (bool, error) {
			v, _, err := views.Load(ctx, kv, key)
			return v.Generation > loop, err
		})
	}
	s.log.Info("view loop reset", "tenant", tenant, "batch", batch, "job", job, "loop", loop, "by", c.name)
	http.Redirect(w, r, jobHref(tenant, batch, job)+"?sent=reset&loop="+strconv.Itoa(loop), http.StatusSeeOther)
}

// applyWait bounds how long a form's post waits for the aggregator to record what it
// sent, so the page it answers with shows the effect; behind a slower aggregator the
// page says the input was sent and reloads until it is recorded.
const applyWait = 5 * time.Second

// awaitApplied polls done until it reports the input recorded, fails, or applyWait or
// the request ends.
func (s *server) awaitApplied(ctx context.Context, done func(context.Context) (bool, error)) {
	ctx, cancel := context.WithTimeout(ctx, applyWait)
	defer cancel()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		ok, err := done(ctx)
		if ok || err != nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

type criticView struct {
	Task   string         `json:"task,omitempty"`
	Output artifactView   `json:"output"`
	Result *critic.Result `json:"result,omitempty"`
}

func (s *server) criticPage(ctx context.Context, rec *records.Job) *criticView {
	res, err := critic.ResultOf(rec)
	if err != nil {
		s.log.Warn("job page", "job", rec.Key(), "err", err)
	}
	v := &criticView{Result: res}
	if cs := critic.SpecOf(rec.Spec.KindPart); cs != nil {
		v.Task = cs.Task
		v.Output = s.sourceArtifact(ctx, rec.Tenant, "output", cs.Output)
	}
	return v
}

type equivView struct {
	Variant     string              `json:"variant,omitempty"`
	Round       int                 `json:"round"`
	MinCases    int                 `json:"min_cases"`
	RunnerModel string              `json:"runner_model,omitempty"`
	Original    artifactView        `json:"original"`
	Candidate   artifactView        `json:"candidate"`
	Report      *equivalence.Report `json:"report,omitempty"`
	Cases       []caseView          `json:"cases,omitempty"`
	Transcripts bool                `json:"transcripts,omitempty"`
}

type caseView struct {
	ID        string                  `json:"id,omitempty"`
	Tag       string                  `json:"tag,omitempty"`
	Input     string                  `json:"input,omitempty"`
	Result    *equivalence.CaseResult `json:"result,omitempty"`
	Original  *artifactView           `json:"original,omitempty"`
	Candidate *artifactView           `json:"candidate,omitempty"`
}

func (s *server) equivPage(ctx context.Context, rec *records.Job) *equivView {
	res, err := equivalence.ResultOf(rec)
	if err != nil {
		s.log.Warn("job page", "job", rec.Key(), "err", err)
	}
	if res == nil {
		res = &equivalence.Result{}
	}
	v := &equivView{}
	if len(rec.Result) > 0 {
		v.Report = &res.Report
	}
	es := equivalence.SpecOf(rec.Spec.KindPart)
	if es == nil {
		return v
	}
	v.Variant, v.Round, v.MinCases, v.RunnerModel = es.Variant, es.Round, es.MinCases, es.RunnerModel
	v.Original = s.sourceArtifact(ctx, rec.Tenant, "original document", es.Original)
	v.Candidate = s.sourceArtifact(ctx, rec.Tenant, "candidate document", es.Candidate)
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
				cv.Original = s.blobArtifact(ctx, rec.Tenant, "original transcript", &b)
			}
			if b, ok := t["candidate"]; ok {
				cv.Candidate = s.blobArtifact(ctx, rec.Tenant, "candidate transcript", &b)
			}
		}
		v.Cases = append(v.Cases, cv)
	}
	for i := range res.Report.Cases {
		if cr := &res.Report.Cases[i]; !seen[cr.CaseID] {
			v.Cases = append(v.Cases, caseView{ID: cr.CaseID, Result: cr})
		}
	}
	return v
}

// rubricState is a rubric view's loop state in its batch, nil when it has none yet.
func rubricState(rec *records.Job) (*rubric.State, error) { return rubric.StateOf(rec) }

// textual reports whether an artifact is shown as text (plain or HTML source).
func textual(a artifactView) bool { return a.Class == "text" || a.Class == "html" }
