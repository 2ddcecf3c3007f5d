package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kinds"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

type indexData struct {
	Batches    []batchRow
	Total      int
	ShowTenant bool
	Tenant     string
}

func (s *server) index(w http.ResponseWriter, r *http.Request, c caller) {
	s.listPage(w, r, c, "")
}

func (s *server) tenantIndex(w http.ResponseWriter, r *http.Request, c caller) {
	tenant := r.PathValue("tenant")
	if events.ValidateTenant(tenant) != nil || !c.sees(tenant) {
		s.notFound(w, r)
		return
	}
	s.listPage(w, r, c, tenant)
}

func (s *server) listPage(w http.ResponseWriter, r *http.Request, c caller, only string) {
	rows, total, err := s.listBatches(r.Context(), c, only)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	v := view{Title: "Batches", Page: indexData{Batches: rows, Total: total, ShowTenant: c.all && only == "", Tenant: only}}
	if only != "" {
		v.Title = "Batches of " + only
		v.Crumbs = []crumb{{Label: only, Href: "/t/" + only + "/"}}
	} else if !c.all {
		v.Title = "Batches of " + c.tenant
	}
	for _, b := range rows {
		if !b.Complete {
			v.Refresh = s.refresh
			break
		}
	}
	s.render(w, r, http.StatusOK, "index.html", v)
}

// scope reads and checks a page's tenant and batch: malformed, foreign and unknown all
// end in the same 404.
func (s *server) scope(w http.ResponseWriter, r *http.Request, c caller) (tenant, batch string, h *records.Batch, ok bool) {
	tenant, batch = r.PathValue("tenant"), r.PathValue("batch")
	if events.ValidateTenant(tenant) != nil || events.ValidateName(batch) != nil || !c.sees(tenant) {
		s.notFound(w, r)
		return "", "", nil, false
	}
	h, _, err := records.New(s.cfg.Buckets).Header(r.Context(), tenant, batch)
	if err != nil {
		s.fail(w, r, err)
		return "", "", nil, false
	}
	if h == nil {
		s.notFound(w, r)
		return "", "", nil, false
	}
	return tenant, batch, h, true
}

func batchCrumbs(tenant, batch string) []crumb {
	return []crumb{{Label: tenant, Href: "/t/" + tenant + "/"}, {Label: batch, Href: batchHref(tenant, batch)}}
}

type rowView struct {
	client.Row
	Href string
}

type manifestLink struct {
	Kind string
	Href string
	Size int64
}

type batchData struct {
	Tenant, Batch, Source string
	CreatedAt             time.Time
	Done, Total           int
	Complete              bool
	Completion            *records.Completion
	ExitMeaning           string
	Rows                  []rowView
	Judges                []string
	Manifests             []manifestLink
	Awaiting              []rowView
	AuditHref             string
}

// exitMeaning is the batch exit code as a sentence.
func exitMeaning(code int) string {
	switch code {
	case 0:
		return "clean"
	case 1:
		return "findings"
	case 3:
		return "schema violation"
	case 4:
		return "every AC blocked"
	}
	return "unknown"
}

func (s *server) batch(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, h, ok := s.scope(w, r, c)
	if !ok {
		return
	}
	ctx := r.Context()
	d := batchData{Tenant: tenant, Batch: batch, Source: h.Source, CreatedAt: h.CreatedAt, Total: h.Size,
		Completion: h.Completion, AuditHref: batchHref(tenant, batch) + "/audit"}
	v := view{Title: "Batch " + batch, Crumbs: batchCrumbs(tenant, batch)}
	if h.Completion != nil {
		res, err := client.Load(ctx, s.cfg.Buckets, s.cfg.Store, tenant, batch)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		d.Complete, d.Done, d.Judges = true, h.Size, res.Judges
		d.ExitMeaning = exitMeaning(h.Completion.Summary.ExitCode)
		for _, row := range res.Rows {
			d.Rows = append(d.Rows, rowView{Row: row, Href: jobHref(tenant, batch, row.ACID)})
		}
		names := make([]string, 0, len(h.Completion.Manifests))
		for k := range h.Completion.Manifests {
			names = append(names, string(k))
		}
		sort.Strings(names)
		for _, k := range names {
			m := h.Completion.Manifests[events.Kind(k)]
			d.Manifests = append(d.Manifests, manifestLink{Kind: k, Href: blobHref(tenant, m.SHA256), Size: m.Size})
		}
	} else {
		store := records.New(s.cfg.Buckets)
		recs, err := store.LoadJobs(ctx, tenant, batch)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		sort.Slice(recs, func(i, j int) bool { return recs[i].Index < recs[j].Index })
		if d.Done, err = store.Progress(ctx, tenant, batch, h.Size); err != nil {
			s.fail(w, r, err)
			return
		}
		for _, rec := range recs {
			rv := rowView{Row: runningRow(rec), Href: jobHref(tenant, batch, rec.ACID)}
			d.Rows = append(d.Rows, rv)
			if rec.Status == events.StatusAwaitingSpotcheck {
				d.Awaiting = append(d.Awaiting, rv)
			}
		}
		if len(d.Awaiting) == 0 {
			v.Refresh = s.refresh
		}
	}
	v.Page = d
	s.render(w, r, http.StatusOK, "batch.html", v)
}

// runningRow is a job of a batch still in progress: what its record says so far, as its
// kind reads it (the same rows `tribunal results` prints once the batch completes).
func runningRow(r *records.Job) client.Row {
	if k, err := kinds.Lookup(r.Spec.Kind); err == nil {
		return k.Row(r)
	}
	return kind.BaseRow(r)
}

type auditData struct {
	Tenant, Batch string
	Available     bool
	Error         string
	Text          string
	// Verdict is "passed" or "failed" when the result says (an OK() bool method, as
	// *audit.Report has), "" otherwise.
	Verdict string
}

func (s *server) audit(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, _, ok := s.scope(w, r, c)
	if !ok {
		return
	}
	d := auditData{Tenant: tenant, Batch: batch, Available: s.cfg.Audit != nil}
	v := view{Title: "Audit of " + batch, Crumbs: append(batchCrumbs(tenant, batch), crumb{Label: "audit", Href: batchHref(tenant, batch) + "/audit"})}
	code := http.StatusOK
	if d.Available {
		res, err := s.cfg.Audit(r.Context(), tenant, batch)
		switch {
		case err != nil:
			s.log.Error("audit", "tenant", tenant, "batch", batch, "err", err)
			d.Error, code = err.Error(), http.StatusBadGateway
		default:
			d.Text = auditText(res)
			if v, ok := res.(interface{ OK() bool }); ok {
				d.Verdict = "failed"
				if v.OK() {
					d.Verdict = "passed"
				}
			}
		}
	}
	v.Page = d
	s.render(w, r, code, "audit.html", v)
}

// auditText renders an audit result of unknown shape as text; html/template escapes it.
func auditText(res any) string {
	switch x := res.(type) {
	case nil:
		return "(the audit returned nothing)"
	case string:
		return x
	case []byte:
		return string(x)
	case fmt.Stringer:
		return x.String()
	}
	// The page escapes the text, so the JSON need not (and "<" reads better than \u003c).
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return fmt.Sprintf("%+v", res)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}
