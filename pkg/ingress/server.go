package ingress

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress/body"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// Service is the ingress's name in metrics and logs.
const Service = "ingress"

// Defaults of Config.
const (
	// DefaultMaxRequestBytes bounds one POST /v1/events body. The client sends at most
	// MaxRequestEvents events and about a quarter of this per request.
	DefaultMaxRequestBytes = 32 << 20
	// MaxRequestEvents bounds the events of one request.
	MaxRequestEvents = body.MaxEvents
)

// Config is what the ingress serves and who may use it.
type Config struct {
	// Tokens maps each team's bearer token to its tenant (tokens.Load). A token of
	// tokens.AllTenants (an operator's console token) is refused: operators reach NATS
	// directly, and an ingress token must stand for exactly one tenant.
	Tokens map[string]string
	// Pub publishes on the ingress's own NATS connection: a *bus.Publisher made with
	// bus.ComparePayloads, so an event sent again under its id with other content is a
	// 409 naming the field that differs, not an acceptance with nothing published.
	Pub client.Publisher
	// Store is the services' blob store; the ingress writes and reads it only under a
	// token's tenant.
	Store blob.Store
	// Buckets are the services' key-value buckets, read for batch progress and results.
	Buckets bus.Buckets
	// MaxArtifactBytes bounds one stored blob (default blob.ArtifactMaxSize).
	MaxArtifactBytes int64
	// MaxRequestBytes bounds one POST /v1/events body (default DefaultMaxRequestBytes).
	MaxRequestBytes int64
	// Spend is what each team may spend on the provider (pkg/spend): a job.submitted
	// naming a model the team may not name, or a panel beyond the cap, is refused. The
	// zero policy is the safe one: only the judge's default model (Spend.Default, the
	// deployment's --judge-model), DefaultMaxCallsPerAC calls per AC.
	Spend spend.Policy
	// Quotas bound what each team holds: bytes stored, batches and ACs in flight. The
	// zero value is DefaultQuota for every team.
	Quotas Quotas
	Logger *slog.Logger
}

type server struct {
	cfg    Config
	tokens *tokens.Set
	log    *slog.Logger
	usage  *usage
}

// New builds the ingress's handler.
func New(cfg Config) http.Handler {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxArtifactBytes <= 0 {
		cfg.MaxArtifactBytes = blob.ArtifactMaxSize
	}
	if cfg.MaxRequestBytes <= 0 {
		cfg.MaxRequestBytes = DefaultMaxRequestBytes
	}
	s := &server{cfg: cfg, tokens: tokens.NewSet(cfg.Tokens), log: cfg.Logger.With("component", Service)}
	var bk *records.Store
	if cfg.Buckets.Batches != nil {
		st := records.New(cfg.Buckets)
		bk = &st
	}
	s.usage = newUsage(cfg.Store, bk, s.log)
	mux := http.NewServeMux()
	routes := []struct {
		pattern string
		h       http.HandlerFunc
	}{
		{"GET " + PathWhoami, s.authed(s.whoami)},
		{"PUT " + PathBlobs, s.authed(s.putBlob)},
		{"GET " + PathBlobs + "/{sha256}", s.authed(s.getBlob)},
		{"HEAD " + PathBlobs + "/{sha256}", s.authed(s.getBlob)},
		{"POST " + PathEvents, s.authed(s.postEvents)},
		{"GET " + PathBatches + "/{batch}", s.authed(s.batch)},
		{"GET " + PathBatches + "/{batch}/results", s.authed(s.results)},
		{"GET " + PathBatches + "/{batch}/review", s.authed(s.reviewQueue)},
		{"GET " + PathBatches + "/{batch}/review/export", s.authed(s.reviewExport)},
	}
	patterns := make([]string, 0, len(routes))
	for _, r := range routes {
		mux.HandleFunc(r.pattern, r.h)
		patterns = append(patterns, r.pattern)
	}
	mux.HandleFunc("/", s.authed(func(w http.ResponseWriter, r *http.Request, _ string) {
		s.problem(w, r, http.StatusNotFound, "no such endpoint: the API is "+PathWhoami+", "+PathBlobs+", "+PathEvents+" and "+PathBatches+"/{batch}[/results | /review[/export]]", nil)
	}))
	// The answer count exists at zero from start, route by route (route labels are the
	// patterns counted records).
	telemetry.PrimeIngress(patterns)
	return counted(mux)
}

// counted records every answer by route and status code.
func counted(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern
		if route == "" {
			route = "other"
		}
		telemetry.IngressRequest(route, rec.code)
	})
}

type statusWriter struct {
	http.ResponseWriter
	code int
}

func (s *statusWriter) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// authed resolves the bearer token to its tenant before h runs.
func (s *server) authed(h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, _, ok := tokens.Bearer(r)
		tenant, known := s.tokens.Tenant(tok)
		switch {
		case !ok || !known:
			telemetry.Refused(Service, RefusedUnauth)
			w.Header().Set("WWW-Authenticate", `Bearer realm="tribunal ingress"`)
			s.problem(w, r, http.StatusUnauthorized, "a team's bearer token is required (Authorization: Bearer <token>)", nil)
			return
		case tenant == tokens.AllTenants:
			telemetry.Refused(Service, RefusedOperator)
			s.problem(w, r, http.StatusForbidden, "an operator's token (\"*\") cannot use the ingress: an ingress token stands for one team", nil)
			return
		}
		h(w, r, tenant)
	}
}

func (s *server) whoami(w http.ResponseWriter, r *http.Request, tenant string) {
	allowance := s.cfg.Spend.For(tenant)
	s.json(w, http.StatusOK, Whoami{Tenant: tenant, Spend: &allowance})
}

// putBlob stores the body under the token's tenant, content-addressed.
func (s *server) putBlob(w http.ResponseWriter, r *http.Request, tenant string) {
	limit := s.cfg.MaxArtifactBytes
	if r.ContentLength > limit {
		s.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("a blob is at most %d bytes, this one %d", limit, r.ContentLength), nil)
		return
	}
	mediaType := r.Header.Get("Content-Type")
	if mediaType != "" {
		if _, _, err := mime.ParseMediaType(mediaType); err != nil || len(mediaType) > 255 {
			s.problem(w, r, http.StatusBadRequest, fmt.Sprintf("Content-Type %q is not a media type", mediaType), nil)
			return
		}
	}
	quota := s.cfg.Quotas.For(tenant)
	expected := r.Header.Get(HeaderExpectedSHA256)
	exists := func() bool {
		if expected == "" {
			return false
		}
		_, err := s.cfg.Store.Stat(r.Context(), blob.Ref{Tenant: tenant, SHA256: expected})
		return err == nil
	}
	var body io.Reader = http.MaxBytesReader(w, r.Body, limit)
	size := r.ContentLength
	if size < 0 {
		// A body of unknown length (chunked) is read first, within the blob limit, so the
		// quota is held to its real size.
		data, err := io.ReadAll(body)
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("a blob is at most %d bytes", limit), nil)
			return
		}
		if err != nil {
			s.problem(w, r, http.StatusBadRequest, "reading the body: "+err.Error(), nil)
			return
		}
		body, size = bytes.NewReader(data), int64(len(data))
	}
	if err := s.usage.checkPut(r.Context(), tenant, quota, size, exists); err != nil {
		var qe *quotaError
		if errors.As(err, &qe) {
			telemetry.Refused(Service, qe.reason)
			s.quotaProblem(w, r, http.StatusRequestEntityTooLarge, qe)
			return
		}
		s.fail(w, r, err)
		return
	}
	attrs, err := s.cfg.Store.Put(r.Context(), tenant, body, blob.PutOptions{MediaType: mediaType, ExpectedSHA256: expected})
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge) || errors.Is(err, blob.ErrTooLarge):
		s.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("a blob is at most %d bytes", limit), nil)
	case errors.Is(err, blob.ErrDigestMismatch):
		s.problem(w, r, http.StatusUnprocessableEntity, "the body does not hash to "+HeaderExpectedSHA256, nil)
	case errors.Is(err, blob.ErrInvalidRef):
		s.problem(w, r, http.StatusBadRequest, err.Error(), nil)
	case diskspace.Is(err):
		// The store itself is full: the operator's to fix, and never a bare 500.
		telemetry.Refused(Service, RefusedStoreFull)
		s.log.Error("the blob store is full", "tenant", tenant, "err", err)
		s.problem(w, r, http.StatusInsufficientStorage, "the deployment's blob store is out of space; nothing was stored. Its operator has been told (the ingress's log); try again later", nil)
	case err != nil:
		s.fail(w, r, fmt.Errorf("store blob of %s: %w", tenant, err))
	default:
		s.usage.addStored(tenant, attrs.Size)
		s.json(w, http.StatusCreated, BlobAttrs{SHA256: attrs.Ref.SHA256, Size: attrs.Size, MediaType: attrs.MediaType})
	}
}

// getBlob serves (GET) or describes (HEAD) one of the token's tenant's blobs. There is
// no way to name another tenant's: the tenant is the token's.
func (s *server) getBlob(w http.ResponseWriter, r *http.Request, tenant string) {
	ref := blob.Ref{Tenant: tenant, SHA256: r.PathValue("sha256")}
	if err := ref.Validate(); err != nil {
		s.problem(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	}
	var rc io.ReadCloser
	var attrs blob.Attrs
	var err error
	if r.Method == http.MethodHead {
		attrs, err = s.cfg.Store.Stat(r.Context(), ref)
	} else {
		rc, attrs, err = s.cfg.Store.Open(r.Context(), ref)
	}
	switch {
	case errors.Is(err, blob.ErrNotFound):
		s.problem(w, r, http.StatusNotFound, "no such blob", nil)
		return
	case err != nil:
		s.fail(w, r, fmt.Errorf("read blob %s: %w", ref, err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", attrs.MediaType)
	h.Set("Content-Length", strconv.FormatInt(attrs.Size, 10))
	// A team's artifact is data: never sniffed, never run as a page.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	if rc == nil {
		return
	}
	defer rc.Close()
	if _, err := io.Copy(w, rc); err != nil && !errors.Is(err, context.Canceled) {
		// The status is sent; the client's own verification sees the short body.
		s.log.Error("blob read failed", "ref", ref.String(), "err", err)
	}
}

// postEvents admits every event of a request or none: each is decoded, checked and
// rebuilt (admission.admit); only if none is refused are they all published.
func (s *server) postEvents(w http.ResponseWriter, r *http.Request, tenant string) {
	limited := http.MaxBytesReader(w, r.Body, s.cfg.MaxRequestBytes)
	raw, err := body.Read(r.Header.Get("Content-Type"), limited)
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("a request is at most %d bytes: send the events in several", s.cfg.MaxRequestBytes), nil)
		return
	case errors.Is(err, body.ErrTooManyEvents):
		telemetry.Refused(Service, RefusedTooLarge)
		s.problem(w, r, http.StatusRequestEntityTooLarge, err.Error(), nil)
		return
	case errors.Is(err, body.ErrMediaType):
		s.problem(w, r, http.StatusUnsupportedMediaType, err.Error(), nil)
		return
	case err != nil:
		telemetry.Refused(Service, RefusedMalformed)
		s.problem(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	case len(raw) > MaxRequestEvents:
		telemetry.Refused(Service, RefusedTooLarge)
		s.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("%d events: a request carries at most %d", len(raw), MaxRequestEvents), nil)
		return
	}
	a := &admission{tenant: tenant, store: s.cfg.Store, spend: s.cfg.Spend.For(tenant), who: reviewerOf(r, tenant)}
	if s.cfg.Buckets.Jobs != nil {
		st := records.New(s.cfg.Buckets)
		a.jobs = &st
	}
	out := make([]events.Event, 0, len(raw))
	var refusals []Refusal
	for i, data := range raw {
		ev, err := a.admit(r.Context(), i, data)
		var ref *refused
		switch {
		case errors.As(err, &ref):
			telemetry.Refused(Service, ref.r.Reason)
			if len(refusals) < 100 {
				refusals = append(refusals, ref.r)
			}
		case err != nil:
			s.fail(w, r, err)
			return
		default:
			out = append(out, ev)
		}
	}
	if len(refusals) > 0 {
		s.log.Warn("events refused", "tenant", tenant, "refused", len(refusals), "first", refusals[0].Message)
		s.problem(w, r, refusalStatus(refusals[0].Reason), fmt.Sprintf("%d of %d events refused, none published: %s", len(refusals), len(raw), refusals[0].Message), refusals)
		return
	}
	var opens []opening
	for _, ev := range out {
		if p, ok := ev.Payload.(*events.BatchOpened); ok {
			opens = append(opens, opening{batch: ev.BatchID, size: p.Size})
		}
	}
	if err := s.usage.checkOpen(r.Context(), tenant, s.cfg.Quotas.For(tenant), opens); err != nil {
		var qe *quotaError
		if errors.As(err, &qe) {
			telemetry.Refused(Service, qe.reason)
			qe.msg += "; nothing of this request was published"
			s.quotaProblem(w, r, http.StatusTooManyRequests, qe)
			return
		}
		s.fail(w, r, err)
		return
	}
	msgs, err := bus.Messages(out...)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	if err := s.cfg.Pub.Publish("", msgs...); err != nil {
		if errors.Is(err, bus.ErrDuplicateMismatch) {
			s.problem(w, r, http.StatusConflict, err.Error(), nil)
			return
		}
		s.log.Error("publish failed", "tenant", tenant, "events", len(msgs), "err", err)
		s.problem(w, r, http.StatusServiceUnavailable, "the events could not be published; send them again (the same events are published once)", nil)
		return
	}
	s.usage.addOpen(tenant, opens)
	acc := Accepted{Accepted: len(out), IDs: make([]string, len(out))}
	for i, ev := range out {
		acc.IDs[i] = ev.ID
	}
	s.json(w, http.StatusAccepted, acc)
}

func refusalStatus(reason string) int {
	switch reason {
	case RefusedType, RefusedTenant, RefusedEnvelope, RefusedModel, RefusedCalls:
		return http.StatusForbidden
	case RefusedBlob, RefusedJob:
		return http.StatusUnprocessableEntity
	}
	return http.StatusBadRequest
}

// batch answers a batch's header and progress. The tenant is the token's: another
// team's batch id is simply not found.
func (s *server) batch(w http.ResponseWriter, r *http.Request, tenant string) {
	id, p, ok := s.ownBatch(w, r, tenant)
	if ok {
		s.json(w, http.StatusOK, BatchStatus{Tenant: tenant, BatchID: id, Total: p.Total, Done: p.Done, Complete: p.Completion != nil, Completion: p.Completion})
	}
}

// ownBatch reads the progress of the request's batch under the token's tenant, or
// answers: a batch id that is not a name is a 400, and one the tenant has not recorded
// (another team's, whether it exists or not) a 404 naming the token's own tenant, so
// nothing says another team's batch exists.
func (s *server) ownBatch(w http.ResponseWriter, r *http.Request, tenant string) (string, *client.Progress, bool) {
	id := r.PathValue("batch")
	if err := events.ValidateName(id); err != nil {
		s.problem(w, r, http.StatusBadRequest, "batch id: "+err.Error(), nil)
		return "", nil, false
	}
	p, err := client.ReadProgress(r.Context(), s.cfg.Buckets, tenant, id)
	switch {
	case err != nil:
		s.fail(w, r, err)
		return "", nil, false
	case p == nil:
		s.problem(w, r, http.StatusNotFound, fmt.Sprintf("batch %s/%s: %v", tenant, id, client.ErrNotFound), nil)
		return "", nil, false
	}
	return id, p, true
}

// queue reads the review queue of one of the token's tenant's batches, or answers as
// ownBatch does.
func (s *server) queue(w http.ResponseWriter, r *http.Request, tenant string) (string, []client.ReviewEntry, bool) {
	id, _, ok := s.ownBatch(w, r, tenant)
	if !ok {
		return "", nil, false
	}
	q, _, err := client.ReviewQueue(r.Context(), s.cfg.Buckets, tenant, id)
	if err != nil {
		s.fail(w, r, err)
		return "", nil, false
	}
	return id, q, true
}

// reviewQueue answers a batch's review queue as the team sees it (the entries and their
// job records), what `tribunal review` lists and imports answers against.
func (s *server) reviewQueue(w http.ResponseWriter, r *http.Request, tenant string) {
	id, q, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	out := ReviewQueue{Tenant: tenant, BatchID: id, Entries: make([]QueueEntry, 0, len(q))}
	for _, e := range q {
		out.Entries = append(out.Entries, QueueEntry{ReviewEntry: e, Record: e.Job()})
	}
	s.json(w, http.StatusOK, out)
}

// reviewExport answers the queue as reviewers are shown it, blind (client.BlindReview):
// the images the items show are the tenant's blobs, fetched through GET /v1/blobs.
func (s *server) reviewExport(w http.ResponseWriter, r *http.Request, tenant string) {
	_, q, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	ex, err := client.BlindReview(r.Context(), s.cfg.Store, q)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	s.json(w, http.StatusOK, ex)
}

// results answers what client.Load returns for a completed batch.
func (s *server) results(w http.ResponseWriter, r *http.Request, tenant string) {
	id := r.PathValue("batch")
	if err := events.ValidateName(id); err != nil {
		s.problem(w, r, http.StatusBadRequest, "batch id: "+err.Error(), nil)
		return
	}
	res, err := client.Load(r.Context(), s.cfg.Buckets, s.cfg.Store, tenant, id)
	switch {
	case errors.Is(err, client.ErrNotFound):
		s.problem(w, r, http.StatusNotFound, err.Error(), nil)
	case errors.Is(err, client.ErrNotComplete):
		s.problem(w, r, http.StatusConflict, err.Error(), nil)
	case err != nil:
		s.fail(w, r, err)
	default:
		s.json(w, http.StatusOK, toWire(res))
	}
}

func (s *server) json(w http.ResponseWriter, code int, v any) {
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(v); err != nil {
		s.log.Error("encode answer", "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func (s *server) problem(w http.ResponseWriter, _ *http.Request, code int, msg string, refusals []Refusal) {
	s.json(w, code, Problem{Error: msg, Refusals: refusals})
}

// quotaProblem answers a request refused for a team's quota, naming it.
func (s *server) quotaProblem(w http.ResponseWriter, _ *http.Request, code int, qe *quotaError) {
	s.json(w, code, Problem{Error: qe.msg, Quota: qe.reason})
}

// fail logs the ingress's own failure and answers without its details.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.Error("request failed", "path", r.URL.Path, "err", err)
	s.problem(w, r, http.StatusInternalServerError, "the ingress could not serve this request; see its log", nil)
}
