package console

import (
	"context"
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
}

// Start builds the console from cfg and serves it from now on.
func (s *Starting) Start(cfg Config) {
	h := New(cfg)
	s.h.Store(&h)
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
	http.Error(w, "tribunal console: starting, waiting for the services to create their state (JetStream buckets)", http.StatusServiceUnavailable)
}

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
