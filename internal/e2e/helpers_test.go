package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

const e2eTenant = "team-a"

// pipeline starts one instance each of the renderer, gater and aggregator: everything
// but the judge, which tests start themselves.
func (e *Env) pipeline() *app.Running {
	e.T.Helper()
	return e.Start(nil, "pipeline", bus.Renderer, bus.Gater, bus.Aggregator)
}

// startOn runs services on a connection the caller owns (so a test can cut it to
// simulate a crash) with its own concurrency. The router is closed at cleanup.
func (e *Env) startOn(nc *nats.Conn, provider judge.Provider, instance string, concurrency int, services ...string) *app.Running {
	e.T.Helper()
	return e.StartOn(nc, app.Options{Services: services, Concurrency: concurrency, Provider: provider, Instance: instance, CloseTimeout: 10 * time.Second})
}

// rawConn is a connection the test may close itself; it is also closed at cleanup.
func (e *Env) rawConn() *nats.Conn {
	e.T.Helper()
	nc, err := nats.Connect(e.NATS.URL)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(nc.Close)
	return nc
}

// JS is a JetStream handle for inspecting the stream.
func (e *Env) JS() jetstream.JetStream {
	e.T.Helper()
	js, err := jetstream.New(e.Conn())
	if err != nil {
		e.T.Fatal(err)
	}
	return js
}

func (e *Env) stream() jetstream.Stream {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := e.JS().Stream(ctx, "TRIBUNAL")
	if err != nil {
		e.T.Fatal(err)
	}
	return st
}

// subjectCount is how many messages the stream holds on subjects matching filter.
func (e *Env) subjectCount(filter string) uint64 {
	e.T.Helper()
	return natstest.SubjectCount(e.T, e.JS(), filter)
}

// subjectMsgs reads every message the stream holds on subject (no wildcards).
func (e *Env) subjectMsgs(subject string) []*jetstream.RawStreamMsg {
	e.T.Helper()
	return natstest.SubjectMsgs(e.T, e.JS(), subject)
}

// jobs reads a batch's job records from the aggregator's bucket.
func (e *Env) jobs(batchID string) []*records.Job {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	recs, err := records.New(e.clientRunning().Buckets).LoadJobs(ctx, e2eTenant, batchID)
	if err != nil {
		e.T.Fatal(err)
	}
	return recs
}

// progress is how many jobs of a batch are final, per the aggregator's shards.
func (e *Env) progress(r *app.Running, batchID string, size int) int {
	e.T.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	n, err := records.New(r.Buckets).Progress(ctx, e2eTenant, batchID, size)
	if err != nil {
		e.T.Fatal(err)
	}
	return n
}

// recording wraps a provider and records every request it receives, with when each
// call started and ended, and how many are in flight.
type recording struct {
	judge.Provider
	mu       sync.Mutex
	calls    []judgeCall
	inFlight map[int]bool
}

type judgeCall struct {
	Req        judge.Request
	Start, End time.Time
}

func recordCalls(p judge.Provider) *recording {
	return &recording{Provider: p, inFlight: map[int]bool{}}
}

func (r *recording) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	r.mu.Lock()
	i := len(r.calls)
	r.calls = append(r.calls, judgeCall{Req: req, Start: time.Now()})
	r.inFlight[i] = true
	r.mu.Unlock()
	resp, err := r.Provider.Complete(ctx, req)
	r.mu.Lock()
	r.calls[i].End = time.Now()
	delete(r.inFlight, i)
	r.mu.Unlock()
	return resp, err
}

// Snapshot copies the calls so far.
func (r *recording) Snapshot() []judgeCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]judgeCall(nil), r.calls...)
}

// newestInFlight is how long ago the most recent call still in flight started, false
// when none is in flight.
func (r *recording) newestInFlight() (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var newest time.Time
	for i := range r.inFlight {
		if s := r.calls[i].Start; s.After(newest) {
			newest = s
		}
	}
	if newest.IsZero() {
		return 0, false
	}
	return time.Since(newest), true
}

// keys counts calls per request key (AC id).
func callsByKey(calls []judgeCall) map[string]int {
	out := map[string]int{}
	for _, c := range calls {
		out[c.Req.Key]++
	}
	return out
}

// requestText joins every text part of every message of a request: everything a model
// would read apart from image bytes.
func requestText(req judge.Request) string {
	var b strings.Builder
	for _, m := range req.Messages {
		for _, p := range m.Parts {
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// scriptedLatency is a scripted provider answering raw winner A after latency.
func scriptedLatency(t *testing.T, latency time.Duration) *scripted.Provider {
	t.Helper()
	p, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab", Latency: latency})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// batchFiles builds an `ab` batch of n ACs. Artifact i is written under oursDir and
// refDir; salt changes every artifact's content (a cache miss); extra goes into the
// batch header (e.g. "positions: swap\n").
type batchFiles struct {
	N               int
	OursDir, RefDir string
	Salt            string
	Extra           string
	Name            string
}

func (bf batchFiles) build() map[string]string {
	if bf.OursDir == "" {
		bf.OursDir = "ours"
	}
	if bf.RefDir == "" {
		bf.RefDir = "ref"
	}
	if bf.Name == "" {
		bf.Name = "e2e"
	}
	files := map[string]string{}
	var sb strings.Builder
	sb.WriteString("version: 1\nname: " + bf.Name + "\n" + bf.Extra + "acs:\n")
	for i := 0; i < bf.N; i++ {
		files[fmt.Sprintf("%s/%d.md", bf.OursDir, i)] = fmt.Sprintf("# Notes %d\nBuild item %d, token tok%s%dx.\n", i, i, bf.Salt, i)
		files[fmt.Sprintf("%s/%d.md", bf.RefDir, i)] = fmt.Sprintf("# Notes %d\nTarget item %d, token tok%s%dy.\n", i, i, bf.Salt, i)
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: the notes are clear\n    ours: %s/%d.md\n    reference: %s/%d.md\n", i+1, bf.OursDir, i, bf.RefDir, i)
	}
	files["batch.yaml"] = sb.String()
	return files
}

// addAC appends one AC entry to a batch file built by batchFiles.build.
func addAC(files map[string]string, id, criterion, ours, reference string) {
	files["batch.yaml"] += fmt.Sprintf("  - id: %s\n    criterion: %s\n    ours: %s\n    reference: %s\n", id, criterion, ours, reference)
}

// rowsByID indexes result rows.
func rowsByID(rows []client.Row) map[string]client.Row {
	out := map[string]client.Row{}
	for _, r := range rows {
		out[r.ACID] = r
	}
	return out
}
