package batchmode_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// fast polls and flushes at test speed.
var fast = batchmode.Config{Linger: 30 * time.Millisecond, PollMin: 5 * time.Millisecond, PollMax: 20 * time.Millisecond}

// newProvider is a batch-mode provider over srv's batch API, its state in store.
func newProvider(t *testing.T, srv *fakellm.Server, store kv.KV, cfg batchmode.Config) *batchmode.Provider {
	t.Helper()
	base, err := openai.New(openai.Config{BaseURL: srv.BaseURL(), Model: "fake-model", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api, err := base.BatchAPI()
	if err != nil {
		t.Fatal(err)
	}
	p, err := batchmode.New(base, api, store, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// request is the n-th test call, under its own scope (a gated event of its own).
func request(n int) (context.Context, judge.Request) {
	t := float32(0)
	return judge.WithScope(context.Background(), fmt.Sprintf("gated-%d", n)), judge.Request{Kind: "ab", Key: fmt.Sprintf("AC-%d", n),
		Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: fmt.Sprintf("compare %d nonce=%x", n, time.Now().UnixNano())}}}},
		Params:   judge.Params{Temperature: &t}}
}

// askAll makes n calls at once and returns their answers and errors by call.
func askAll(p judge.Provider, n int) ([]judge.Response, []error) {
	resps, errs := make([]judge.Response, n), make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, req := request(i)
			resps[i], errs[i] = p.Complete(ctx, req)
		})
	}
	wg.Wait()
	return resps, errs
}

// TestGathersCallsIntoOneProviderBatch: calls made together go out as one provider batch
// of exactly those requests, and each gets its own answer, marked as batched, with the
// body a direct call sends (an explicit temperature 0).
func TestGathersCallsIntoOneProviderBatch(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 20 * time.Millisecond})
	t.Cleanup(srv.Close)
	p := newProvider(t, srv, memkv.New(batchmode.Bucket), fast)
	resps, errs := askAll(p, 40)
	for i := range resps {
		if errs[i] != nil {
			t.Fatalf("call %d: %v", i, errs[i])
		}
		if resps[i].Content != fakellm.DefaultContent || !resps[i].Batch || resps[i].BatchID != "batch_fake_1" || resps[i].PromptTokens == 0 {
			t.Fatalf("call %d: %+v", i, resps[i])
		}
	}
	if got := srv.BatchesCreated(); got != 1 {
		t.Fatalf("%d provider batches, want 1", got)
	}
	if got := srv.BatchRequests(); got != 40 {
		t.Fatalf("%d requests in the provider batch, want 40", got)
	}
	if srv.Calls() != 0 {
		t.Fatalf("%d direct chat calls, want none", srv.Calls())
	}
}

// TestOneFilePerModel: calls to two models go out as two provider batches, one per model,
// as the provider requires.
func TestOneFilePerModel(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	p := newProvider(t, srv, memkv.New(batchmode.Bucket), fast)
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range 10 {
		wg.Go(func() {
			ctx, req := request(i)
			req.Model = []string{"model-a", "model-b"}[i%2]
			var resp judge.Response
			resp, errs[i] = p.Complete(ctx, req)
			if errs[i] == nil && resp.Model != req.Model {
				errs[i] = fmt.Errorf("answered by %s, asked %s", resp.Model, req.Model)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := srv.BatchesCreated(); got != 2 {
		t.Fatalf("%d provider batches, want one per model", got)
	}
}

// TestFlushesAtMaxRequests: a file is flushed when it holds MaxRequests calls.
func TestFlushesAtMaxRequests(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	cfg := fast
	cfg.MaxRequests, cfg.Linger = 10, time.Hour
	p := newProvider(t, srv, memkv.New(batchmode.Bucket), cfg)
	_, errs := askAll(p, 30)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if got := srv.BatchesCreated(); got != 3 {
		t.Fatalf("%d provider batches, want 3 of 10", got)
	}
}

// TestRestartResumesTheBatchInFlight: a judge stopped while its provider batch is in
// progress leaves the batch's state behind; a new one asked the same calls waits for
// that batch and submits nothing.
func TestRestartResumesTheBatchInFlight(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	srv.HoldBatches()
	store := memkv.New(batchmode.Bucket)
	first := newProvider(t, srv, store, fast)
	var wg sync.WaitGroup
	ctx, cancel := context.WithCancel(context.Background())
	for i := range 12 {
		wg.Go(func() {
			c, req := request(i)
			c, stop := context.WithCancel(c)
			defer stop()
			go func() { <-ctx.Done(); stop() }()
			if _, err := first.Complete(c, req); err == nil {
				t.Errorf("call %d answered while its batch was held", i)
			}
		})
	}
	for first.Stats().Submitted == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	first.Close()

	second := newProvider(t, srv, store, fast)
	srv.ReleaseBatches()
	_, errs := askAll(second, 12)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("call %d after the restart: %v", i, err)
		}
	}
	if got := srv.BatchesCreated(); got != 1 {
		t.Fatalf("%d provider batches, want the one submitted before the restart", got)
	}
	if st := second.Stats(); st.Joined != 12 || st.Submitted != 0 {
		t.Fatalf("after the restart: %+v, want 12 calls joined and nothing submitted", st)
	}
	if srv.BatchDuplicates() != 0 {
		t.Fatalf("%d custom_ids submitted twice", srv.BatchDuplicates())
	}
}

// TestExpiredBatchEndsItsCallsBounded: an expired provider batch ends each of its calls
// with an error wrapping ErrUnavailable that names the batch and why.
func TestExpiredBatchEndsItsCallsBounded(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond, BatchExpire: true})
	t.Cleanup(srv.Close)
	p := newProvider(t, srv, memkv.New(batchmode.Bucket), fast)
	_, errs := askAll(p, 5)
	for i, err := range errs {
		if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "provider batch batch_fake_1 (expired)") || !strings.Contains(err.Error(), "batch_expired") {
			t.Fatalf("call %d: %v, want unavailable naming the expired batch", i, err)
		}
	}
}

// TestStuckBatchEndsBounded: a provider batch that never ends is cancelled after
// MaxWait, and its calls end unavailable, naming it.
func TestStuckBatchEndsBounded(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	srv.HoldBatches()
	cfg := fast
	cfg.MaxWait = 50 * time.Millisecond
	p := newProvider(t, srv, memkv.New(batchmode.Bucket), cfg)
	_, errs := askAll(p, 3)
	for i, err := range errs {
		if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "provider batch batch_fake_1 still in_progress") {
			t.Fatalf("call %d: %v, want unavailable naming the stuck batch", i, err)
		}
	}
	if s := srv.BatchStatuses(); len(s) != 1 || s[0] != batchmode.StatusCancelled {
		t.Fatalf("provider batches %v, want the stuck one cancelled", s)
	}
}

// TestRequestErrorFailsOnlyThatCall: a line of the error file fails its own call with
// the status and message; the other calls are answered.
func TestRequestErrorFailsOnlyThatCall(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond, Respond: func(req goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if strings.Contains(req.Messages[0].Content, "compare 3 ") {
			return fakellm.Reply{Status: http.StatusBadRequest, Content: "context too long"}
		}
		return fakellm.Reply{}
	}})
	t.Cleanup(srv.Close)
	p := newProvider(t, srv, memkv.New(batchmode.Bucket), fast)
	_, errs := askAll(p, 6)
	for i, err := range errs {
		if i == 3 {
			if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP 400") || !strings.Contains(err.Error(), "context too long") {
				t.Fatalf("call 3: %v, want its line's HTTP 400", err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
}

// TestInterruptedSubmissionIsAdopted: a group another judge left mid-submission, whose
// provider batch exists, is found by its metadata and its calls answered.
func TestInterruptedSubmissionIsAdopted(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	srv.HoldBatches()
	store := memkv.New(batchmode.Bucket)
	first := newProvider(t, srv, store, fast)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, req := request(0)
		c, stop := context.WithCancel(c)
		defer stop()
		go func() { <-ctx.Done(); stop() }()
		_, _ = first.Complete(c, req)
	}()
	for first.Stats().Submitted == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	first.Close()
	// Put the group back to submitting, as a crash between the create call and its
	// record would have left it.
	lister, err := store.ListKeysFiltered(context.Background(), "g.>")
	if err != nil {
		t.Fatal(err)
	}
	var key string
	for k := range lister.Keys() {
		key = k
	}
	e, err := store.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	rec := strings.Replace(string(e.Value()), `"state":"submitted"`, `"state":"submitting"`, 1)
	if _, err := store.Put(context.Background(), key, []byte(rec)); err != nil {
		t.Fatal(err)
	}
	cfg := fast
	cfg.SubmitStale = time.Nanosecond
	second := newProvider(t, srv, store, cfg)
	srv.ReleaseBatches()
	c, req := request(0)
	if _, err := second.Complete(c, req); err != nil {
		t.Fatalf("after the interrupted submission: %v", err)
	}
	if srv.BatchesCreated() != 1 {
		t.Fatalf("%d provider batches, want 1", srv.BatchesCreated())
	}
}

// TestInterruptedSubmissionIsTakenOver: a group another judge left after uploading its
// file but before creating the provider batch is created from that file by the judge
// that finds it stale, once, and its call answered.
func TestInterruptedSubmissionIsTakenOver(t *testing.T) {
	srv := fakellm.New(fakellm.Options{BatchLatency: 10 * time.Millisecond})
	t.Cleanup(srv.Close)
	store := memkv.New(batchmode.Bucket)
	base, err := openai.New(openai.Config{BaseURL: srv.BaseURL(), Model: "fake-model", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	api, err := base.BatchAPI()
	if err != nil {
		t.Fatal(err)
	}
	// What a judge killed between its upload and its create call leaves behind.
	ctx, req := request(0)
	req.Model = "fake-model"
	cid := batchmode.CustomID(judge.ScopeOf(ctx), req)
	line, err := api.Line(cid, req)
	if err != nil {
		t.Fatal(err)
	}
	fileID, err := api.Upload(context.Background(), "left.jsonl", append(line, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour).UTC()
	rec, _ := json.Marshal(batchmode.Group{ID: "left", State: batchmode.StateSubmitting, Instance: "dead", Remote: batchmode.Remote{InputFileID: fileID},
		CustomIDs: []string{cid}, Created: old, Updated: old})
	if _, err := store.Create(context.Background(), "g.left", rec); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Create(context.Background(), "r."+cid, []byte("left")); err != nil {
		t.Fatal(err)
	}
	cfg := fast
	cfg.SubmitStale = time.Minute
	p := newProvider(t, srv, store, cfg)
	resp, err := p.Complete(ctx, req)
	if err != nil || !resp.Batch {
		t.Fatalf("the left call: %+v %v", resp, err)
	}
	if srv.BatchesCreated() != 1 || srv.BatchRequests() != 1 || p.Stats().Submitted != 0 {
		t.Fatalf("%d provider batches of %d requests, %+v: want the left file created once", srv.BatchesCreated(), srv.BatchRequests(), p.Stats())
	}
}

// TestCustomIDIgnoresNonces: the fences' random nonces do not change a call's id; its
// scope, its text and its sampling do.
func TestCustomIDIgnoresNonces(t *testing.T) {
	mk := func(text string, seed int) judge.Request {
		return judge.Request{Kind: "ab", Model: "m", Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: text}}}}, Params: judge.Params{Seed: &seed}}
	}
	a := batchmode.CustomID("s", mk("x nonce=aaaa y", 1))
	if b := batchmode.CustomID("s", mk("x nonce=bbbb y", 1)); a != b {
		t.Fatalf("nonce changed the id: %s %s", a, b)
	}
	for name, other := range map[string]string{
		"scope": batchmode.CustomID("t", mk("x nonce=aaaa y", 1)),
		"text":  batchmode.CustomID("s", mk("z nonce=aaaa y", 1)),
		"seed":  batchmode.CustomID("s", mk("x nonce=aaaa y", 2)),
	} {
		if other == a {
			t.Errorf("a different %s gave the same id", name)
		}
	}
}

// TestParseResults: answers, error lines and non-200 lines map to their custom_ids; a
// line without one is refused.
func TestParseResults(t *testing.T) {
	out := `{"custom_id":"a","response":{"status_code":200,"body":{"choices":[]}},"error":null}` + "\n"
	errs := `{"custom_id":"b","response":null,"error":{"code":"batch_expired","message":"late"}}` + "\n" +
		`{"custom_id":"c","response":{"status_code":429,"body":{"error":{"message":"slow down","code":"rate_limit_exceeded"}}},"error":null}` + "\n"
	res, err := batchmode.ParseResults([]byte(out), []byte(errs))
	if err != nil {
		t.Fatal(err)
	}
	if res["a"].Body == nil || res["a"].Error != "" {
		t.Errorf("a: %+v", res["a"])
	}
	if res["b"].Error != "batch_expired: late" {
		t.Errorf("b: %+v", res["b"])
	}
	if res["c"].Error != "HTTP 429: rate_limit_exceeded: slow down" {
		t.Errorf("c: %+v", res["c"])
	}
	if _, err := batchmode.ParseResults([]byte(`{"response":null}`)); err == nil {
		t.Error("a line without custom_id was accepted")
	}
}

// TestPolicyMode: a batch gets the mode it asks for when the deployment offers it, the
// deployment's default when it names none, and direct whenever it asks for direct; the
// batch mode is never given without a batch API.
func TestPolicyMode(t *testing.T) {
	for _, c := range []struct {
		policy   batchmode.Policy
		asked    string
		canBatch bool
		want     string
		refused  bool
	}{
		{batchmode.Policy{}, "", true, "direct", false},
		{batchmode.Policy{AllowBatch: true}, "batch", true, "batch", false},
		{batchmode.Policy{AllowBatch: false}, "batch", true, "direct", true},
		{batchmode.Policy{AllowBatch: true}, "batch", false, "direct", true},
		{batchmode.Policy{Default: "batch"}, "", true, "batch", false},
		{batchmode.Policy{Default: "batch"}, "batch", true, "batch", false},
		{batchmode.Policy{Default: "batch"}, "direct", true, "direct", false},
		{batchmode.Policy{Default: "batch"}, "", false, "direct", false},
	} {
		got, refused := c.policy.Mode(c.asked, c.canBatch)
		if got != c.want || refused != c.refused {
			t.Errorf("%+v asked %q (batch API %v): %s refused=%v, want %s refused=%v", c.policy, c.asked, c.canBatch, got, refused, c.want, c.refused)
		}
	}
}
