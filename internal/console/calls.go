package console

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// A judge call as reviewers see it after un-blinding: the exact prompt and the raw
// answer, from the call record the judge service stored (the judge never sees it again),
// with which artifact each slot was.

// callView is one judge call of a job.
type callView struct {
	N                int    `json:"n"`
	Judge            string `json:"judge"`
	Label            string `json:"label,omitempty"`
	Status           string `json:"status"`
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
	LatencyMillis    int64  `json:"latency_ms,omitempty"`
	Cached           bool   `json:"cached,omitempty"`
	// Slots says which artifact each blind slot of the call was.
	Slots    string `json:"slots,omitempty"`
	Recorded bool   `json:"recorded"`
	Href     string `json:"href"`
}

// callsOf lists a job's calls for its page.
func callsOf(rec *records.Job) []callView {
	var u kind.Unblinding
	if k, err := registry.Lookup(rec.Spec.Kind); err == nil {
		u, _ = k.(kind.Unblinding)
	}
	var out []callView
	for i, c := range rec.Calls {
		v := callView{N: i, Judge: c.Judge, Label: c.Label, Status: string(c.Status), PromptTokens: c.PromptTokens, CompletionTokens: c.CompletionTokens,
			LatencyMillis: c.LatencyMillis, Cached: c.Cached, Recorded: c.Record != nil,
			Href: jobHref(rec.Tenant, rec.Batch, rec.ACID) + "/call/" + strconv.Itoa(i)}
		if u != nil {
			v.Slots = u.SlotLegend(rec, c)
		}
		out = append(out, v)
	}
	return out
}

// callData is the call page.
type callData struct {
	Tenant string            `json:"tenant"`
	Batch  string            `json:"batch"`
	Job    string            `json:"job"`
	Kind   string            `json:"kind"`
	Call   callView          `json:"call"`
	Record *judge.CallRecord `json:"record,omitempty"`
	// Note explains a missing record or a cached answer.
	Note string `json:"note,omitempty"`
}

func (s *server) callData(w http.ResponseWriter, r *http.Request, c caller) (callData, bool) {
	tenant, batch, _, ok := s.scope(w, r, c)
	if !ok {
		return callData{}, false
	}
	job := r.PathValue("job")
	n, err := strconv.Atoi(r.PathValue("n"))
	if events.ValidateName(job) != nil || err != nil || n < 0 {
		s.notFound(w, r)
		return callData{}, false
	}
	rec, err := s.loadJob(r.Context(), tenant, batch, job)
	if err != nil {
		s.fail(w, r, err)
		return callData{}, false
	}
	if rec == nil || rec.Tenant != tenant || n >= len(rec.Calls) {
		s.notFound(w, r)
		return callData{}, false
	}
	d := callData{Tenant: tenant, Batch: batch, Job: job, Kind: string(rec.Spec.Kind), Call: callsOf(rec)[n]}
	call := rec.Calls[n]
	if call.Cached {
		d.Note = "This answer came from the judge-call cache: the record is that of the call that paid for it, in an earlier batch with the same inputs."
	}
	if call.Record == nil {
		d.Note = "No record of this call was kept (it was made before tribunal kept call records, or could not be stored)."
		return d, true
	}
	data, _, err := blob.ReadAll(r.Context(), s.cfg.Store, blob.Ref{Tenant: tenant, SHA256: call.Record.SHA256})
	switch {
	case errors.Is(err, blob.ErrNotFound):
		d.Note = "The record of this call is no longer in blob storage (pruned?)."
	case err != nil:
		s.fail(w, r, err)
		return d, false
	default:
		if d.Record, err = judge.DecodeCallRecord(data); err != nil {
			d.Note = "The record of this call does not decode: " + err.Error()
		}
	}
	return d, true
}

func (s *server) call(w http.ResponseWriter, r *http.Request, c caller) {
	d, ok := s.callData(w, r, c)
	if !ok {
		return
	}
	jh := jobHref(d.Tenant, d.Batch, d.Job)
	v := view{Title: "Judge call " + strconv.Itoa(d.Call.N+1) + " of " + d.Job,
		Crumbs: append(batchCrumbs(d.Tenant, d.Batch), crumb{Label: d.Job, Href: jh}, crumb{Label: "call " + strconv.Itoa(d.Call.N+1), Href: d.Call.Href}), Page: d}
	s.render(w, r, http.StatusOK, "call.html", v)
}
