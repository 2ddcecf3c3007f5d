package ingress_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

// replica starts a second ingress on f's NATS and store: what another replica of a
// deployment's ingress is.
func replica(t *testing.T, f *fixture, cfg ingress.Config) *fixture {
	t.Helper()
	js, err := jetstream.New(f.env.Conn())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = map[string]string{tokA: "team-a", tokA2: "team-a", tokB: "team-b", tokOp: "*", tokRA: "team-a:reviewer", tokRB: "team-b:reviewer"}
	cfg.Pub, cfg.Store, cfg.Buckets = bus.NewPublisher(js, bus.ComparePayloads()), f.env.Store, f.running.Buckets
	srv := httptest.NewServer(ingress.New(cfg))
	t.Cleanup(srv.Close)
	return &fixture{env: f.env, running: f.running, js: js, url: srv.URL}
}

// TestQuotaHoldsAcrossReplicasAndAtOnce: a team's quota of batches in flight holds
// however its requests arrive: a dozen submissions at once, spread over two ingress
// replicas, open exactly as many batches as the quota allows, and the rest are refused
// with 429 naming the quota, none of their events published. No services run, so no
// batch header is ever recorded: before the shared reservation (QuotaBucket), each
// replica counted only the batches it had opened itself, after publishing them, so two
// requests at once both passed and two replicas allowed twice the quota.
func TestQuotaHoldsAcrossReplicasAndAtOnce(t *testing.T) {
	const quota, tries = 3, 12
	cfg := ingress.Config{Quotas: ingress.Quotas{Default: ingress.Quota{Batches: quota}}}
	one := start(t, false, cfg)
	two := replica(t, one, cfg)
	before := streamCount(t, one.js)
	clients := []*ingress.Client{dial(t, one, tokA), dial(t, two, tokA2)}
	batch := e2e.WriteBatch(t, e2e.TextBatch(2, ""))
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		accepted []string
		refused  int
	)
	for i := range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := clients[i%2]
			id := fmt.Sprintf("%s-r%d", client.NewBatchID(batch), i)
			_, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), batch, "team-a", id)
			mu.Lock()
			defer mu.Unlock()
			var ie *ingress.Error
			switch {
			case err == nil:
				accepted = append(accepted, id)
			case errors.As(err, &ie) && ie.Status == http.StatusTooManyRequests && ie.Problem.Quota == ingress.RefusedQuotaBatches:
				refused++
			default:
				t.Errorf("submission %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if len(accepted) != quota || refused != tries-quota {
		t.Fatalf("%d submissions at once over two replicas, quota %d batches: %d accepted (%v), %d refused", tries, quota, len(accepted), accepted, refused)
	}
	// Each accepted batch published its batch.opened and 2 jobs; the refused ones nothing.
	if got := streamCount(t, one.js) - before; got != quota*3 {
		t.Errorf("%d events published, want %d (the accepted batches' only)", got, quota*3)
	}
	// One of the accepted batches resumed (sent again) on the other replica counts once.
	c := clients[1]
	if _, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), batch, "team-a", accepted[0]); err != nil {
		t.Errorf("an accepted batch sent again, through the other replica: %v", err)
	}
}
