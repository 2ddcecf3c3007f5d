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
	"slices"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
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
	// Replicas is how many copies the quota bucket (QuotaBucket) keeps on a JetStream
	// cluster, as the services' --replicas; 0 is 1.
	Replicas int
	Logger   *slog.Logger
}

type server struct {
	cfg    Config
	tokens *tokens.Set
	log    *slog.Logger
	usage  *usage
	// indexes are the review queues' indexes, so a page reads its own items' records.
	indexes queueIndexes
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
	s.usage = newUsage(cfg.Store, bk, cfg.Replicas, s.log)
	mux := http.NewServeMux()
	handlers := map[string]func(http.ResponseWriter, *http.Request, string){
		"GET " + PathWhoami:                                   s.whoami,
		"PUT " + PathBlobs:                                    s.putBlob,
		"GET " + PathBlobs + "/{sha256}":                      s.getBlob,
		"HEAD " + PathBlobs + "/{sha256}":                     s.getBlob,
		"POST " + PathEvents:                                  s.postEvents,
		"GET " + PathBatches + "/{batch}":                     s.batch,
		"GET " + PathBatches + "/{batch}/results":             s.results,
		"GET " + PathBatches + "/{batch}/review":              s.reviewQueue,
		"GET " + PathBatches + "/{batch}/review/export":       s.reviewExport,
		"GET " + PathBatches + "/{batch}/review/gold":         s.reviewGold,
		"POST " + PathBatches + "/{batch}/review/answers":     s.reviewAnswers,
		"GET " + PathBatches + "/{batch}/review/" + pathImage: s.reviewImage,
	}
	var patterns []string
	for _, rt := range Routes() {
		h := handlers[rt.Pattern]
		if h == nil {
			panic("ingress: route " + rt.Pattern + " has no handler")
		}
		mux.HandleFunc(rt.Pattern, s.authed(rt.Roles, h))
		patterns = append(patterns, rt.Pattern)
	}
	if len(patterns) != len(handlers) {
		panic("ingress: a handler has no route (Routes)")
	}
	mux.HandleFunc("/", s.authed(tokens.Roles, func(w http.ResponseWriter, r *http.Request, _ string) {
		s.problem(w, r, http.StatusNotFound, "no such endpoint: the API is "+PathWhoami+", "+PathBlobs+", "+PathEvents+" and "+PathBatches+"/{batch}[/results | /review[/export | /gold | /answers | /"+pathImage+"]]", nil)
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

// authed resolves the bearer token to its tenant before h runs, and refuses a token
// whose role is not one of roles (the route's, Routes).
func (s *server) authed(roles []tokens.Role, h func(http.ResponseWriter, *http.Request, string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tok, _, ok := tokens.Bearer(r)
		holder, known := s.tokens.Holder(tok)
		tenant := holder.Tenant
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
		case !slices.Contains(roles, holder.Role):
			telemetry.Refused(Service, RefusedRole)
			s.json(w, http.StatusForbidden, Problem{Class: ClassRefused, Role: string(holder.Role),
				Error: fmt.Sprintf("a %s's token of %s may not use %s: it may only %s (docs/security.md)", holder.Role, tenant, r.Pattern, roleMay(holder.Role))})
			return
		}
		h(w, r, tenant)
	}
}

func (s *server) whoami(w http.ResponseWriter, r *http.Request, tenant string) {
	tok, _, _ := tokens.Bearer(r)
	h, _ := s.tokens.Holder(tok)
	if h.Role != tokens.RoleTeam {
		// A reviewer submits nothing, and has no allowance to be told.
		s.json(w, http.StatusOK, Whoami{Tenant: tenant, Role: string(h.Role)})
		return
	}
	allowance := s.cfg.Spend.For(tenant)
	s.json(w, http.StatusOK, Whoami{Tenant: tenant, Role: string(h.Role), Spend: &allowance})
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
	// Every window of a batch is held to the team's quota of ACs in flight, not only its
	// batch.opened: what its jobs say the batch is may be more than it was opened with.
	opens := openings(out)
	release, err := s.usage.reserve(r.Context(), tenant, s.cfg.Quotas.For(tenant), opens)
	if err != nil {
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
		release(r.Context())
		s.fail(w, r, err)
		return
	}
	if err := s.cfg.Pub.Publish("", msgs...); err != nil {
		// Some of the events may be stored all the same (a publish fails part way, or
		// after the server stored them): what they opened stays reserved until its batch
		// ends or openedTTL after, never under-counted. The same request sent again
		// reserves nothing more.
		if errors.Is(err, bus.ErrDuplicateMismatch) {
			s.problem(w, r, http.StatusConflict, err.Error(), nil)
			return
		}
		s.log.Error("publish failed", "tenant", tenant, "events", len(msgs), "err", err)
		s.problem(w, r, http.StatusServiceUnavailable, "the events could not be published; send them again (the same events are published once)", nil)
		return
	}
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

// queue reads the index of the review queue of one of the token's tenant's batches
// (queueIndexOf), or answers as ownBatch does. The queue is drawn over all the batch's job
// records (the sample is over every AC), once for a completed batch; a page then reads
// the records of its own items (entries) and what they show, and nothing else.
func (s *server) queue(w http.ResponseWriter, r *http.Request, tenant string) (string, *queueIndex, bool) {
	id, _, ok := s.ownBatch(w, r, tenant)
	if !ok {
		return "", nil, false
	}
	x, err := s.queueIndexOf(r.Context(), tenant, id)
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review queue of %s/%s: %w", tenant, id, err))
		return "", nil, false
	}
	return id, x, true
}

// cursor reads a review page's ?after= and ?limit= against the queue's index: the
// position of the page's first item and how many it holds at most, or a 400 naming the
// parameter.
func (s *server) cursor(w http.ResponseWriter, r *http.Request, x *queueIndex) (int, int, bool) {
	v := r.URL.Query()
	limit := DefaultReviewPage
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > MaxReviewPage {
			s.problem(w, r, http.StatusBadRequest, fmt.Sprintf("limit: want a count of items from 1 to %d, got %q", MaxReviewPage, l), nil)
			return 0, 0, false
		}
		limit = n
	}
	start := 0
	if a := v.Get("after"); a != "" {
		i, ok := x.pos[a]
		if !ok {
			s.problem(w, r, http.StatusBadRequest, fmt.Sprintf("after: %q is not an item of this review queue (give the next of the page before)", a), nil)
			return 0, 0, false
		}
		start = i + 1
	}
	return start, limit, true
}

// page builds the items of a review page from the queue's entries at positions, each
// over its record as read now: at most all of them, and no more once their encoding
// passes MaxReviewPageBytes (an item alone over it is served alone). more says
// positions do not end the queue. next is the ?after= of the next page, "" on the last.
func page[T any](entries []client.ReviewEntry, more bool, build func(client.ReviewEntry) (T, error)) (out []T, next string, err error) {
	out = []T{}
	size := 0
	i := 0
	for ; i < len(entries); i++ {
		v, err := build(entries[i])
		if err != nil {
			return nil, "", err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, "", fmt.Errorf("encode %s: %w", entries[i].Item, err)
		}
		if len(out) > 0 && size+len(b) > MaxReviewPageBytes {
			break
		}
		size += len(b)
		out = append(out, v)
	}
	if (i < len(entries) || more) && len(out) > 0 {
		next = entries[len(out)-1].Item
	}
	return out, next, nil
}

// pageEntries reads the entries of the page from start, at most limit, and whether the
// queue goes on past them.
func (s *server) pageEntries(ctx context.Context, tenant, batch string, x *queueIndex, start, limit int) ([]client.ReviewEntry, bool, error) {
	end := min(len(x.entries), start+limit)
	positions := make([]int, 0, max(0, end-start))
	for i := start; i < end; i++ {
		positions = append(positions, i)
	}
	es, err := s.entries(ctx, tenant, batch, x, positions)
	return es, end < len(x.entries), err
}

// reviewQueue answers a page of a batch's review queue as a reviewer is shown it, blind
// (ReviewQueue): each item's blind material, whether it was reviewed and the token
// holder's own answer, never its AC, case, paths, roles or the judge's verdict.
func (s *server) reviewQueue(w http.ResponseWriter, r *http.Request, tenant string) {
	id, x, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	start, limit, ok := s.cursor(w, r, x)
	if !ok {
		return
	}
	statusOnly := false
	switch f := r.URL.Query().Get("fields"); f {
	case "":
	case FieldsStatus:
		statusOnly = true
	default:
		s.problem(w, r, http.StatusBadRequest, fmt.Sprintf("fields: want %q or nothing, got %q", FieldsStatus, f), nil)
		return
	}
	es, more, err := s.pageEntries(r.Context(), tenant, id, x, start, limit)
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review queue of %s/%s: %w", tenant, id, err))
		return
	}
	who := reviewerOf(r, tenant)
	items, next, err := page(es, more, func(e client.ReviewEntry) (QueueItem, error) {
		it := client.ReviewItem{Item: e.Item, Kind: e.Kind}
		if !statusOnly {
			var err error
			if it, err = client.ReviewItemOf(r.Context(), s.cfg.Store, e); err != nil {
				return QueueItem{}, err
			}
		}
		qi := QueueItem{ReviewItem: it, Status: StatusUnreviewed}
		if len(e.Reviewers) > 0 {
			qi.Status = StatusReviewed
		}
		for _, rv := range e.Job().Reviews {
			if rv.Case == e.Case && rv.By == who {
				qi.Yours = &YourAnswer{Answer: rv.Answer, At: rv.At, Changes: rv.Changes}
			}
		}
		return qi, nil
	})
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review queue of %s/%s: %w", tenant, id, err))
		return
	}
	s.json(w, http.StatusOK, ReviewQueue{Tenant: tenant, BatchID: id, Items: items, Next: next})
}

// reviewExport answers a page of the queue's blind export (client.BlindReview): the
// images the items show are read through the queue's image route.
func (s *server) reviewExport(w http.ResponseWriter, r *http.Request, tenant string) {
	id, x, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	start, limit, ok := s.cursor(w, r, x)
	if !ok {
		return
	}
	es, more, err := s.pageEntries(r.Context(), tenant, id, x, start, limit)
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review export of %s/%s: %w", tenant, id, err))
		return
	}
	items, next, err := page(es, more, func(e client.ReviewEntry) (client.ReviewItem, error) {
		return client.ReviewItemOf(r.Context(), s.cfg.Store, e)
	})
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review export of %s/%s: %w", tenant, id, err))
		return
	}
	ex := client.ExportOf(items)
	s.json(w, http.StatusOK, ExportPage{ReviewExport: *ex, Next: next})
}

// reviewGold answers a page of the queue's reviewed ACs for a gold set (GoldPage): each
// AC once, at its first item, its record without the judge's calls and verdicts. A page
// looks at most ?limit= items of the queue, so it reads at most that many records, and
// may hold fewer ACs than it looked at (none, when none of them was reviewed yet); next
// goes on from the last item looked at.
func (s *server) reviewGold(w http.ResponseWriter, r *http.Request, tenant string) {
	id, x, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	start, limit, ok := s.cursor(w, r, x)
	if !ok {
		return
	}
	var positions []int
	i := start
	for ; i < len(x.entries) && len(positions) < limit; i++ {
		if e := x.entries[i]; x.byAC[e.AC][0] == i {
			positions = append(positions, i)
		}
	}
	es, err := s.entries(r.Context(), tenant, id, x, positions)
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review gold of %s/%s: %w", tenant, id, err))
		return
	}
	var reviewed []client.ReviewEntry
	for _, e := range es {
		if len(e.Job().Reviews) > 0 {
			reviewed = append(reviewed, e)
		}
	}
	out, next, err := page(reviewed, false, func(e client.ReviewEntry) (*records.Job, error) {
		return goldRecord(e.Job()), nil
	})
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review gold of %s/%s: %w", tenant, id, err))
		return
	}
	switch {
	case next != "":
		// The page ended on its byte bound before the reviewed ACs it read.
	case i < len(x.entries) && len(es) > 0:
		next = es[len(es)-1].Item
	}
	s.json(w, http.StatusOK, GoldPage{Jobs: out, Next: next})
}

// goldRecord is what a gold set is made of of a reviewed job: its identity, spec and the
// people's side of its reviews.
func goldRecord(j *records.Job) *records.Job {
	g := &records.Job{Tenant: j.Tenant, Batch: j.Batch, ACID: j.ACID, Index: j.Index, Spec: j.Spec}
	for _, rv := range j.Reviews {
		g.Reviews = append(g.Reviews, records.Review{By: rv.By, At: rv.At, Via: rv.Via, Iteration: rv.Iteration, Case: rv.Case, Answer: rv.Answer, Person: rv.Person, Changes: rv.Changes})
	}
	return g
}

// reviewAnswers records an answers file's answers (Answers) as review.recorded events by
// the token's holder, each checked against its item's kind first: one wrong answer and
// none is published. An answer keyed by item id is the item's; one keyed by AC id is
// resolved as on the state folder (client.ResolveAnswers) over that AC's items. Only the
// records of the answered items' jobs are read.
func (s *server) reviewAnswers(w http.ResponseWriter, r *http.Request, tenant string) {
	id, x, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	keys, answers, err := client.ReviewAnswers(http.MaxBytesReader(w, r.Body, client.MaxReviewFile))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.problem(w, r, http.StatusRequestEntityTooLarge, fmt.Sprintf("an answers file is at most %d bytes: send it in parts", client.MaxReviewFile), nil)
		return
	case err != nil:
		s.problem(w, r, http.StatusBadRequest, err.Error(), nil)
		return
	}
	who := reviewerOf(r, tenant)
	out := Answers{Recorded: []string{}, Items: []AnswerItem{}}
	var later bytes.Buffer
	var evs []events.Event
	answered := map[string]bool{}
	var refusals []Refusal
	refuse := func(i int, key string, err error) {
		if len(refusals) < 100 {
			refusals = append(refusals, Refusal{Index: i, Type: string(events.TypeReviewRecorded), Field: key, Reason: RefusedAnswer, Message: err.Error()})
		}
	}
	for i, k := range keys {
		var resolved []client.ResolvedAnswer
		if at, ok := x.pos[k]; ok {
			es, err := s.entries(r.Context(), tenant, id, x, []int{at})
			if err != nil {
				s.failClassified(w, r, fmt.Errorf("review answers of %s/%s: %w", tenant, id, err))
				return
			}
			resolved = []client.ResolvedAnswer{{Entry: es[0], Answer: answers[k]}}
		} else {
			es, err := s.entries(r.Context(), tenant, id, x, x.byAC[k])
			if err != nil {
				s.failClassified(w, r, fmt.Errorf("review answers of %s/%s: %w", tenant, id, err))
				return
			}
			if resolved, err = client.ResolveAnswers(es, []string{k}, answers); err != nil {
				refuse(i, k, err)
				continue
			}
		}
		for _, a := range resolved {
			if err := client.CheckReviewAnswer(a.Entry, a.Answer); err != nil {
				refuse(i, k, err)
				continue
			}
			if answered[a.Entry.AC] {
				// A second case of an AC: for a later request, keyed by its item.
				sep := ","
				if later.Len() == 0 {
					sep = "{"
				}
				key, _ := json.Marshal(a.Entry.Item)
				fmt.Fprintf(&later, "%s%s:%s", sep, key, a.Answer)
				continue
			}
			answered[a.Entry.AC] = true
			ev, err := client.ReviewCaseEvent(a.Entry.Job(), a.Entry.Case, a.Answer, who, "ingress")
			if err != nil {
				refuse(i, k, err)
				continue
			}
			// The holder's same answer, already recorded through another door (the
			// console), is that answer: published again with another via it would be a
			// conflict of its id, and applied it would change nothing.
			if !slices.ContainsFunc(a.Entry.Job().Reviews, func(rv records.Review) bool { return rv.Event == ev.ID }) {
				evs = append(evs, ev)
			}
			out.Items = append(out.Items, AnswerItem{Item: a.Entry.Item, Answer: json.RawMessage(ev.Payload.(*events.ReviewRecorded).Answer)})
			if len(out.Recorded) == 0 || out.Recorded[len(out.Recorded)-1] != k {
				out.Recorded = append(out.Recorded, k)
			}
		}
	}
	if len(refusals) > 0 {
		telemetry.Refused(Service, RefusedAnswer)
		s.problem(w, r, http.StatusUnprocessableEntity, fmt.Sprintf("%d answer(s) refused, none recorded: %s", len(refusals), refusals[0].Message), refusals)
		return
	}
	if later.Len() > 0 {
		later.WriteByte('}')
		out.Later = json.RawMessage(later.Bytes())
	}
	if len(evs) > 0 {
		msgs, err := bus.Messages(evs...)
		if err != nil {
			s.fail(w, r, err)
			return
		}
		if err := s.cfg.Pub.Publish("", msgs...); err != nil {
			if errors.Is(err, bus.ErrDuplicateMismatch) {
				s.problem(w, r, http.StatusConflict, err.Error(), nil)
				return
			}
			s.log.Error("publish failed", "tenant", tenant, "batch", id, "reviews", len(msgs), "err", err)
			s.problem(w, r, http.StatusServiceUnavailable, "the answers could not be recorded; send them again (the same answers are recorded once)", nil)
			return
		}
	}
	s.json(w, http.StatusAccepted, out)
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
	s.json(w, code, Problem{Error: msg, Refusals: refusals, Class: classOf(code)})
}

// classOf is the class (Problem.Class) of an answer's status code: every error answer
// says what its caller can do about it.
func classOf(code int) string {
	switch {
	case code == http.StatusNotFound:
		return ClassNotFound
	case code == http.StatusConflict:
		return ClassConflict
	case code == http.StatusServiceUnavailable || code == http.StatusInsufficientStorage || code == http.StatusBadGateway || code == http.StatusGatewayTimeout:
		return ClassUnavailable
	case code >= 500:
		return ClassInternal
	}
	return ClassRefused
}

// failClassified answers err by its class (errclass.Of), as every other answer is
// classified: a refusal is a 422 and what was not found a 404, each saying what; a
// conflict a 409; a dependency that could not answer a 503 to try again; anything else
// is the ingress's own failure (fail), told only in its log.
func (s *server) failClassified(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	switch errclass.Of(err) {
	case errclass.Refused:
		s.problem(w, r, http.StatusUnprocessableEntity, err.Error(), nil)
	case errclass.NotFound:
		s.problem(w, r, http.StatusNotFound, err.Error(), nil)
	case errclass.Conflict:
		s.problem(w, r, http.StatusConflict, err.Error(), nil)
	case errclass.Unavailable:
		// What could not answer (a store's address) is the operator's, not the team's.
		s.log.Warn("request unavailable", "path", r.URL.Path, "err", err)
		s.problem(w, r, http.StatusServiceUnavailable, "a store the ingress reads could not answer now; try again (the ingress's log says which)", nil)
	default:
		s.fail(w, r, err)
	}
}

// quotaProblem answers a request refused for a team's quota, naming it.
func (s *server) quotaProblem(w http.ResponseWriter, _ *http.Request, code int, qe *quotaError) {
	s.json(w, code, Problem{Error: qe.msg, Quota: qe.reason, Class: ClassRefused})
}

// fail logs the ingress's own failure and answers without its details.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.Error("request failed", "path", r.URL.Path, "err", err)
	s.problem(w, r, http.StatusInternalServerError, "the ingress could not serve this request; see its log", nil)
}
