package ingress_test

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// growing is a client that declares its batch as far as it has planned it: its
// batch.opened says the first window, each window's jobs the batch as far as their
// window. It stands for any batch whose windows claim more than its batch.opened did,
// or that never sent one (a client from before batch.opened).
type growing struct {
	pub    client.Publisher
	window int
	total  int
}

func (g *growing) Publish(topic string, msgs ...*message.Message) error {
	out := make([]*message.Message, 0, len(msgs))
	for _, m := range msgs {
		ev, err := events.Decode(m.Payload)
		if err != nil {
			return err
		}
		switch p := ev.Payload.(type) {
		case *events.BatchOpened:
			p.Size = g.window
		case *events.JobSubmitted:
			p.BatchSize = min(g.total, (p.Index/g.window+1)*g.window)
		}
		re, err := bus.Messages(ev)
		if err != nil {
			return err
		}
		out = append(out, re...)
	}
	return g.pub.Publish(topic, out...)
}

// TestQuotaHoldsOnEveryWindow: the quota of ACs in flight holds on every window of a
// batch, not only on its batch.opened. A batch whose windows claim more than it was
// opened with is refused at the window that takes the team past its quota, with the
// quota named and counted, and nothing of that window published; the windows before it
// are decided as ever. Before, only batch.opened was counted, so a batch opened small
// (or never opened) could put any number of ACs in flight.
func TestQuotaHoldsOnEveryWindow(t *testing.T) {
	m := telemetry.Reset()
	f := start(t, true, ingress.Config{Quotas: ingress.Quotas{Default: ingress.Quota{ACs: 10}}})
	a := dial(t, f, tokA)
	b := e2e.WriteBatch(t, e2e.TextBatch(12, ""))
	id := client.NewBatchID(b)
	s := &client.Submitter{Pub: &growing{pub: a, window: 4, total: 12}, Store: a, Window: 4}
	sub, err := s.Submit(ctxT(t), b, "team-a", id)
	var ie *ingress.Error
	if !errors.As(err, &ie) || ie.Status != http.StatusTooManyRequests || ie.Problem.Quota != ingress.RefusedQuotaACs ||
		!errors.Is(err, ingress.ErrQuota) || !strings.Contains(err.Error(), "quota_acs") || !strings.Contains(err.Error(), "--tenant-max-acs") {
		t.Fatalf("a batch whose third window passes the quota of 10 ACs: %v", err)
	}
	if sub.Published != 8 || !strings.Contains(err.Error(), "after 8 of 12 jobs") {
		t.Errorf("published %d jobs before the refusal (want the two windows before it, 8): %v", sub.Published, err)
	}
	if got := m.Value("tribunal_refusals_total", "service=ingress", "reason="+ingress.RefusedQuotaACs); got != 1 {
		t.Errorf("quota_acs refusals counted: %v", got)
	}
	// Nothing of the refused window is on the stream; the two windows before it are,
	// and they are decided.
	subj, _ := events.Subject("team-a", events.TypeJobSubmitted)
	st, err := f.js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctxT(t), jetstream.WithSubjectFilter(subj))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects[subj]; n != 8 {
		t.Errorf("%d job.submitted on the stream, want the 8 of the windows before the refusal", n)
	}
	// The plan's pages in the store are the opened batch's, every one: what a cancel of
	// the batch reads (or a resume compares), none left unused.
	rs := records.New(f.running.Buckets)
	h, _, err := rs.Header(ctxT(t), "team-a", id)
	if err != nil || h.Plan == nil {
		t.Fatalf("the opened batch's header: %+v %v", h, err)
	}
	var want []string
	for _, p := range h.Plan.Pages {
		want = append(want, p.SHA256)
	}
	slices.Sort(want)
	if got := storedPlanPages(t, f.env.Store, "team-a"); !slices.Equal(got, want) {
		t.Errorf("plan pages stored %v, the header names %v", got, want)
	}
	for i := range 12 {
		ac := fmt.Sprintf("AC-%d", i+1)
		if i >= 8 {
			if _, _, err := rs.Job(ctxT(t), "team-a", id, ac); !errors.Is(err, records.ErrNotRecorded) {
				t.Errorf("%s of the refused window is recorded: %v", ac, err)
			}
			continue
		}
		for {
			j, _, err := rs.Job(ctxT(t), "team-a", id, ac)
			if err == nil && j.Final() {
				break
			}
			if err != nil && !errors.Is(err, records.ErrNotRecorded) {
				t.Fatalf("%s: %v", ac, err)
			}
			if ctxT(t).Err() != nil {
				t.Fatalf("%s of an accepted window was not decided: %v", ac, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// unopened is a client from before batch.opened: it publishes a batch's jobs only.
type unopened struct{ pub client.Publisher }

func (u unopened) Publish(topic string, msgs ...*message.Message) error {
	var out []*message.Message
	for _, m := range msgs {
		ev, err := events.Decode(m.Payload)
		if err != nil {
			return err
		}
		if ev.Type != events.TypeBatchOpened {
			out = append(out, m)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return u.pub.Publish(topic, out...)
}

// TestQuotaWithoutBatchOpened: a batch sent with no batch.opened (a client from before
// it) is held to the quota by what its jobs say it is: one within the quota is accepted,
// the next one past it refused at its first window, with nothing published.
func TestQuotaWithoutBatchOpened(t *testing.T) {
	f := start(t, false, ingress.Config{Quotas: ingress.Quotas{Default: ingress.Quota{ACs: 10}}})
	a := dial(t, f, tokA)
	submit := func(suffix string) error {
		b := e2e.WriteBatch(t, e2e.TextBatch(6, ""))
		_, err := (&client.Submitter{Pub: unopened{a}, Store: a}).Submit(ctxT(t), b, "team-a", client.NewBatchID(b)+"-"+suffix)
		return err
	}
	if err := submit("x1"); err != nil {
		t.Fatalf("6 ACs with no batch.opened, within the quota of 10: %v", err)
	}
	before := streamCount(t, f.js)
	if err := submit("x2"); !errors.Is(err, ingress.ErrQuota) || !strings.Contains(err.Error(), "quota_acs") {
		t.Fatalf("6 more with no batch.opened, past the quota of 10: %v", err)
	}
	if after := streamCount(t, f.js); after != before {
		t.Errorf("%d events of the refused batch were published", after-before)
	}
}

// storedPlanPages lists the blobs of tenant that are plan pages, by digest.
func storedPlanPages(t *testing.T, store blob.Store, tenant string) []string {
	t.Helper()
	var out []string
	err := store.(*fileblob.Store).Walk(ctxT(t), func(ref blob.Ref, _ int64) error {
		if ref.Tenant != tenant {
			return nil
		}
		data, _, err := blob.ReadAll(ctxT(t), store, ref)
		if err != nil {
			return err
		}
		if _, err := records.DecodePlanPage(data); err == nil {
			out = append(out, ref.SHA256)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}
