package ingress_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

// TestReviewThroughIngress: a team records a review of its own AC through the ingress,
// named by its token; a review naming anyone else is refused, and team-b's token can
// review none of team-a's ACs (another tenant's envelope, or its own envelope over a
// batch it never submitted). Nothing refused is recorded. A review's case passes the
// ingress with it (and the rules refuse it for an ab job).
func TestReviewThroughIngress(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	b := e2e.WriteBatch(t, e2e.TextBatch(2, "review: {count: 2}\n"))
	sub, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	job, err := client.FindJob(ctxT(t), f.running.Buckets, "team-a", sub.BatchID, "AC-1")
	if err != nil {
		t.Fatal(err)
	}
	answer := []byte(`{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B is the target"}`)
	review := func(tenant, by string) events.Event {
		j := *job
		j.Tenant = tenant
		ev, err := client.ReviewEvent(&j, answer, by, "ingress")
		if err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for name, tc := range map[string]struct {
		tok    string
		ev     events.Event
		code   int
		reason string
	}{
		"a review by someone else":       {tokA, review("team-a", "the-ceo"), http.StatusForbidden, ingress.RefusedEnvelope},
		"team-b in team-a's envelope":    {tokB, review("team-a", ingress.Reviewer("team-b", tokB)), http.StatusForbidden, ingress.RefusedTenant},
		"team-b of a batch it never had": {tokB, review("team-b", ingress.Reviewer("team-b", tokB)), http.StatusUnprocessableEntity, ingress.RefusedJob},
	} {
		code, p := post(t, f, tc.tok, encode(t, tc.ev))
		if code != tc.code || len(p.Refusals) != 1 || p.Refusals[0].Reason != tc.reason {
			t.Errorf("%s: %d %+v, want %d %s", name, code, p, tc.code, tc.reason)
		}
	}
	me := ingress.Reviewer("team-a", tokA)
	// A review naming a case passes the ingress with its case, which the rules refuse for
	// an ab job (reviewed whole): were the case dropped, it would be recorded as a review.
	withCase, err := client.ReviewCaseEvent(job, "c1", []byte(`{"raw_winner":"A","confidence":0.9,"biggest_gap":"slot A is the target"}`), me, "ingress")
	if err != nil {
		t.Fatal(err)
	}
	if code, p := post(t, f, tokA, encode(t, withCase)); code >= 300 {
		t.Fatalf("a review naming a case: %d %+v", code, p)
	}
	// A client of before the console and the ingress named a token's holder alike sends
	// "ingress:<name>": refused, naming the one name it is to send.
	if code, p := post(t, f, tokA, encode(t, review("team-a", "ingress:"+me))); code != http.StatusForbidden || len(p.Refusals) != 1 || !strings.Contains(p.Refusals[0].Message, strconv.Quote(me)) {
		t.Fatalf("team-a's own review under the ingress's former name: %d %+v", code, p)
	}
	if code, p := post(t, f, tokA, encode(t, review("team-a", me))); code >= 300 {
		t.Fatalf("team-a's own review: %d %+v", code, p)
	}
	poll.Until(t, 20*time.Second, "the review recorded", func() (bool, string) {
		j, err := client.FindJob(ctxT(t), f.running.Buckets, "team-a", sub.BatchID, "AC-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(j.Reviews) > 1 || len(j.Reviews) == 1 && (j.Reviews[0].By != me || j.Reviews[0].Via != "ingress" || j.Reviews[0].Changes != 0 || j.Reviews[0].Person.Slot != "B") {
			t.Fatalf("reviews %+v", j.Reviews)
		}
		return len(j.Reviews) == 1, "not yet"
	})
}
