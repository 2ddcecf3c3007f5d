package ingress_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

const (
	tokA  = "team-a-token-0123456789abcdef"
	tokB  = "team-b-token-0123456789abcdef"
	tokOp = "operator-token-0123456789abcdef"
	// tokA2 is another of team-a's people: another reviewer.
	tokA2 = "team-a-second-token-0123456789abcdef"
	// tokRA and tokRB are reviewers' tokens of team-a and team-b (tokens.RoleReviewer).
	tokRA = "team-a-reviewer-token-0123456789abcdef"
	tokRB = "team-b-reviewer-token-0123456789abcdef"
)

type fixture struct {
	env     *e2e.Env
	running *app.Running
	js      jetstream.JetStream
	url     string
}

// start runs the four services, and an ingress in front of them on its own connection.
func start(t *testing.T, services bool, cfg ingress.Config) *fixture {
	t.Helper()
	env := e2e.NewEnv(t)
	var r *app.Running
	if services {
		p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A", "equivalence": "equivalent", "runner": "on"}, Named: "ab"})
		if err != nil {
			t.Fatal(err)
		}
		r = env.Start(p, "test")
	} else {
		r = env.Start(nil, "test", []string{}...)
	}
	js, err := jetstream.New(env.Conn())
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = map[string]string{tokA: "team-a", tokA2: "team-a", tokB: "team-b", tokOp: "*", tokRA: "team-a:reviewer", tokRB: "team-b:reviewer"}
	cfg.Pub, cfg.Store, cfg.Buckets = bus.NewPublisher(js, bus.ComparePayloads()), env.Store, r.Buckets
	srv := httptest.NewServer(ingress.New(cfg))
	t.Cleanup(srv.Close)
	return &fixture{env: env, running: r, js: js, url: srv.URL}
}

func dial(t *testing.T, f *fixture, tok string) *ingress.Client {
	t.Helper()
	c, err := ingress.Dial(context.Background(), f.url, tok, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestSubmitWatchResultsThroughIngress: a team holding only a token submits a batch with
// the same Submitter a direct submission uses (the ingress client is its Publisher and
// blob Store), follows it to completion and reads exactly the results the services'
// state holds.
func TestSubmitWatchResultsThroughIngress(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	if c.Tenant() != "team-a" {
		t.Fatalf("token of team-a reads as %q", c.Tenant())
	}
	b := e2e.WriteBatch(t, e2e.TextBatch(3, ""))
	s := &client.Submitter{Pub: c, Store: c}
	sub, err := s.Submit(ctxT(t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	var seen []client.Progress
	done, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(p client.Progress) { seen = append(seen, p) })
	if err != nil {
		t.Fatal(err)
	}
	if done.Summary.Total != 3 || seen[len(seen)-1].Done != 3 {
		t.Fatalf("completion %+v after %+v", done.Summary, seen)
	}
	got, err := c.Results(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	want, err := client.Load(ctxT(t), f.running.Buckets, f.env.Store, "team-a", sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	// results.json and every file beside it, as `tribunal results -o` writes them.
	gotDir, err := got.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	wantDir, err := want.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.json", "manifest.json"} {
		g, err1 := os.ReadFile(filepath.Join(gotDir, name))
		w, err2 := os.ReadFile(filepath.Join(wantDir, name))
		if err1 != nil || err2 != nil || !bytes.Equal(g, w) {
			t.Errorf("%s through the ingress differs from the services' (%v, %v):\n%s\nwant\n%s", name, err1, err2, g, w)
		}
	}
	if len(got.Rows) != 3 || got.Manifest == nil {
		t.Fatalf("results %+v", got)
	}
	// team-b's token sees nothing of team-a's batch.
	other := dial(t, f, tokB)
	if p, err := other.Progress(ctxT(t), sub.BatchID); p != nil || err != nil {
		t.Errorf("team-b reads team-a's batch: %+v %v", p, err)
	}
	if _, err := other.Results(ctxT(t), sub.BatchID); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("team-b reads team-a's results: %v", err)
	}
}

// post sends raw events to POST /v1/events.
func post(t *testing.T, f *fixture, tok string, raw ...[]byte) (int, ingress.Problem) {
	t.Helper()
	body, err := msgpack.Marshal(raw)
	if err != nil {
		t.Fatal(err)
	}
	return send(t, f, tok, ingress.MediaMsgpack, body)
}

func send(t *testing.T, f *fixture, tok, contentType string, body []byte) (int, ingress.Problem) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.url+ingress.PathEvents, bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var p ingress.Problem
	data, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(data, &p)
	return resp.StatusCode, p
}

func encode(t *testing.T, ev events.Event) []byte {
	t.Helper()
	data, err := events.Encode(ev)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// submitted is a valid job.submitted of tenant for AC-1, its blobs those given.
func submitted(tenant string, ours, ref blob.Attrs) events.Event {
	b := func(a blob.Attrs) *events.Blob {
		return &events.Blob{SHA256: a.Ref.SHA256, MediaType: a.MediaType, Size: a.Size}
	}
	spec := events.JobSpec{Kind: events.KindAB, ACID: "AC-1", Criterion: "c", KindPart: &ab.Spec{
		Ours: events.Source{Name: "o.md", Blob: b(ours)}, Reference: events.Source{Name: "r.md", Blob: b(ref)}, Threshold: 0.75}}
	return client.SubmittedEvent(tenant, "batch-1", "AC-1", 0, &events.JobSubmitted{Spec: spec, BatchSize: 1})
}

// TestIngressRefuses: every event the ingress will not publish is refused with the AC and
// the field, and nothing of a request with a refused event is published.
func TestIngressRefuses(t *testing.T) {
	m := telemetry.Reset()
	f := start(t, false, ingress.Config{})
	a, b := dial(t, f, tokA), dial(t, f, tokB)
	ctx := ctxT(t)
	ours, err := blob.PutBytes(ctx, a, "team-a", []byte("ours\n"), "text/markdown")
	if err != nil {
		t.Fatal(err)
	}
	ref, err := blob.PutBytes(ctx, a, "team-a", []byte("ref\n"), "text/markdown")
	if err != nil {
		t.Fatal(err)
	}
	onlyB, err := blob.PutBytes(ctx, b, "team-b", []byte("team-b's secret\n"), "text/markdown")
	if err != nil {
		t.Fatal(err)
	}
	valid := submitted("team-a", ours, ref)

	otherTenant := submitted("team-b", ours, ref)
	verdict := events.New(&events.GatesFailed{Kind: events.KindAB, ACID: "AC-1", Blocked: "forged"}, "team-a", "batch-1", "AC-1", 0, "", nil)
	forgedID := valid
	forgedID.ID = events.NewID(events.TypeVerdictEmitted, "team-b", "batch-9", "AC-1", 0, "")
	attempt := events.NewAttempt(valid.Payload, "team-a", "batch-1", "AC-1", 0, "", 1, nil)
	stolen := submitted("team-a", onlyB, ref)
	wrongSize := ours
	wrongSize.Size++
	lying := submitted("team-a", wrongSize, ref)
	spot := client.SpotcheckEvent("team-a", "batch-1", &events.SpotcheckRecorded{ACID: "AC-404", Approved: true})

	cases := []struct {
		name        string
		raw         []byte
		status      int
		field, kind string
		reason      string
	}{
		{"another tenant's envelope", encode(t, otherTenant), http.StatusForbidden, "envelope.tenant", "job.submitted", ingress.RefusedTenant},
		{"a service's event type", encode(t, verdict), http.StatusForbidden, "envelope.type", "gates.failed", ingress.RefusedType},
		{"an id of the client's choosing", encode(t, forgedID), http.StatusBadRequest, "envelope.id", "job.submitted", ingress.RefusedID},
		{"a redrive attempt", encode(t, attempt), http.StatusForbidden, "envelope.attempt", "job.submitted", ingress.RefusedEnvelope},
		{"another tenant's blob", encode(t, stolen), http.StatusUnprocessableEntity, "spec.ab.ours.blob.sha256", "job.submitted", ingress.RefusedBlob},
		{"a blob described otherwise", encode(t, lying), http.StatusUnprocessableEntity, "spec.ab.ours.blob.size", "job.submitted", ingress.RefusedBlob},
		{"a spot-check of no submitted job", encode(t, spot), http.StatusUnprocessableEntity, "ac_id", "spotcheck.recorded", ingress.RefusedJob},
		{"bytes that are no event", []byte("junk"), http.StatusBadRequest, "envelope", "", ingress.RefusedMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := m.Value("tribunal_refusals_total", "service=ingress", "reason="+c.reason)
			// The refused event travels with a valid one: neither is published.
			status, p := post(t, f, tokA, encode(t, valid), c.raw)
			if status != c.status || len(p.Refusals) != 1 {
				t.Fatalf("status %d, problem %+v; want %d and one refusal", status, p, c.status)
			}
			r := p.Refusals[0]
			if r.Index != 1 || r.Field != c.field || r.Type != c.kind || r.Reason != c.reason {
				t.Errorf("refusal %+v; want index 1, field %s, type %s, reason %s", r, c.field, c.kind, c.reason)
			}
			if c.kind == "job.submitted" && (r.AC != "AC-1" || !strings.Contains(r.Message, c.field)) {
				t.Errorf("refusal %+v does not name the AC and the field", r)
			}
			if got := m.Value("tribunal_refusals_total", "service=ingress", "reason="+c.reason); got != before+1 {
				t.Errorf("refusals counted %v, want %v", got, before+1)
			}
		})
	}
	if n := streamCount(t, f.js); n != 0 {
		t.Fatalf("refused requests published %d events", n)
	}

	// Tokens: none, an unknown one, an operator's.
	for tok, want := range map[string]int{"": http.StatusUnauthorized, "not-a-token-0123456789": http.StatusUnauthorized, tokOp: http.StatusForbidden} {
		if status, _ := post(t, f, tok, encode(t, valid)); status != want {
			t.Errorf("token %q: status %d, want %d", tok, status, want)
		}
	}

	// The valid event alone is published, once, under the id the ingress derives, even
	// when sent twice.
	for range 2 {
		if status, p := post(t, f, tokA, encode(t, valid)); status != http.StatusAccepted {
			t.Fatalf("valid event: %d %+v", status, p)
		}
	}
	// The same event as JSON, with the wire form's names, is the same event.
	asJSON := map[string]any{"v": 1, "id": valid.ID, "type": valid.Type, "tenant": valid.Tenant, "batch": valid.BatchID,
		"job": valid.JobID, "iter": 0, "data": map[string]any{"spec": map[string]any{"kind": "ab", "ac_id": "AC-1", "criterion": "c",
			"ab": map[string]any{"ours": map[string]any{"name": "o.md", "blob": map[string]any{"sha256": ours.Ref.SHA256, "media_type": ours.MediaType, "size": ours.Size}},
				"reference": map[string]any{"name": "r.md", "blob": map[string]any{"sha256": ref.Ref.SHA256, "media_type": ref.MediaType, "size": ref.Size}},
				"threshold": 0.75}}, "index": 0, "batch_size": 1}}
	body, _ := json.Marshal(map[string]any{"events": []any{asJSON}})
	if status, p := send(t, f, tokA, ingress.MediaJSON, body); status != http.StatusAccepted {
		t.Fatalf("JSON event: %d %+v", status, p)
	}
	if n := streamCount(t, f.js); n != 1 {
		t.Fatalf("stream holds %d events, want the one valid event once", n)
	}
	// Every answer is counted by its route and code.
	if got := m.Value("tribunal_ingress_requests_total", "route=POST "+ingress.PathEvents, "code=202"); got != 3 {
		t.Errorf("accepted event requests counted %v, want 3", got)
	}
	if got := m.Value("tribunal_ingress_requests_total", "route=POST "+ingress.PathEvents, "code=401"); got != 2 {
		t.Errorf("unauthenticated event requests counted %v, want 2", got)
	}
}

func streamCount(t *testing.T, js jetstream.JetStream) uint64 {
	t.Helper()
	st, err := js.Stream(ctxT(t), "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// TestIngressBlobs: a team stores, describes and reads its own blobs and no other
// team's; the size limit and an expected digest hold.
func TestIngressBlobs(t *testing.T) {
	f := start(t, false, ingress.Config{MaxArtifactBytes: 1024})
	a, b := dial(t, f, tokA), dial(t, f, tokB)
	ctx := ctxT(t)
	data := []byte("<p>team-a's page</p>")
	attrs, err := blob.PutBytes(ctx, a, "team-a", data, "text/html")
	if err != nil {
		t.Fatal(err)
	}
	got, read, err := blob.ReadAll(ctx, a, attrs.Ref)
	if err != nil || !bytes.Equal(got, data) || read != attrs || attrs.MediaType != "text/html" || attrs.Size != int64(len(data)) {
		t.Fatalf("read back %q %+v %v; stored %+v", got, read, err, attrs)
	}
	if st, err := a.Stat(ctx, attrs.Ref); err != nil || st != attrs {
		t.Fatalf("Stat %+v %v", st, err)
	}
	// The bytes are where the services read them: under team-a in the shared store.
	if st, err := f.env.Store.Stat(ctx, attrs.Ref); err != nil || st != attrs {
		t.Fatalf("services' store: %+v %v", st, err)
	}
	// team-b cannot name team-a's blob: its token's tenant is team-b ...
	if _, err := b.Stat(ctx, blob.Ref{Tenant: "team-b", SHA256: attrs.Ref.SHA256}); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("team-b reads team-a's digest: %v", err)
	}
	// ... and a ref of another tenant is refused before any request.
	if _, _, err := b.Open(ctx, attrs.Ref); !errors.Is(err, blob.ErrInvalidRef) {
		t.Errorf("team-b opens a team-a ref: %v", err)
	}
	if _, err := b.Put(ctx, "team-a", bytes.NewReader(data), blob.PutOptions{}); !errors.Is(err, blob.ErrInvalidRef) {
		t.Errorf("team-b writes under team-a: %v", err)
	}
	// Over the limit, with and without a declared length.
	big := bytes.Repeat([]byte("x"), 2048)
	if _, err := blob.PutBytes(ctx, a, "team-a", big, ""); !errors.Is(err, blob.ErrTooLarge) {
		t.Errorf("2 KiB over a 1 KiB limit: %v", err)
	}
	if _, err := a.Put(ctx, "team-a", io.MultiReader(bytes.NewReader(big)), blob.PutOptions{}); !errors.Is(err, blob.ErrTooLarge) {
		t.Errorf("2 KiB streamed over a 1 KiB limit: %v", err)
	}
	if _, err := a.Put(ctx, "team-a", bytes.NewReader(data), blob.PutOptions{ExpectedSHA256: strings.Repeat("0", 64)}); !errors.Is(err, blob.ErrDigestMismatch) {
		t.Errorf("a wrong expected digest: %v", err)
	}
	// An artifact served back is never sniffed or run as a page.
	req, _ := http.NewRequest(http.MethodGet, f.url+ingress.PathBlobs+"/"+attrs.Ref.SHA256, nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(resp.Header.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("blob served with headers %v", resp.Header)
	}
}
