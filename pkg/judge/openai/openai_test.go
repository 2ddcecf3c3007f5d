package openai

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/syncbuf"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// newServer starts a fake server that is closed with the test.
func newServer(t *testing.T, opts fakellm.Options) *fakellm.Server {
	t.Helper()
	s := fakellm.New(opts)
	t.Cleanup(s.Close)
	return s
}

// newProvider builds a provider against s with test-sized timings; edit adjusts the
// config before New.
func newProvider(t *testing.T, s *fakellm.Server, edit func(*Config)) *Provider {
	t.Helper()
	cfg := Config{
		BaseURL:     s.BaseURL(),
		APIKey:      "test-key",
		Model:       "judge-model",
		Timeout:     2 * time.Second,
		MaxAttempts: 3,
		BackoffBase: 10 * time.Millisecond,
		BackoffMax:  40 * time.Millisecond,
		Instance:    "test",
		Logger:      slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	if edit != nil {
		edit(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return p
}

var verdictSchema = &judge.Schema{
	Name: "ab_verdict",
	JSON: json.RawMessage(`{"type":"object","properties":{"raw_winner":{"type":"string","enum":["A","B","tie"]},"confidence":{"type":"number"},"biggest_gap":{"type":"string"}},"required":["raw_winner","confidence","biggest_gap"],"additionalProperties":false}`),
}

func simpleRequest() judge.Request {
	return judge.Request{
		Kind: "ab",
		Key:  "AC-1",
		Messages: []judge.Message{
			{Role: "system", Parts: []judge.Part{{Text: "You are a blind judge. Answer in JSON."}}},
			{Role: "user", Parts: []judge.Part{{Text: "Compare A and B."}}},
		},
		Schema: verdictSchema,
	}
}

func ptr[T any](v T) *T { return &v }

func TestRequestOnTheWire(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, nil)

	png := []byte("\x89PNG\r\n\x1a\nfake-image-bytes")
	req := judge.Request{
		Kind: "ab",
		Key:  "AC-7",
		Messages: []judge.Message{
			{Role: "system", Parts: []judge.Part{{Text: "You are a blind judge. "}, {Text: "Answer in JSON."}}},
			{Role: "user", Parts: []judge.Part{
				{Text: "Slot A:"},
				{Image: &judge.Image{MediaType: "image/png", Data: png}},
				{Text: "Slot B:"},
				{Image: &judge.Image{MediaType: "image/jpeg", Data: []byte("jpeg-bytes")}},
			}},
		},
		Schema: verdictSchema,
		Params: judge.Params{Temperature: ptr[float32](0.5), Seed: ptr(42), MaxTokens: 256},
	}
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp.Content != fakellm.DefaultContent || resp.Model != "judge-model" || resp.Attempts != 1 {
		t.Errorf("response = %+v", resp)
	}
	if resp.PromptTokens <= 85*2 || resp.CompletionTokens <= 0 || resp.Latency <= 0 {
		t.Errorf("usage/latency not filled: %+v", resp)
	}

	recs := s.Records()
	if len(recs) != 1 {
		t.Fatalf("server saw %d requests, want 1", len(recs))
	}
	rec := recs[0]
	if rec.Path != "/v1/chat/completions" {
		t.Errorf("path = %q", rec.Path)
	}
	if got := rec.Header.Get("Authorization"); got != "Bearer test-key" {
		t.Errorf("Authorization = %q", got)
	}
	got := rec.Request
	if got.Model != "judge-model" {
		t.Errorf("model = %q", got.Model)
	}
	if len(got.Messages) != 2 {
		t.Fatalf("messages = %d, want 2", len(got.Messages))
	}
	sys := got.Messages[0]
	if sys.Role != "system" || sys.Content != "You are a blind judge. Answer in JSON." || sys.MultiContent != nil {
		t.Errorf("system message = %+v (text-only messages should use plain content)", sys)
	}
	user := got.Messages[1]
	if user.Role != "user" || user.Content != "" || len(user.MultiContent) != 4 {
		t.Fatalf("user message = %+v", user)
	}
	if p0 := user.MultiContent[0]; p0.Type != goopenai.ChatMessagePartTypeText || p0.Text != "Slot A:" {
		t.Errorf("part 0 = %+v", p0)
	}
	urls := fakellm.ImageURLs(got)
	wantPNG := "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
	wantJPEG := "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString([]byte("jpeg-bytes"))
	if len(urls) != 2 || urls[0] != wantPNG || urls[1] != wantJPEG {
		t.Errorf("image urls = %q, want %q and %q", urls, wantPNG, wantJPEG)
	}
	if p1 := user.MultiContent[1]; p1.Type != goopenai.ChatMessagePartTypeImageURL {
		t.Errorf("part 1 type = %q", p1.Type)
	}

	rf := got.ResponseFormat
	if rf == nil || rf.Type != goopenai.ChatCompletionResponseFormatTypeJSONSchema || rf.JSONSchema == nil {
		t.Fatalf("response_format = %+v", rf)
	}
	if rf.JSONSchema.Name != "ab_verdict" || !rf.JSONSchema.Strict {
		t.Errorf("json_schema = name %q strict %v", rf.JSONSchema.Name, rf.JSONSchema.Strict)
	}
	schemaJSON, err := json.Marshal(rf.JSONSchema.Schema)
	if err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(t, schemaJSON, verdictSchema.JSON) {
		t.Errorf("schema = %s, want %s", schemaJSON, verdictSchema.JSON)
	}
	if got.Temperature != 0.5 || got.Seed == nil || *got.Seed != 42 || got.MaxTokens != 256 {
		t.Errorf("params: temperature %v seed %v max_tokens %d", got.Temperature, got.Seed, got.MaxTokens)
	}
}

func TestZeroTemperatureIsSent(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, nil)

	req := simpleRequest()
	req.Params.Temperature = ptr[float32](0)
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	req.Params.Temperature = nil
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	recs := s.Records()
	var withZero, without map[string]json.RawMessage
	if err := json.Unmarshal(recs[0].Body, &withZero); err != nil {
		t.Fatalf("body 1 is not JSON: %v\n%s", err, recs[0].Body)
	}
	if err := json.Unmarshal(recs[1].Body, &without); err != nil {
		t.Fatal(err)
	}
	if string(withZero["temperature"]) != "0" {
		t.Errorf(`temperature 0 sent as %q, want an explicit "temperature":0`, withZero["temperature"])
	}
	if _, ok := without["temperature"]; ok {
		t.Errorf("unset temperature was sent: %s", without["temperature"])
	}
}

func TestReasoningModelGetsMaxCompletionTokens(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, func(c *Config) { c.Model = "o3-mini" })
	req := simpleRequest()
	req.Params.MaxTokens = 300
	if _, err := p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	got := s.Requests()[0]
	if got.MaxTokens != 0 || got.MaxCompletionTokens != 300 {
		t.Errorf("max_tokens %d, max_completion_tokens %d", got.MaxTokens, got.MaxCompletionTokens)
	}
}

func TestRetryAfter429(t *testing.T) {
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if n == 1 {
			return fakellm.Reply{Status: 429, Content: "slow down", Header: http.Header{"Retry-After": {"1"}}}
		}
		return fakellm.Reply{}
	}})
	// BackoffMax 1s caps Retry-After at 4s, so the server's 1s is honoured as is.
	p := newProvider(t, s, func(c *Config) { c.BackoffMax = time.Second })

	start := time.Now()
	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	elapsed := time.Since(start)
	if s.Calls() != 2 || resp.Attempts != 2 {
		t.Errorf("calls %d attempts %d, want 2 and 2", s.Calls(), resp.Attempts)
	}
	recs := s.Records()
	if gap := recs[1].Start.Sub(recs[0].Start); gap < 950*time.Millisecond || gap > 2*time.Second {
		t.Errorf("retry came %v after the 429, want about 1s", gap)
	}
	if resp.Latency < 950*time.Millisecond || resp.Latency > elapsed {
		t.Errorf("latency %v should cover the whole call (%v)", resp.Latency, elapsed)
	}
}

func TestRetryAfterIsCapped(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if n == 1 {
			return fakellm.Reply{Status: 429, Header: http.Header{"Retry-After": {"3600"}}}
		}
		return fakellm.Reply{}
	}})
	p := newProvider(t, s, func(c *Config) { c.BackoffMax = 50 * time.Millisecond }) // cap 200ms
	if _, err := p.Complete(context.Background(), simpleRequest()); err != nil {
		t.Fatal(err)
	}
	// The server asked for an hour; the gap between its two requests shows the cap (the
	// upper margin is for loaded machines).
	recs := s.Records()
	if gap := recs[1].Start.Sub(recs[0].Start); gap < 150*time.Millisecond || gap > 2*time.Second {
		t.Errorf("retry came %v after the 429, want the 200ms cap", gap)
	}
}

func TestRetryAfterBeyondDeadlineGivesUpAtOnce(t *testing.T) {
	s := newServer(t, fakellm.Options{Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Status: 429, Content: "quota", Header: http.Header{"Retry-After": {"10"}}}
	}})
	p := newProvider(t, s, func(c *Config) { c.BackoffMax = 10 * time.Second })
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Complete(ctx, simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP 429") || !judge.RateLimited(err) {
		t.Fatalf("err = %v, want ErrUnavailable mentioning the 429 and telling it apart (judge.RateLimited)", err)
	}
	if d := time.Since(start); d > 300*time.Millisecond {
		t.Errorf("took %v; a wait past the deadline should give up at once", d)
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		header http.Header
		want   time.Duration
		ok     bool
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second, true},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond, true},
		{http.Header{"Retry-After": {now.Add(3 * time.Second).Format(http.TimeFormat)}}, 3 * time.Second, true},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0, true},
		{http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"9"}}, 1500 * time.Millisecond, true},
		{http.Header{"Retry-After": {"soon"}}, 0, false},
		{http.Header{"Retry-After": {"-3"}}, 0, false},
		{http.Header{}, 0, false},
	} {
		got, ok := parseRetryAfter(tc.header, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%v) = %v, %v; want %v, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func Test500ThenSuccess(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if n == 1 {
			return fakellm.Reply{Status: 500, Content: "boom"}
		}
		return fakellm.Reply{}
	}})
	var logs syncbuf.Buffer
	p := newProvider(t, s, func(c *Config) { c.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.Attempts != 2 || s.Calls() != 2 {
		t.Errorf("attempts %d calls %d, want 2", resp.Attempts, s.Calls())
	}
	for _, want := range []string{"provider=openai", "instance=test", "model=judge-model", "attempt=1", "status=500", "key=AC-1"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("retry log %q lacks %q", logs.String(), want)
		}
	}
}

func TestAlways500IsUnavailable(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Status: 500, Content: "overloaded"}
	}})
	p := newProvider(t, s, func(c *Config) { c.MaxAttempts = 4 })
	_, err := p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
	if s.Calls() != 4 {
		t.Errorf("calls = %d, want MaxAttempts (4)", s.Calls())
	}
	for _, want := range []string{"HTTP 500", "overloaded", "4 attempt"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 500 {
		t.Errorf("the go-openai error should stay reachable: %#v", apiErr)
	}
}

func TestNonJSONErrorBody(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Status: 502, RawBody: "<html>Bad Gateway</html>"}
	}})
	p := newProvider(t, s, func(c *Config) { c.MaxAttempts = 2 })
	_, err := p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP 502: <html>Bad Gateway</html>") {
		t.Fatalf("err = %v", err)
	}
	if s.Calls() != 2 {
		t.Errorf("calls = %d, want 2", s.Calls())
	}
}

func TestPerAttemptTimeout(t *testing.T) {
	s := newServer(t, fakellm.Options{Latency: 2 * time.Second})
	p := newProvider(t, s, func(c *Config) {
		c.Timeout = 150 * time.Millisecond
		c.MaxAttempts = 2
	})
	start := time.Now()
	_, err := p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("err = %v, want ErrUnavailable after timeouts", err)
	}
	// Counted by the client: on a loaded machine the second attempt can time out before
	// its request reaches the server.
	if !strings.Contains(err.Error(), "2 attempt(s)") {
		t.Errorf("err = %v; want the timeout retried once (2 attempts)", err)
	}
	// Any attempt left to run its course would take the server's full 2 s.
	if d := time.Since(start); d >= 2*time.Second {
		t.Errorf("took %v; each attempt should stop at 150ms, well before the 2s answer", d)
	}
}

func TestTimeoutThenSuccess(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if n == 1 {
			return fakellm.Reply{Delay: 2 * time.Second}
		}
		return fakellm.Reply{}
	}})
	p := newProvider(t, s, func(c *Config) { c.Timeout = 150 * time.Millisecond })
	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil || resp.Attempts != 2 {
		t.Fatalf("resp %+v err %v, want success on attempt 2", resp, err)
	}
}

func TestNetworkErrorIsRetried(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		return fakellm.Reply{Hangup: n == 1}
	}})
	p := newProvider(t, s, nil)
	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil || resp.Attempts != 2 {
		t.Fatalf("resp %+v err %v, want success on attempt 2", resp, err)
	}
}

func TestConnectionRefusedIsUnavailable(t *testing.T) {
	t.Parallel()
	s := fakellm.New(fakellm.Options{})
	s.Close() // nothing listens on its port any more
	p := newProvider(t, s, func(c *Config) { c.MaxAttempts = 2 })
	_, err := p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "2 attempt") {
		t.Fatalf("err = %v", err)
	}
}

// rejectSchema imitates a server without structured outputs.
func rejectSchema(req goopenai.ChatCompletionRequest, _ int) fakellm.Reply {
	if req.ResponseFormat != nil && req.ResponseFormat.Type == goopenai.ChatCompletionResponseFormatTypeJSONSchema {
		return fakellm.Reply{Status: 400, Content: "response_format json_schema not supported"}
	}
	return fakellm.Reply{}
}

func formats(s *fakellm.Server) []string {
	var out []string
	for _, r := range s.Requests() {
		if r.ResponseFormat == nil {
			out = append(out, "none")
		} else {
			out = append(out, string(r.ResponseFormat.Type))
		}
	}
	return out
}

func TestAutoFallsBackToJSONMode(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: rejectSchema})
	p := newProvider(t, s, func(c *Config) { c.MaxAttempts = 1 })

	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil {
		t.Fatalf("first call: %v", err)
	}
	if resp.Attempts != 2 || resp.Content != fakellm.DefaultContent {
		t.Errorf("first call: %+v", resp)
	}
	if got := formats(s); strings.Join(got, ",") != "json_schema,json_object" {
		t.Errorf("first call formats = %v", got)
	}

	s.Reset()
	resp, err = p.Complete(context.Background(), simpleRequest())
	if err != nil || resp.Attempts != 1 {
		t.Fatalf("second call: %+v, %v", resp, err)
	}
	if got := formats(s); strings.Join(got, ",") != "json_object" {
		t.Errorf("second call formats = %v, want straight to json_object", got)
	}

	// The fallback belongs to that instance; a fresh one tries the schema again.
	s.Reset()
	if _, err := newProvider(t, s, nil).Complete(context.Background(), simpleRequest()); err != nil {
		t.Fatal(err)
	}
	if got := formats(s); strings.Join(got, ",") != "json_schema,json_object" {
		t.Errorf("fresh instance formats = %v", got)
	}
}

func TestAutoFallsBackToNoFormat(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(req goopenai.ChatCompletionRequest, _ int) fakellm.Reply {
		if req.ResponseFormat != nil {
			return fakellm.Reply{Status: 400, Content: "Unsupported response_format type"}
		}
		return fakellm.Reply{}
	}})
	p := newProvider(t, s, nil)
	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil || resp.Attempts != 3 {
		t.Fatalf("resp %+v err %v", resp, err)
	}
	if got := formats(s); strings.Join(got, ",") != "json_schema,json_object,none" {
		t.Errorf("formats = %v", got)
	}
}

func TestExplicitFormatsDoNotFallBack(t *testing.T) {
	s := newServer(t, fakellm.Options{Respond: rejectSchema})
	p := newProvider(t, s, func(c *Config) { c.ResponseFormat = FormatJSONSchema })
	_, err := p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "HTTP 400") {
		t.Fatalf("err = %v", err)
	}
	if s.Calls() != 1 {
		t.Errorf("calls = %d; a 400 is never retried", s.Calls())
	}

	for format, want := range map[string]string{FormatJSONObject: "json_object", FormatNone: "none"} {
		s.Reset()
		p := newProvider(t, s, func(c *Config) { c.ResponseFormat = format })
		if _, err := p.Complete(context.Background(), simpleRequest()); err != nil {
			t.Fatal(err)
		}
		if got := formats(s); len(got) != 1 || got[0] != want {
			t.Errorf("%s: formats = %v", format, got)
		}
	}

	// Without a schema nothing asks for a format.
	s.Reset()
	req := simpleRequest()
	req.Schema = nil
	if _, err := newProvider(t, s, nil).Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if got := formats(s); len(got) != 1 || got[0] != "none" {
		t.Errorf("schemaless formats = %v", got)
	}
}

func Test401IsNotRetried(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Status: 401, Content: "Incorrect API key provided"}
	}})
	p := newProvider(t, s, nil)
	_, err := p.Complete(context.Background(), simpleRequest())
	if !errors.Is(err, judge.ErrUnavailable) {
		t.Fatalf("err = %v", err)
	}
	if s.Calls() != 1 {
		t.Errorf("calls = %d, want 1", s.Calls())
	}
	for _, want := range []string{"HTTP 401", "Incorrect API key", "not retryable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestConcurrencyLimit(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{Latency: 100 * time.Millisecond})
	p := newProvider(t, s, func(c *Config) { c.Concurrency = 3 })
	var wg sync.WaitGroup
	errs := make(chan error, 12)
	for range 12 {
		wg.Go(func() {
			_, err := p.Complete(context.Background(), simpleRequest())
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if s.Calls() != 12 {
		t.Errorf("calls = %d", s.Calls())
	}
	if peak := s.PeakInFlight(); peak != 3 {
		t.Errorf("peak in flight = %d, want 3", peak)
	}
}

// completeCancelled makes one call whose context is cancelled after 100ms, and checks
// that it stopped promptly with context.Canceled after one request to the server.
func completeCancelled(t *testing.T, s *fakellm.Server, p *Provider) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := p.Complete(ctx, simpleRequest())
	assertStopped(t, err, context.Canceled, start)
	if s.Calls() != 1 {
		t.Errorf("calls = %d", s.Calls())
	}
}

func TestCancelDuringRequest(t *testing.T) {
	s := newServer(t, fakellm.Options{Latency: 5 * time.Second})
	p := newProvider(t, s, func(c *Config) { c.Timeout = 10 * time.Second })
	completeCancelled(t, s, p)
}

func TestCancelDuringBackoff(t *testing.T) {
	s := newServer(t, fakellm.Options{Respond: func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
		return fakellm.Reply{Status: 500}
	}})
	p := newProvider(t, s, func(c *Config) { c.BackoffBase, c.BackoffMax = 5*time.Second, 5*time.Second })
	completeCancelled(t, s, p)
}

func TestCancelWhileWaitingForSlot(t *testing.T) {
	s := newServer(t, fakellm.Options{Latency: 5 * time.Second})
	p := newProvider(t, s, func(c *Config) { c.Concurrency = 1; c.Timeout = 10 * time.Second })
	bg, stopBG := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = p.Complete(bg, simpleRequest())
	}()
	defer func() { stopBG(); <-done }()
	waitFor(t, func() bool { return s.Calls() == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.Complete(ctx, simpleRequest())
	assertStopped(t, err, context.DeadlineExceeded, start)
	if s.Calls() != 1 {
		t.Errorf("the queued call reached the server")
	}
}

func TestRateLimiter(t *testing.T) {
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, func(c *Config) { c.RequestsPerMinute = 1 })
	if _, err := p.Complete(context.Background(), simpleRequest()); err != nil {
		t.Fatal(err)
	}

	// The next token is a minute away: a cancel must still get through.
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := p.Complete(ctx, simpleRequest())
	assertStopped(t, err, context.Canceled, start)

	// And a deadline that cannot be met fails at once.
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start = time.Now()
	_, err = p.Complete(ctx, simpleRequest())
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 200*time.Millisecond {
		t.Errorf("err %v after %v, want an immediate deadline error", err, time.Since(start))
	}
	if s.Calls() != 1 {
		t.Errorf("calls = %d, want 1", s.Calls())
	}
}

func TestAzureDeployments(t *testing.T) {
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, func(c *Config) {
		c.BaseURL = s.URL()
		c.Azure = true
		c.Model = "gpt-4o.judge" // go-openai's default mapper would mangle this
		c.APIVersion = "2024-10-21"
	})
	resp, err := p.Complete(context.Background(), simpleRequest())
	if err != nil {
		t.Fatal(err)
	}
	rec := s.Records()[0]
	if rec.Path != "/openai/deployments/gpt-4o.judge/chat/completions" || rec.Deployment != "gpt-4o.judge" {
		t.Errorf("path = %q", rec.Path)
	}
	if rec.Query != "api-version=2024-10-21" {
		t.Errorf("query = %q", rec.Query)
	}
	if rec.Header.Get("api-key") != "test-key" || rec.Header.Get("Authorization") != "" {
		t.Errorf("auth headers: api-key %q Authorization %q", rec.Header.Get("api-key"), rec.Header.Get("Authorization"))
	}
	if resp.Model != "gpt-4o.judge" {
		t.Errorf("model = %q", resp.Model)
	}
}

func TestRequestModelOverridesDefault(t *testing.T) {
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, nil)
	req := simpleRequest()
	req.Model = "other-model"
	resp, err := p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if s.Requests()[0].Model != "other-model" || resp.Model != "other-model" {
		t.Errorf("sent %q, got %q", s.Requests()[0].Model, resp.Model)
	}
	if p.DefaultModel() != "judge-model" || p.Name() != "openai" {
		t.Errorf("DefaultModel %q Name %q", p.DefaultModel(), p.Name())
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	s := newServer(t, fakellm.Options{})
	p := newProvider(t, s, nil)
	for name, req := range map[string]judge.Request{
		"no messages":  {Kind: "ab"},
		"empty text":   {Messages: []judge.Message{{Role: "user"}}},
		"no role":      {Messages: []judge.Message{{Parts: []judge.Part{{Text: "x"}}}}},
		"empty image":  {Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Image: &judge.Image{MediaType: "image/png"}}}}}},
		"invalid json": {Messages: simpleRequest().Messages, Schema: &judge.Schema{Name: "x", JSON: json.RawMessage("{")}},
	} {
		if _, err := p.Complete(context.Background(), req); err == nil || errors.Is(err, judge.ErrUnavailable) {
			t.Errorf("%s: err = %v, want a plain invalid-request error", name, err)
		}
	}
	if s.Calls() != 0 {
		t.Errorf("invalid requests reached the server")
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]Config{
		"no model":       {BaseURL: "http://localhost:1/v1"},
		"bad format":     {Model: "m", ResponseFormat: "yaml"},
		"bad url":        {Model: "m", BaseURL: "localhost:8000"},
		"azure no url":   {Model: "m", Azure: true},
		"negative limit": {Model: "m", RequestsPerMinute: -1},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted %+v", name, cfg)
		}
	}
	p, err := New(Config{Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	c := p.cfg
	if c.BaseURL != DefaultBaseURL || c.MaxAttempts != 4 || c.Concurrency != 8 || c.ResponseFormat != FormatAuto ||
		c.Timeout != DefaultTimeout || c.Instance != "api.openai.com" {
		t.Errorf("defaults not applied: %+v", c)
	}
}

func TestSchemaName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"ab_verdict":            "ab_verdict",
		"ab verdict/v2":         "ab_verdict_v2",
		"":                      "answer",
		strings.Repeat("x", 80): strings.Repeat("x", 64),
	} {
		if got := schemaName(in); got != want {
			t.Errorf("schemaName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestBackoffGrowsWithinBounds(t *testing.T) {
	t.Parallel()
	p := &Provider{cfg: Config{BackoffBase: 100 * time.Millisecond, BackoffMax: time.Second}}
	for n, hi := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: time.Second, 100: time.Second} {
		for range 50 {
			if d := p.backoff(n); d < hi/2 || d > hi {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", n, d, hi/2, hi)
			}
		}
	}
}

func assertStopped(t *testing.T, err, want error, start time.Time) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("err = %v, want %v", err, want)
	}
	if errors.Is(err, judge.ErrUnavailable) {
		t.Errorf("a stopped call is not the provider's failure: %v", err)
	}
	// Every caller waits 5 s or more for something cancellation must cut short; the
	// margin below that is for loaded machines, not a speed target.
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("returned after %v, want promptly", d)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 2s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(va)
	jb, _ := json.Marshal(vb)
	return bytes.Equal(ja, jb)
}

// TestRetryLogNamesTheJob: an operator reading a retry line must see whose call it was.
func TestRetryLogNamesTheJob(t *testing.T) {
	s := newServer(t, fakellm.Options{Respond: func(_ goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if n == 1 {
			return fakellm.Reply{Status: 503, Content: "busy"}
		}
		return fakellm.Reply{}
	}})
	var buf bytes.Buffer
	p := newProvider(t, s, func(c *Config) {
		c.Logger = telemetry.WithContext(slog.New(slog.NewJSONHandler(&buf, nil)))
	})
	ctx := telemetry.WithEvent(context.Background(), telemetry.Event{Tenant: "team-a", Batch: "b1", Job: "AC-7", Type: "gates.done", ID: "e1"})
	if _, err := p.Complete(ctx, simpleRequest()); err != nil {
		t.Fatal(err)
	}
	var rec map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if strings.Contains(line, "retrying judge call") {
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatal(err)
			}
		}
	}
	if rec == nil {
		t.Fatalf("no retry line logged: %s", buf.String())
	}
	for k, v := range map[string]string{"tenant": "team-a", "batch": "b1", "job": "AC-7"} {
		if rec[k] != v {
			t.Errorf("retry line %s = %v; want %q", k, rec[k], v)
		}
	}
}
