package ingress_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// listingKeys are every key the blind listing may hold: the page's, an item's blind
// material (client.ReviewItem and its parts), its status and the reviewer's own answer.
var listingKeys = []string{"tenant", "batch_id", "items", "next",
	"item", "kind", "instructions", "shown", "text", "image", "sha256", "media_type", "size", "answer_shape", "missing",
	"status", "yours", "answer", "at", "changes"}

// walkJSON calls key for every object key and str for every string of a decoded JSON
// value.
func walkJSON(v any, key, str func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			key(k)
			walkJSON(e, key, str)
		}
	case []any:
		for _, e := range x {
			walkJSON(e, key, str)
		}
	case string:
		str(x)
	}
}

// TestReviewListingIsBlind (issue 27, item 5): the raw GET /v1/batches/{batch}/review
// shows a reviewer what the judge was shown and nothing of the AC behind it. Decoded
// generically, it holds no key beyond the blind material's, and no string holds the
// judge's answer, the judge's name, an AC id, an artifact's path or digest, a job or
// event id, or a reason the item was queued; once the reviewer answered, their own
// answer, and still nothing of the judge.
func TestReviewListingIsBlind(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	sub := submitReviewed(t, c, 3, "review: {share: 1}\n")
	q := mustQueue(t, f, sub.BatchID)
	if len(q) != 3 {
		t.Fatalf("queue %+v", q)
	}
	var leaks []string
	for _, e := range q {
		j := e.Job()
		leaks = append(leaks, j.ACID, j.CorrelationID, j.BatchSource)
		leaks = append(leaks, j.Inputs...)
		leaks = append(leaks, e.Reasons...)
		if s := ab.SpecOf(j.Spec.KindPart); s != nil {
			leaks = append(leaks, s.Ours.Name, s.Reference.Name, s.Ours.Blob.SHA256, s.Reference.Blob.SHA256)
		}
		for _, call := range j.Calls {
			leaks = append(leaks, call.Judge)
			if call.Record == nil {
				continue
			}
			leaks = append(leaks, call.Record.SHA256)
			data, _, err := blob.ReadAll(ctxT(t), f.env.Store, blob.Ref{Tenant: j.Tenant, SHA256: call.Record.SHA256})
			if err != nil {
				t.Fatal(err)
			}
			cr, err := judge.DecodeCallRecord(data)
			if err != nil {
				t.Fatal(err)
			}
			for _, x := range cr.Exchanges {
				leaks = append(leaks, x.Response, x.Model)
				var answer map[string]any
				if json.Unmarshal([]byte(x.Response), &answer) != nil {
					t.Fatalf("the judge's answer %q is no JSON object", x.Response)
				}
				for _, v := range answer {
					// Its words (a one-letter winner is any slot's name).
					if s, ok := v.(string); ok && len(s) > 3 {
						leaks = append(leaks, s)
					}
				}
			}
		}
	}
	leaks = slices.DeleteFunc(leaks, func(s string) bool { return s == "" })
	if len(leaks) < 3*6 {
		t.Fatalf("too little to look for: %q", leaks)
	}
	const ownAnswer = `{"raw_winner":"tie","confidence":0.5,"biggest_gap":"a person's own words"}`
	check := func(when string, data []byte) {
		t.Helper()
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		// The reviewer's own answer is theirs, in the kind's shape: looked at, then left out.
		for _, it := range v.(map[string]any)["items"].([]any) {
			if y, ok := it.(map[string]any)["yours"].(map[string]any); ok {
				var want any
				_ = json.Unmarshal([]byte(ownAnswer), &want)
				if !reflect.DeepEqual(y["answer"], want) {
					t.Errorf("%s: yours %v, want %s", when, y["answer"], ownAnswer)
				}
				delete(y, "answer")
			}
		}
		n := 0
		walkJSON(v, func(k string) {
			if !slices.Contains(listingKeys, k) {
				t.Errorf("%s: the listing has a key %q", when, k)
			}
		}, func(s string) {
			n++
			for _, l := range leaks {
				if strings.Contains(s, l) {
					t.Errorf("%s: the listing shows %q in %q", when, l, s)
				}
			}
		})
		if n < 3*5 {
			t.Fatalf("%s: %d strings in the listing: %s", when, n, data)
		}
	}
	path := ingress.PathBatches + "/" + sub.BatchID + "/review"
	code, p, data := get(t, f, tokA, path)
	if code != http.StatusOK {
		t.Fatalf("GET review: %d %+v", code, p)
	}
	check("unreviewed", data)

	body := "{"
	for i, e := range q {
		body += fmt.Sprintf("%s%q:%s", map[bool]string{true: ",", false: ""}[i > 0], e.Item, ownAnswer)
	}
	if _, err := c.RecordAnswers(ctxT(t), sub.BatchID, []byte(body+"}")); err != nil {
		t.Fatal(err)
	}
	if _, err := answersApplied(t, c, sub.BatchID, len(q)); err != nil {
		t.Fatal(err)
	}
	_, _, data = get(t, f, tokA, path)
	check("reviewed", data)
	if !strings.Contains(string(data), "a person's own words") {
		t.Errorf("the reviewer's own answer is not in the listing: %s", data)
	}
	// Another reviewer of the team sees it reviewed, not the first one's answer.
	_, _, data = get(t, f, tokA2, path)
	check("reviewed, to another reviewer", data)
	if strings.Contains(string(data), "a person's own words") {
		t.Errorf("another reviewer is shown the first one's answer: %s", data)
	}
}

// answersApplied waits until n items of the listing show the token holder's answer.
func answersApplied(t *testing.T, c *ingress.Client, batchID string, n int) ([]ingress.QueueItem, error) {
	t.Helper()
	for ctx := ctxT(t); ctx.Err() == nil; {
		q, err := c.ReviewQueue(ctx, batchID)
		if err != nil {
			return nil, err
		}
		if k := len(slices.DeleteFunc(slices.Clone(q), func(it ingress.QueueItem) bool { return it.Yours == nil })); k == n {
			return q, nil
		}
		waitBus(t, c)
	}
	return nil, errors.New("the answers were not applied")
}

// waitBus waits a moment for the aggregator, by a round trip to the ingress.
func waitBus(t *testing.T, c *ingress.Client) {
	t.Helper()
	if _, err := c.Progress(ctxT(t), "never-submitted"); err != nil {
		t.Fatal(err)
	}
}

// TestReviewPagesThroughIngress: the listing, the export and the gold set are read a
// page at a time (?after=&limit=), each page ending where the next begins, the client
// reading every page; a limit outside 1..MaxReviewPage or an after that is no item of
// the queue is a 400 naming the parameter.
func TestReviewPagesThroughIngress(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	sub := submitReviewed(t, c, 5, "review: {share: 1}\n")
	q := mustQueue(t, f, sub.BatchID)
	if len(q) != 5 {
		t.Fatalf("queue %+v", q)
	}
	base := ingress.PathBatches + "/" + sub.BatchID
	var items []string
	after := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 items")
		}
		code, p, data := get(t, f, tokA, base+"/review?limit=2&after="+after)
		var page ingress.ReviewQueue
		if code != http.StatusOK || json.Unmarshal(data, &page) != nil || len(page.Items) > 2 {
			t.Fatalf("page %d: %d %+v %s", pages, code, p, data)
		}
		for _, it := range page.Items {
			items = append(items, it.Item)
		}
		if page.Next == "" {
			break
		}
		if page.Next != items[len(items)-1] {
			t.Fatalf("page %d ends at %s, next %s", pages, items[len(items)-1], page.Next)
		}
		after = page.Next
	}
	var want []string
	for _, e := range q {
		want = append(want, e.Item)
	}
	if !slices.Equal(items, want) {
		t.Errorf("pages %v, want the queue %v", items, want)
	}
	code, _, data := get(t, f, tokA, base+"/review/export?limit=2&after="+want[3])
	var ex ingress.ExportPage
	if code != http.StatusOK || json.Unmarshal(data, &ex) != nil || len(ex.Items) != 1 || ex.Items[0].Item != want[4] || ex.Next != "" || len(ex.Answer) != 1 {
		t.Errorf("the export's last page: %d %s", code, data)
	}
	for _, bad := range []struct{ query, says string }{
		{"limit=0", "limit"}, {fmt.Sprintf("limit=%d", ingress.MaxReviewPage+1), "limit"}, {"limit=many", "limit"},
		{"after=item-000000000000", "after"}, {"after=" + q[0].AC, "after"},
	} {
		for _, path := range []string{"/review", "/review/export", "/review/gold"} {
			code, p, _ := get(t, f, tokA, base+path+"?"+bad.query)
			if code != http.StatusBadRequest || p.Class != ingress.ClassRefused || !strings.HasPrefix(p.Error, bad.says+": ") {
				t.Errorf("GET %s?%s: %d %+v", path, bad.query, code, p)
			}
		}
	}

	// The client reads every page, two items a page.
	c.PageItems = 2
	got, err := c.ReviewQueue(ctxT(t), sub.BatchID)
	if err != nil || len(got) != 5 {
		t.Fatalf("ReviewQueue over pages: %d items, %v", len(got), err)
	}
	whole, err := client.BlindReview(ctxT(t), f.env.Store, q)
	if err != nil {
		t.Fatal(err)
	}
	paged, err := c.ReviewExport(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	whole.Images = paged.Images
	if g, w := mustJSON(t, paged), mustJSON(t, whole); g != w {
		t.Errorf("the export over pages\n%s\nwant\n%s", g, w)
	}
	// A file answering three cases' worth is recorded whole; then the gold set is read
	// over pages too.
	answer := `{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B"}`
	body := "{"
	for i, e := range q {
		body += fmt.Sprintf("%s%q:%s", map[bool]string{true: ",", false: ""}[i > 0], e.AC, answer)
	}
	rec, err := c.RecordAnswers(ctxT(t), sub.BatchID, []byte(body+"}"))
	if err != nil || len(rec.Items) != 5 || rec.Recorded[0] != q[0].AC {
		t.Fatalf("answers by AC id: %+v %v", rec, err)
	}
	if _, err := answersApplied(t, c, sub.BatchID, 5); err != nil {
		t.Fatal(err)
	}
	gold, err := c.ReviewGold(ctxT(t), sub.BatchID)
	if err != nil || len(gold) != 5 {
		t.Fatalf("gold over pages: %d, %v", len(gold), err)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// failingStore fails Open of the blobs named in fail with their error.
type failingStore struct {
	blob.Store
	mu   sync.Mutex
	fail map[string]error
}

func (s *failingStore) Open(ctx context.Context, ref blob.Ref) (io.ReadCloser, blob.Attrs, error) {
	s.mu.Lock()
	err := s.fail[ref.SHA256]
	s.mu.Unlock()
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	return s.Store.Open(ctx, ref)
}

// TestReviewFailuresClassified: a listing or an export that cannot be built is answered
// with the classified problem every other answer of the ingress is, never a bare 500: a
// judge call record gone from the store is a 404 naming the item (and the client does not
// take it for the batch not found), a store that cannot answer a 503 to try again that
// names nothing of the store, and the client's error is of the class the ingress said.
// The status alone (?fields=status) reads nothing from the store and is answered still.
func TestReviewFailuresClassified(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	sub := submitReviewed(t, c, 2, "review: {share: 1}\n")
	q := mustQueue(t, f, sub.BatchID)
	var record string
	for _, call := range q[1].Job().Calls {
		if call.Record != nil {
			record = call.Record.SHA256
			break
		}
	}
	if record == "" {
		t.Fatal("no call record")
	}
	store := &failingStore{Store: f.env.Store, fail: map[string]error{}}
	srv := httptest.NewServer(ingress.New(ingress.Config{Tokens: map[string]string{tokA: "team-a"},
		Pub: bus.NewPublisher(f.js, bus.ComparePayloads()), Store: store, Buckets: f.running.Buckets}))
	t.Cleanup(srv.Close)
	g := &fixture{env: f.env, running: f.running, js: f.js, url: srv.URL}
	gc := dial(t, g, tokA)

	for _, c := range []struct {
		name   string
		err    error
		code   int
		class  string
		errcls error
		says   string
	}{
		{"a call record gone", fmt.Errorf("open %s: %w", record, blob.ErrNotFound), http.StatusNotFound, ingress.ClassNotFound, errclass.NotFound, q[1].Item + ": the judge's call"},
		{"a store that cannot answer", fmt.Errorf("s3 at secret-host.internal: %w", blob.ErrUsageUnknown), http.StatusServiceUnavailable, ingress.ClassUnavailable, errclass.Unavailable, "try again"},
		{"a failure of no class", errors.New("disk on fire at /srv/secret"), http.StatusInternalServerError, ingress.ClassInternal, errclass.Internal, "see its log"},
	} {
		store.mu.Lock()
		store.fail[record] = c.err
		store.mu.Unlock()
		for _, path := range []string{"/review", "/review/export"} {
			code, p, data := get(t, g, tokA, ingress.PathBatches+"/"+sub.BatchID+path)
			if code != c.code || p.Class != c.class || !strings.Contains(p.Error, c.says) || strings.Contains(string(data), "secret") || strings.Contains(string(data), q[1].AC) {
				t.Errorf("%s, GET %s: %d %s", c.name, path, code, data)
			}
		}
		_, err := gc.ReviewExport(ctxT(t), sub.BatchID)
		if errclass.Of(err) != c.errcls || errors.Is(err, client.ErrNotFound) {
			t.Errorf("%s: the client's export: %v (class %v)", c.name, err, errclass.Of(err))
		}
		// The status alone reads nothing from the store: it is answered all the same.
		st, err := gc.ReviewStatus(ctxT(t), sub.BatchID)
		if err != nil || len(st) != 2 || st[1].Item != q[1].Item || st[1].Status != ingress.StatusUnreviewed || st[1].Shown != nil || st[1].Instructions != "" {
			t.Errorf("%s: the status: %+v %v", c.name, st, err)
		}
	}
	if code, p, _ := get(t, g, tokA, ingress.PathBatches+"/"+sub.BatchID+"/review?fields=everything"); code != http.StatusBadRequest || !strings.HasPrefix(p.Error, "fields: ") {
		t.Errorf("fields=everything: %d %+v", code, p)
	}
}

// TestReviewCasesThroughIngress: an equivalence AC is reviewed per case through the
// ingress too, each case an item of the blind listing naming no case. An answers file
// keyed by the AC id with several cases is recorded one case a request, as the audit
// re-derives an AC's reviews in the stream's order: the first now, the rest handed back
// keyed by item (Answers.Later), recorded when sent again.
func TestReviewCasesThroughIngress(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	b := e2e.WriteBatch(t, map[string]string{
		"original.md":  "# Skill\nAlways ask for the component first.\n",
		"candidate.md": "# Skill\nAsk for the component.\n",
		"batch.yaml": "version: 1\nname: eq\nreview: {share: 1}\nacs:\n  - id: AC-eq\n    kind: equivalence\n    original: original.md\n    candidate: candidate.md\n    cases:\n" +
			"      - {id: c-happy, tag: happy, input: \"fix a typo\"}\n      - {id: c-edge, tag: edge, input: \"no component named\"}\n",
	})
	sub, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	q := mustQueue(t, f, sub.BatchID)
	if len(q) != 2 || q[0].Case == "" {
		t.Fatalf("queue %+v: want one item per case", q)
	}
	_, _, data := get(t, f, tokA, ingress.PathBatches+"/"+sub.BatchID+"/review")
	for _, leak := range []string{"AC-eq", "c-happy", "c-edge", "original.md", "candidate.md"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("the listing shows %q", leak)
		}
	}
	answer := func(delta string) string {
		return `{"verdict":"equivalent","behaviour_delta":"` + delta + `","efficiency_signal":{"original_directness":3,"candidate_directness":3,"interpretation_notes":"both act at once"}}`
	}
	body := `{"AC-eq":[` + strings.Replace(answer(""), "{", `{"case":"`+q[0].Case+`",`, 1) + "," + strings.Replace(answer(""), "{", `{"case":"`+q[1].Case+`",`, 1) + "]}"
	rec, err := c.RecordAnswers(ctxT(t), sub.BatchID, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Items) != 1 || rec.Items[0].Item != q[0].Item || !strings.HasPrefix(string(rec.Later), `{"`+q[1].Item+`":`) || strings.Contains(string(rec.Later), q[1].Case) {
		t.Fatalf("recorded %+v, later %s", rec, rec.Later)
	}
	if _, err := answersApplied(t, c, sub.BatchID, 1); err != nil {
		t.Fatal(err)
	}
	rec, err = c.RecordAnswers(ctxT(t), sub.BatchID, rec.Later)
	if err != nil || len(rec.Items) != 1 || rec.Items[0].Item != q[1].Item || len(rec.Later) != 0 {
		t.Fatalf("the later answers: %+v %v", rec, err)
	}
	if _, err := answersApplied(t, c, sub.BatchID, 2); err != nil {
		t.Fatal(err)
	}
	for _, e := range mustQueue(t, f, sub.BatchID) {
		if len(e.Reviewers) != 1 {
			t.Errorf("case %s: reviewers %v", e.Case, e.Reviewers)
		}
	}
}
