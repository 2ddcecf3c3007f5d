package console

import (
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// Starting is the console of a process that is still waiting for tribunal's state: it
// answers every request with 503 and a Retry-After until Start gives it the buckets,
// then serves the console. A console deployed beside the services (compose, Kubernetes)
// may start before any service has created the buckets; it waits for them instead of
// exiting.
type Starting struct {
	h atomic.Pointer[http.Handler]
	// held is the message of Hold, nil while starting.
	held atomic.Pointer[string]
}

// Start builds the console from cfg and serves it from now on.
func (s *Starting) Start(cfg Config) {
	h := New(cfg)
	s.h.Store(&h)
}

// Hold stops serving the console until the next Start, answering 503 with msg and a page
// that reloads itself: a `tribunal view` that stepped aside for a run.
func (s *Starting) Hold(msg string) {
	s.held.Store(&msg)
	s.h.Store(nil)
}

// Ready reports whether the console serves pages yet.
func (s *Starting) Ready() bool { return s.h.Load() != nil }

// ServeHTTP implements http.Handler.
func (s *Starting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.h.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", "5")
	if isAPI(r) {
		// A client of the API reads JSON, also while the console waits.
		msg := "tribunal console: starting, waiting for the services to create their state (JetStream buckets)"
		if held := s.held.Load(); held != nil {
			msg = *held
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": msg, "busy": true, "retry_after_seconds": 5})
		return
	}
	if msg := s.held.Load(); msg != nil {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusServiceUnavailable)
		_ = heldPage.Execute(w, *msg)
		return
	}
	http.Error(w, "tribunal console: starting, waiting for the services to create their state (JetStream buckets)", http.StatusServiceUnavailable)
}

// heldPage is the whole page of a held console: no layout, since the console's own
// handler (and its stylesheet) is not being served.
var heldPage = template.Must(template.New("held").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta http-equiv="refresh" content="3"><title>tribunal: busy</title></head>
<body><h1>tribunal</h1><p id="held">{{.}}</p><p>This page reloads every 3 s.</p></body></html>
`))

// WaitForBuckets binds the services' key-value buckets, retrying every `every` while
// they do not exist yet (no service has started) or NATS cannot answer, until ctx ends.
func WaitForBuckets(ctx context.Context, js jetstream.JetStream, every time.Duration, log *slog.Logger) (bus.Buckets, error) {
	if log == nil {
		log = slog.Default()
	}
	logged := false
	for {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		b, err := bus.OpenBuckets(octx, js)
		cancel()
		if err == nil {
			return b, nil
		}
		if ctx.Err() != nil {
			return b, ctx.Err()
		}
		if !logged {
			log.Warn("console waiting for tribunal's buckets (they are created when the services start)", "err", err)
			logged = true
		}
		select {
		case <-ctx.Done():
			return b, ctx.Err()
		case <-time.After(every):
		}
	}
}
