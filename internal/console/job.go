package console

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// jobData is one AC's page: the part every kind shares, the section of the job's kind
// (stage.Paging) and the judge calls.
type jobData struct {
	Tenant      string    `json:"tenant,omitempty"`
	Batch       string    `json:"batch,omitempty"`
	Job         string    `json:"job,omitempty"`
	Kind        string    `json:"kind"`
	Status      string    `json:"status"`
	Final       bool      `json:"final,omitempty"`
	BlockStage  string    `json:"block_stage,omitempty"`
	BlockReason string    `json:"block_reason,omitempty"`
	Criterion   string    `json:"criterion,omitempty"`
	SubmittedAt time.Time `json:"submitted_at"`
	DecidedAt   time.Time `json:"decided_at"`
	DecidedBy   string    `json:"decided_by,omitempty"`
	Judges      []string  `json:"judges,omitempty"`
	Iteration   int       `json:"iteration"`
	// Section is the kind's section of the page (stage.PageSection.Data), nil for a kind
	// without one; the JSON carries it under the kind's name, after the iteration.
	Section any `json:"-"`
	// Calls are the judge calls of every kind, each with its prompt and answer a page away.
	Calls []callView `json:"calls,omitempty"`
}

// MarshalJSON writes the page's JSON with the kind's section under the kind's name,
// where the shipped kinds' fields stood before they supplied their own sections.
func (d jobData) MarshalJSON() ([]byte, error) {
	type common jobData // without this method
	c := common(d)
	c.Calls = nil
	out, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	out = out[:len(out)-1] // the closing brace
	if d.Section != nil {
		key, _ := json.Marshal(d.Kind)
		sec, err := json.Marshal(d.Section)
		if err != nil {
			return nil, fmt.Errorf("the %s section of job %s: %w", d.Kind, d.Job, err)
		}
		out = append(append(append(append(out, ','), key...), ':'), sec...)
	}
	if len(d.Calls) > 0 {
		calls, err := json.Marshal(d.Calls)
		if err != nil {
			return nil, err
		}
		out = append(append(out, `,"calls":`...), calls...)
	}
	return append(out, '}'), nil
}

func (s *server) job(w http.ResponseWriter, r *http.Request, c caller) {
	d, v, ok := s.jobPage(w, r, c)
	if !ok {
		return
	}
	v.Page = d
	s.render(w, r, http.StatusOK, "job.html", v)
}

// jobPage is one AC's page, with its kind's section; ok is false when it answered
// already (a 404).
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
	// Each kind may have a section of its own; a kind without one shows the common part only.
	if k, err := registry.Lookup(rec.Spec.Kind); err == nil {
		if p, ok := k.(stage.Paging); ok {
			sec, err := p.JobSection(ctx, pageEnv{s}, rec, stage.PageRequest{Batch: h, Query: r.URL.Query(), CSRF: func() string { return s.auth.csrf(c) }})
			if err != nil {
				s.fail(w, r, err)
				return jobData{}, view{}, false
			}
			d.Section, v.Refresh = sec.Data, sec.Refresh
		}
	}
	if rec.Status == events.StatusPending {
		v.Refresh = s.refresh
	}
	return d, v, true
}

// jobAction answers a form posted on a job page (POST <job page>/<action>) with the
// action of that name of the job's kind (stage.PageActing), once the caller's team, the
// job's name and the form (the console's own: origin and CSRF token) are checked and the
// job exists.
func (s *server) jobAction(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, _, ok := s.scope(w, r, c)
	if !ok {
		return
	}
	job, name := r.PathValue("job"), r.PathValue("action")
	if events.ValidateName(job) != nil {
		s.notFound(w, r)
		return
	}
	// What the form does, for its refusal: the action of that name of any kind, since
	// the job is read only once the form is known to be the console's.
	what := "A form is posted"
	for _, k := range registry.All() {
		if a, ok := k.(stage.PageActing); ok {
			if act, ok := a.JobActions()[name]; ok {
				what = act.What
				break
			}
		}
	}
	if !sameOrigin(r) || !s.auth.checkCSRF(c, r.PostFormValue("csrf")) {
		s.errorPage(w, r, http.StatusForbidden, "Refused", what+" only from the console's own form. Reload the page and try again.")
		return
	}
	rec, err := s.loadJob(r.Context(), tenant, batch, job)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	var act stage.PageAction
	if rec != nil {
		if k, err := registry.Lookup(rec.Spec.Kind); err == nil {
			if a, ok := k.(stage.PageActing); ok {
				act = a.JobActions()[name]
			}
		}
	}
	if act.Do == nil {
		s.notFound(w, r)
		return
	}
	reply, err := act.Do(r.Context(), pageEnv{s}, rec, r.PostForm, "console:"+c.name)
	switch {
	case err != nil:
		s.fail(w, r, err)
	case reply.Redirect != "":
		http.Redirect(w, r, reply.Redirect, http.StatusSeeOther)
	case reply.Code == http.StatusNotFound:
		s.notFound(w, r)
	default:
		s.errorPage(w, r, reply.Code, reply.Title, reply.Message)
	}
}

// pageEnv is what the console hands a kind's section and its forms (stage.PageEnv).
type pageEnv struct{ s *server }

func (e pageEnv) SourceArtifact(ctx context.Context, tenant, label string, src events.Source) stage.PageArtifact {
	return e.s.sourceArtifact(ctx, tenant, label, src)
}

func (e pageEnv) BlobArtifact(ctx context.Context, tenant, label string, b *events.Blob) *stage.PageArtifact {
	return e.s.blobArtifact(ctx, tenant, label, b)
}

func (e pageEnv) Diff(ours, reference string) any { return sideBySide(ours, reference) }

func (e pageEnv) ReadBlob(ctx context.Context, tenant, sha256 string) ([]byte, error) {
	data, _, err := blob.ReadAll(ctx, e.s.cfg.Store, blob.Ref{Tenant: tenant, SHA256: sha256})
	return data, err
}

func (e pageEnv) Runs(ctx context.Context, rec *records.Job) ([]*records.Job, error) {
	return e.s.viewHistory(ctx, rec)
}

func (e pageEnv) LoadJob(ctx context.Context, tenant, batch, job string) (*records.Job, error) {
	return e.s.loadJob(ctx, tenant, batch, job)
}

func (e pageEnv) Buckets() kv.Buckets { return e.s.cfg.Buckets }

func (e pageEnv) Publisher() stage.Publisher {
	if e.s.cfg.Pub == nil {
		return nil
	}
	return e.s.cfg.Pub
}

func (e pageEnv) AwaitApplied(ctx context.Context, done func(context.Context) (bool, error)) {
	e.s.awaitApplied(ctx, done)
}

func (e pageEnv) Log() *slog.Logger { return e.s.log }

// kindSections is the job page's dispatch to the kinds' sections (stage.Paging): each
// kind's template, and "kind-section", which runs the one of the page's kind.
func kindSections() string {
	var b strings.Builder
	var dispatch strings.Builder
	dispatch.WriteString(`{{define "kind-section"}}`)
	for _, k := range registry.All() {
		p, ok := k.(stage.Paging)
		if !ok {
			continue
		}
		b.WriteString(p.JobTemplate())
		fmt.Fprintf(&dispatch, `{{if eq .Kind %q}}{{with .Section}}{{template %q .}}{{end}}{{end}}`, string(k.Name()), "job-"+string(k.Name()))
	}
	dispatch.WriteString(`{{end}}`)
	return b.String() + dispatch.String()
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
