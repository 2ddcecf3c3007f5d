package console

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// The JSON API: every page's data under /api/..., with the same access rules (a bearer
// token, or the login cookie) and the same 404 for whatever the caller may not see. Keys
// are snake_case throughout.

// isAPI reports whether a request is for the JSON API.
func isAPI(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, "/api/") }

func (s *server) writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		s.log.Warn("api: write", "err", err)
	}
}

func (s *server) apiError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// apiBatches is the batch list.
type apiBatches struct {
	Batches []batchRow `json:"batches"`
	// Total counts every visible batch; the list holds the newest.
	Total int `json:"total"`
}

func (s *server) apiIndex(w http.ResponseWriter, r *http.Request, c caller) {
	rows, total, err := s.listBatches(r.Context(), c, "")
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, apiBatches{Batches: nonNil(rows), Total: total})
}

func (s *server) apiTenantIndex(w http.ResponseWriter, r *http.Request, c caller) {
	tenant := r.PathValue("tenant")
	if events.ValidateTenant(tenant) != nil || !c.sees(tenant) {
		s.notFound(w, r)
		return
	}
	rows, total, err := s.listBatches(r.Context(), c, tenant)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.writeJSON(w, apiBatches{Batches: nonNil(rows), Total: total})
}

func (s *server) apiBatch(w http.ResponseWriter, r *http.Request, c caller) {
	d, ok := s.loadBatch(w, r, c)
	if !ok {
		return
	}
	d.Rows = nonNil(d.Rows)
	s.writeJSON(w, d)
}

func (s *server) apiJob(w http.ResponseWriter, r *http.Request, c caller) {
	if d, _, ok := s.jobPage(w, r, c); ok {
		s.writeJSON(w, d)
	}
}

func (s *server) apiAudit(w http.ResponseWriter, r *http.Request, c caller) {
	d, code, ok := s.auditPage(w, r, c)
	if !ok {
		return
	}
	switch {
	case !d.Available:
		s.apiError(w, http.StatusNotImplemented, "the audit is not available in this console")
		return
	case code != http.StatusOK:
		s.apiError(w, code, d.Error)
		return
	}
	s.writeJSON(w, d)
}

func (s *server) apiCall(w http.ResponseWriter, r *http.Request, c caller) {
	if d, ok := s.callData(w, r, c); ok {
		s.writeJSON(w, d)
	}
}

// nonNil makes an empty list encode as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
