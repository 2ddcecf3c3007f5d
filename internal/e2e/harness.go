// Package e2e holds end-to-end tests of the whole flow on a real NATS server and real
// blob storage, and the helpers they share.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
)

// Env is a running tribunal for one test: a NATS server, a blob store and whatever
// service instances the test starts.
type Env struct {
	T     *testing.T
	NATS  *natstest.Server
	Store blob.Store
	// BlobDir is the file blob store's folder (file://BlobDir for the CLI's --blob).
	BlobDir string
	Bus     bus.Config
	// ServeFeature serves rubric feature folders for submissions (set by rubric tests).
	ServeFeature func(dir string) (string, error)
}

// NewEnv starts a NATS server and a file blob store.
func NewEnv(t *testing.T) *Env {
	t.Helper()
	s := natstest.Start(t)
	dir := t.TempDir()
	st, err := fileblob.New(dir, fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{T: t, NATS: s, Store: st, BlobDir: dir, Bus: bus.Config{AckWait: 5 * time.Second, MaxDeliver: 5}}
}

// Conn opens a client connection closed at cleanup.
func (e *Env) Conn() *nats.Conn {
	nc, err := nats.Connect(e.NATS.URL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(nc.Close)
	return nc
}

// Start runs services on their own connection, stopped at cleanup (or earlier by Close).
func (e *Env) Start(provider judge.Provider, instance string, services ...string) *app.Running {
	e.T.Helper()
	return e.StartWith(app.Options{Services: services, Concurrency: 16, Provider: provider, Instance: instance, CloseTimeout: 10 * time.Second})
}

// StartWith runs services as o says, on the env's bus and blob store and a connection of
// their own, stopped at cleanup (or earlier by Close).
func (e *Env) StartWith(o app.Options) *app.Running {
	e.T.Helper()
	return e.StartOn(e.Conn(), o)
}

// StartOn is StartWith on a connection the caller owns (a test may cut it to simulate a
// crash).
func (e *Env) StartOn(nc *nats.Conn, o app.Options) *app.Running {
	e.T.Helper()
	o.Bus, o.Store = e.Bus, e.Store
	r, err := app.Start(context.Background(), nc, o)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(r.Close)
	return r
}

// WriteBatch writes files (path -> content) into a fresh folder and loads batch.yaml.
func WriteBatch(t *testing.T, files map[string]string) *batch.Batch {
	t.Helper()
	dir := t.TempDir()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := batch.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ServeRubricFeature copies the example rubric feature (examples/rubric-feature of the
// repository at root) into a fresh folder, its page.html replaced by page unless page is
// "", and serves the folder on loopback, as a team's preview deployment would be. It
// returns the folder and the server's URL.
func ServeRubricFeature(t *testing.T, root, page string) (dir, url string) {
	t.Helper()
	dir = t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join(root, "examples", "rubric-feature"))); err != nil {
		t.Fatal(err)
	}
	if page != "" {
		if err := os.WriteFile(filepath.Join(dir, "page.html"), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return dir, srv.URL
}

// Scripted is the scripted judge with o; when answers is not nil, it gives the request
// keys of answers their values (through an answers file) and o's defaults to the rest.
// It counts every key's calls (CallsFor).
func Scripted(t testing.TB, o scripted.Options, answers map[string]any) *scripted.Provider {
	t.Helper()
	o.CountEveryKey = true
	if answers != nil {
		path := filepath.Join(t.TempDir(), "answers.json")
		data, err := json.Marshal(answers)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		o.AnswersFile = path
	}
	p, err := scripted.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// OpenAIJudge is the openai provider, as model, against a local OpenAI-compatible server
// answering as opts say, with quick retries; the server is closed at cleanup.
func OpenAIJudge(t testing.TB, model string, opts fakellm.Options) (*openai.Provider, *fakellm.Server) {
	t.Helper()
	fake := fakellm.New(opts)
	t.Cleanup(fake.Close)
	p, err := openai.New(openai.Config{BaseURL: fake.BaseURL(), Model: model, Concurrency: 16,
		MaxAttempts: 2, BackoffBase: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return p, fake
}

// RubricVerdict is a rubric judge's answer over argus's default rubric: every dimension
// scored 1 but those in low, each against its rubric anchor, with the claims allPass and
// failed as given (a test may make them contradict the scores).
func RubricVerdict(low map[string]float64, allPass bool, failed []string) map[string]any {
	r := argus.DefaultRubric()
	dims := map[string]any{}
	for _, d := range r.DimensionNames() {
		score, ok := low[d]
		if !ok {
			score = 1
		}
		dims[d] = map[string]any{"score": score, "anchor": r.Dimensions[d].Anchor, "evidence": "e"}
	}
	return map[string]any{"dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": allPass, "failed_dimensions": failed, "notes": "n"}
}

// TextBatch builds a batch of n `ab` ACs over small distinct text files.
func TextBatch(n int, extra string) map[string]string {
	files := map[string]string{}
	var sb strings.Builder
	sb.WriteString("version: 1\nname: e2e\n" + extra + "acs:\n")
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("AC-%d", i+1)
		files[fmt.Sprintf("ours/%d.md", i)] = fmt.Sprintf("# Release notes %d\nOur build, item %d.\n", i, i)
		files[fmt.Sprintf("ref/%d.md", i)] = fmt.Sprintf("# Release notes %d\nThe target, item %d.\n", i, i)
		fmt.Fprintf(&sb, "  - id: %s\n    criterion: release notes are clear\n    ours: ours/%d.md\n    reference: ref/%d.md\n", id, i, i)
	}
	files["batch.yaml"] = sb.String()
	return files
}

// Submit submits b under tenant and waits for its completion.
func (e *Env) Submit(b *batch.Batch, tenant string) client.Submission {
	e.T.Helper()
	r := e.clientRunning()
	s := &client.Submitter{Pub: r.Pub, Store: e.Store, ServeFeature: e.ServeFeature}
	sub, err := s.Submit(context.Background(), b, tenant, client.NewBatchID(b))
	if err != nil {
		e.T.Fatal(err)
	}
	return sub
}

// Wait waits for a batch's completion and loads its results.
func (e *Env) Wait(sub client.Submission, timeout time.Duration) *client.Results {
	e.T.Helper()
	r := e.clientRunning()
	e.watch(r, sub, timeout)
	res, err := client.Load(context.Background(), r.Buckets, e.Store, sub.Tenant, sub.BatchID)
	if err != nil {
		e.T.Fatal(err)
	}
	return res
}

// WaitComplete waits for a batch's completion without loading its results.
func (e *Env) WaitComplete(sub client.Submission, timeout time.Duration) {
	e.T.Helper()
	e.watch(e.clientRunning(), sub, timeout)
}

func (e *Env) watch(r *app.Running, sub client.Submission, timeout time.Duration) {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if _, err := client.Watch(ctx, r.Buckets, sub.Tenant, sub.BatchID, 50*time.Millisecond, func(client.Progress) {}); err != nil {
		e.T.Fatalf("batch %s did not complete: %v", sub.BatchID, err)
	}
}

// clientRunning returns a bus handle with no services, for submitting and reading.
func (e *Env) clientRunning() *app.Running {
	e.T.Helper()
	return e.StartWith(app.Options{Services: []string{}})
}

// WaitBatchCompleted waits until the stream holds the batch.completed event of a
// batch: the aggregator records the completion in KV before it publishes the event, so a
// reader of the stream (an audit) can otherwise arrive between the two.
func WaitBatchCompleted(t testing.TB, js jetstream.JetStream, tenant, batchID string) {
	t.Helper()
	WaitAttemptCompleted(t, js, tenant, batchID, 0)
}

// WaitAttemptCompleted is WaitBatchCompleted for a redriven batch: it waits for the
// batch.completed event of attempt (the nth redrive) or a later one, since the earlier
// attempts' events are in the stream already.
func WaitAttemptCompleted(t testing.TB, js jetstream.JetStream, tenant, batchID string, attempt int) {
	t.Helper()
	subject := "tribunal." + tenant + ".batch.completed"
	poll.Until(t, 15*time.Second, fmt.Sprintf("the batch.completed event of %s, attempt %d, in the stream", batchID, attempt), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := js.Stream(ctx, "TRIBUNAL")
		if err != nil {
			return false, err.Error()
		}
		m, err := st.GetLastMsgForSubject(ctx, subject)
		if err != nil {
			return false, err.Error()
		}
		ev, err := events.Decode(m.Data)
		if err != nil {
			return false, err.Error()
		}
		return ev.BatchID == batchID && ev.Attempt >= attempt, fmt.Sprintf("the last is %s, attempt %d", ev.BatchID, ev.Attempt)
	})
}
