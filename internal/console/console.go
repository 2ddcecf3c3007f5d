package console

import (
	"context"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// AllTenants is the tenant a token maps to when it may see every tenant (an operator's
// or auditor's token).
const AllTenants = tokens.AllTenants

// CookieName is the cookie the /login form sets, so a browser need not send a bearer
// header.
const CookieName = "tribunal_token"

// AuditFunc audits one batch of a tenant. The console renders whatever it returns (a
// string or fmt.Stringer as text, anything else as indented JSON), always escaped.
type AuditFunc func(ctx context.Context, tenant, batch string) (any, error)

// Config is what the console reads and who may read it.
type Config struct {
	// Buckets are the services' key-value buckets (bus.OpenBuckets).
	Buckets bus.Buckets
	// Store holds the artifacts, renders and manifests.
	Store blob.Store
	// Pub publishes what the forms of a kind's job page send (stage.PageActing: rubric's
	// HE-2 spot-check decisions and loop resets). Without one no such form is offered.
	Pub client.Publisher
	// Tenants maps a bearer token to the tenant it may see, or to AllTenants. With no
	// tokens at all the console is open and shows every tenant: that is the
	// single-tenant all-in-one mode, and such a console must only listen on loopback.
	Tenants map[string]string
	// Audit, when set, produces the audit page of a batch; without it the page says the
	// audit is not available.
	Audit AuditFunc
	// Report, when set, produces the trust report page of a batch (its judges' position
	// bias, flips, agreement, ...); without it the page says the report is not available.
	Report ReportFunc
	// CSRFKey keys the spot-check form tokens. Give every replica of a console behind
	// one address the same secret; empty means a random key per process (a form then
	// only posts back to the process that served it, and not across a restart).
	CSRFKey []byte
	// Reviewer names who answers the review queue in an open console (`tribunal view`:
	// the local user); a console with tokens names each caller by their credential.
	Reviewer string
	// Refresh is how often pages of work still in progress reload (default 3s).
	Refresh time.Duration
	// Logger receives request errors (default slog.Default()).
	Logger *slog.Logger
}

type server struct {
	cfg     Config
	auth    *authenticator
	pages   *pages
	log     *slog.Logger
	refresh int
	cache   *rowsCache
	// live follows the running batches viewed (live.go).
	live *followers
	// recordsRead counts the job records the console decoded to show batches: a full
	// read of a batch's, or a follower's (tests and benchmarks read it).
	recordsRead atomic.Int64
	handler     http.Handler
}

// New builds the console's handler. It panics only if the embedded templates do not
// parse (the package's tests rule that out) or the system has no randomness.
func New(cfg Config) http.Handler { return newServer(cfg).handler }

func newServer(cfg Config) *server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 3 * time.Second
	}
	key := cfg.CSRFKey
	if len(key) == 0 {
		key = make([]byte, 32)
		if _, err := rand.Read(key); err != nil {
			panic("console: no randomness for the CSRF key: " + err.Error())
		}
	}
	s := &server{
		cfg:     cfg,
		auth:    newAuthenticator(cfg.Tenants, key),
		pages:   mustParsePages(),
		log:     cfg.Logger.With("component", "console"),
		refresh: max(1, int(cfg.Refresh/time.Second)),
		cache:   newRowsCache(),
	}
	s.live = newFollowers(cfg.Buckets.Jobs, cfg.Buckets.JS, s.log, s.cache.limit, &s.recordsRead)
	s.cache.followed = s.live.weight
	mux := http.NewServeMux()
	s.handle(mux)
	s.handler = securityHeaders(mux)
	return s
}

// maxFormBytes bounds a request body: the console takes only small forms (a token, a
// spot-check, a reset, a review's answer), and net/http would otherwise read up to 10 MB
// of a form into memory.
const maxFormBytes = 64 << 10

// securityHeaders applies to every response: pages carry no script at all and may be
// framed by nobody; artifacts set their own, stricter policy in the blob handler. Every
// request body is bounded by maxFormBytes before a handler parses it.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; img-src 'self'; style-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// notFound is the one answer for everything a caller may not see or that does not
// exist, so a team cannot probe for another team's batch ids.
func (s *server) notFound(w http.ResponseWriter, r *http.Request) {
	s.errorPage(w, r, http.StatusNotFound, "Not found", "There is nothing here, or nothing you may see.")
}

// fail logs an internal error and shows a page that does not leak its details beyond
// what the caller may know.
func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, context.Canceled) {
		return
	}
	s.log.Error("request failed", "path", r.URL.Path, "err", err)
	s.errorPage(w, r, http.StatusInternalServerError, "Something went wrong", "The console could not read this page's state; see the console's log.")
}

type errorData struct {
	Message string
}

func (s *server) errorPage(w http.ResponseWriter, r *http.Request, code int, title, msg string) {
	if isAPI(r) {
		s.apiError(w, code, msg)
		return
	}
	s.render(w, r, code, "error.html", view{Title: title, Page: errorData{Message: msg}})
}
