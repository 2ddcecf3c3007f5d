// Package fakellm is an OpenAI-compatible chat-completions server for tests and load
// tests. It speaks the same wire format as OpenAI, Azure OpenAI, vLLM, Ollama and
// llama.cpp closely enough that a real client (go-openai) can talk to it over loopback,
// so provider code is exercised end to end (HTTP status handling, Retry-After, timeouts,
// concurrency) without mocking the client library.
//
// Every decoded request is recorded; a Respond hook decides each reply (content, status,
// headers, delay), which is how tests script rate limits, outages and slow models.
package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"

	openai "github.com/sashabaranov/go-openai"
)

// DefaultContent is the answer given when no Respond hook is set: a valid A/B verdict, so
// a pipeline pointed at the fake server runs to completion without any scripting.
const DefaultContent = `{"raw_winner":"A","confidence":0.9,"biggest_gap":"fake"}`

// DefaultModel is reported in responses when the request names no model, because real
// servers always echo a model and clients record it.
const DefaultModel = "fake-model"

// Reply is what the server answers to one request. The zero value is a 200 with
// DefaultContent, so hooks only spell out what they want to differ.
type Reply struct {
	// Status is the HTTP status; 0 means 200.
	Status int
	// Content is the assistant message on success, or the error message on a non-2xx
	// status (wrapped in OpenAI's {"error":{...}} shape). Empty on success means
	// DefaultContent; use RawBody to send an empty answer.
	Content string
	// ErrorType and ErrorCode fill error.type and error.code on a non-2xx status; empty
	// picks what OpenAI sends for that status.
	ErrorType string
	ErrorCode string
	// RawBody, when non-empty, is written verbatim instead of a generated JSON body, to
	// imitate proxies that answer with HTML or plain text.
	RawBody string
	// Header is added to the response (Retry-After, retry-after-ms, ...).
	Header http.Header
	// Delay is waited after Options.Latency and before answering, to slow down single
	// requests (timeouts) without slowing all of them.
	Delay time.Duration
	// Hangup closes the connection without answering, to imitate a network failure.
	Hangup bool
	// Model overrides the model echoed in the response.
	Model string
}

// Options configures a Server. The zero value is an instant server that answers every
// request with DefaultContent and never limits concurrency.
type Options struct {
	// Latency is waited on every request before it is answered, imitating model time.
	Latency time.Duration
	// Respond decides the reply to the n-th request (n counts from 1 since creation or the
	// last Reset). It is called concurrently and must be safe for that.
	Respond func(req openai.ChatCompletionRequest, n int) Reply
	// MaxConcurrent is the server's own capacity: requests beyond it wait for a slot
	// (like a saturated vLLM queue) rather than being refused. 0 means unlimited.
	MaxConcurrent int
	// APIKey, when set, is the only key the server accepts, as OpenAI does: a request
	// without it (a bearer token, or Azure's api-key header) or with another key gets a
	// 401 with OpenAI's error body. Empty accepts any request, like a local server.
	APIKey string
	// NoModels makes GET /v1/models answer 404, like servers that only serve chat
	// completions.
	NoModels bool
	// BatchLatency is how long a provider batch (POST /v1/batches) takes from creation to
	// completed: validating for its first tenth, in_progress, finalizing for its last
	// tenth. Each line is answered by Respond, with n counting batch lines from 1 apart
	// from chat requests; Latency and Delay do not apply to lines.
	BatchLatency time.Duration
	// BatchExpire makes every provider batch end expired instead of completed: each of
	// its requests gets an error line with code batch_expired, none an answer.
	BatchExpire bool
}

// Record is one request as the server saw it, so tests can assert on the wire format
// (raw JSON, path, query, headers) and on timing (gaps between retries).
type Record struct {
	// N is the request's number, as passed to Respond.
	N int
	// Path and Query are the request URL's; Deployment is the Azure deployment named in
	// the path, empty for the OpenAI path.
	Path       string
	Query      string
	Deployment string
	Header     http.Header
	// Body is the raw request body, for fields the decoded form cannot show (an explicit
	// "temperature":0 and a missing temperature decode alike).
	Body []byte
	// Request is the decoded body; it is the zero value if decoding failed.
	Request openai.ChatCompletionRequest
	// Start is when the request arrived, before any waiting; End is when its handler
	// returned (zero while it is in flight), so a load run's calls in flight over time
	// can be read back (cmd/fake-llm --timeline).
	Start time.Time
	End   time.Time
}

// Server is a running (or, from NewUnstarted, runnable) fake chat-completions server.
type Server struct {
	opts    Options
	ts      *httptest.Server
	handler http.Handler
	slots   chan struct{}

	mu       sync.Mutex
	records  []Record
	calls    int
	inFlight int
	peak     int
	listings int
	batch    batchState
}

// New starts a server on a loopback port. Close it when done (t.Cleanup(s.Close)).
func New(opts Options) *Server {
	s := NewUnstarted(opts)
	s.ts = httptest.NewServer(s.handler)
	return s
}

// NewUnstarted builds a server without listening, so a CLI can serve Handler() on an
// address of its choosing.
func NewUnstarted(opts Options) *Server {
	s := &Server{opts: opts}
	if opts.MaxConcurrent > 0 {
		s.slots = make(chan struct{}, opts.MaxConcurrent)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/chat/completions", s.serveChat)
	mux.HandleFunc("/openai/deployments/{deployment}/chat/completions", s.serveChat)
	mux.HandleFunc("/v1/models", s.serveModels)
	mux.HandleFunc("/openai/models", s.serveModels)
	s.batchRoutes(mux)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown path %s %s", r.Method, r.URL.Path), "invalid_request_error", "not_found")
	})
	s.handler = mux
	return s
}

// Handler serves the API; it is what New listens with.
func (s *Server) Handler() http.Handler { return s.handler }

// URL is the server's root ("http://127.0.0.1:port"), which is what Azure clients take as
// their endpoint. Empty for an unstarted server.
func (s *Server) URL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL
}

// BaseURL is URL()+"/v1", the base URL OpenAI-style clients expect.
func (s *Server) BaseURL() string {
	if s.ts == nil {
		return ""
	}
	return s.ts.URL + "/v1"
}

// Close stops the listener and waits for in-flight requests; handlers give up their
// waits when a client goes away, so this does not hang on abandoned requests.
func (s *Server) Close() {
	if s.ts != nil {
		s.ts.Close()
	}
}

// Requests returns the decoded chat requests received so far, in arrival order.
func (s *Server) Requests() []openai.ChatCompletionRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]openai.ChatCompletionRequest, len(s.records))
	for i, r := range s.records {
		out[i] = r.Request
	}
	return out
}

// Records returns everything recorded about each request, in arrival order.
func (s *Server) Records() []Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Record(nil), s.records...)
}

// Calls counts chat requests received, including those answered with errors.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// PeakInFlight is the most chat requests the server has held open at once (waiting for a
// slot included), which is how a client's concurrency limit is observed from outside.
func (s *Server) PeakInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peak
}

// Reset forgets recorded requests, the call count and the peak, so one server can serve
// several phases of a test; n passed to Respond starts again at 1.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = nil
	s.calls = 0
	s.peak = s.inFlight
}

// ModelListings counts GET /v1/models requests (the cheap probe clients make), refused
// ones included.
func (s *Server) ModelListings() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listings
}

// authorized answers a request that lacks Options.APIKey with OpenAI's 401 and reports
// false.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.APIKey == "" {
		return true
	}
	key := r.Header.Get("api-key")
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = bearer
	}
	switch key {
	case s.opts.APIKey:
		return true
	case "":
		writeError(w, http.StatusUnauthorized, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", "invalid_request_error", "")
	default:
		shown := key
		if len(shown) > 8 {
			shown = shown[:3] + "*****" + shown[len(shown)-4:]
		}
		writeError(w, http.StatusUnauthorized, "Incorrect API key provided: "+shown+". You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")
	}
	return false
}

func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.listings++
	s.mu.Unlock()
	if r.Method != http.MethodGet {
		writeError(w, http.StatusMethodNotAllowed, "use GET", "invalid_request_error", "method_not_allowed")
		return
	}
	if s.opts.NoModels {
		writeError(w, http.StatusNotFound, fmt.Sprintf("unknown path %s %s", r.Method, r.URL.Path), "invalid_request_error", "not_found")
		return
	}
	if !s.authorized(w, r) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data":   []map[string]any{{"id": DefaultModel, "object": "model", "owned_by": "fakellm"}},
	})
}

func (s *Server) serveChat(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "use POST", "invalid_request_error", "method_not_allowed")
		return
	}
	start := time.Now()
	deployment := r.PathValue("deployment")
	body, readErr := io.ReadAll(r.Body)
	var req openai.ChatCompletionRequest
	decodeErr := readErr
	if decodeErr == nil {
		decodeErr = json.Unmarshal(body, &req)
	}

	s.mu.Lock()
	s.calls++
	n := s.calls
	s.records = append(s.records, Record{
		N: n, Path: r.URL.Path, Query: r.URL.RawQuery, Deployment: deployment,
		Header: r.Header.Clone(), Body: body, Request: req, Start: start,
	})
	s.inFlight++
	s.peak = max(s.peak, s.inFlight)
	idx := len(s.records) - 1
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		if idx < len(s.records) && s.records[idx].N == n && s.records[idx].Start.Equal(start) {
			s.records[idx].End = time.Now()
		}
		s.mu.Unlock()
	}()

	ctx := r.Context()
	if !s.authorized(w, r) {
		return
	}
	if deployment != "" && r.URL.Query().Get("api-version") == "" {
		writeError(w, http.StatusBadRequest, "missing required query parameter api-version", "invalid_request_error", "missing_api_version")
		return
	}
	if decodeErr != nil {
		writeError(w, http.StatusBadRequest, "could not parse the JSON body: "+decodeErr.Error(), "invalid_request_error", "invalid_json")
		return
	}

	if s.slots != nil {
		select {
		case s.slots <- struct{}{}:
			defer func() { <-s.slots }()
		case <-ctx.Done():
			return
		}
	}
	if ctxtime.Sleep(ctx, s.opts.Latency) != nil {
		return
	}

	var reply Reply
	if s.opts.Respond != nil {
		reply = s.opts.Respond(req, n)
	}
	if ctxtime.Sleep(ctx, reply.Delay) != nil {
		return
	}
	if reply.Hangup {
		hangup(w)
		return
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	if reply.RawBody != "" {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, reply.RawBody)
		return
	}
	if status >= 300 {
		typ, code := reply.ErrorType, reply.ErrorCode
		if typ == "" || code == "" {
			dt, dc := errorKind(status)
			typ, code = firstNonEmpty(typ, dt), firstNonEmpty(code, dc)
		}
		msg := reply.Content
		if msg == "" {
			msg = http.StatusText(status)
		}
		writeError(w, status, msg, typ, code)
		return
	}

	writeJSON(w, status, completion(req, reply, n, start, deployment))
}

// completion is the chat completion answering req with reply's content, as the n-th
// request.
func completion(req openai.ChatCompletionRequest, reply Reply, n int, start time.Time, deployment string) chatResponse {
	content := reply.Content
	if content == "" {
		content = DefaultContent
	}
	model := firstNonEmpty(reply.Model, req.Model, deployment, DefaultModel)
	prompt := promptTokens(req)
	completion := countTokens(content)
	return chatResponse{
		ID:      fmt.Sprintf("chatcmpl-fake-%d", n),
		Object:  "chat.completion",
		Created: start.Unix(),
		Model:   model,
		Choices: []choice{{
			Index:        0,
			Message:      message{Role: openai.ChatMessageRoleAssistant, Content: content},
			FinishReason: "stop",
		}},
		Usage: usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion},
	}
}

// The response types are spelled out rather than borrowed from go-openai so the wire
// format is exactly OpenAI's and not whatever the client library happens to marshal.
type chatResponse struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []choice `json:"choices"`
	Usage   usage    `json:"usage"`
}

type choice struct {
	Index        int     `json:"index"`
	Message      message `json:"message"`
	FinishReason string  `json:"finish_reason"`
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type apiError struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, msg, typ, code string) {
	e := apiError{Message: msg, Type: typ}
	if code != "" {
		e.Code = &code
	}
	writeJSON(w, status, map[string]apiError{"error": e})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// errorKind is what OpenAI puts in error.type and error.code for a status.
func errorKind(status int) (typ, code string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case status == http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", ""
	default:
		return "invalid_request_error", ""
	}
}

// firstNonEmpty returns the first non-empty string.
func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func hangup(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	_ = conn.Close()
}

// countTokens estimates tokens the way OpenAI's rule of thumb does (about four bytes a
// token), so usage figures grow with the prompt and load tests can sum them.
func countTokens(s string) int {
	if s == "" {
		return 0
	}
	return (len(s) + 3) / 4
}

// promptTokens estimates the prompt's tokens: text by length, a fixed 85 per image (the
// low-detail price), and a few tokens of framing per message.
func promptTokens(req openai.ChatCompletionRequest) int {
	const perMessage, perImage = 4, 85
	n := 0
	for _, m := range req.Messages {
		n += perMessage + countTokens(m.Content)
		for _, p := range m.MultiContent {
			switch p.Type {
			case openai.ChatMessagePartTypeImageURL:
				n += perImage
			default:
				n += countTokens(p.Text)
			}
		}
	}
	if len(req.Messages) > 0 {
		n += 3 // reply priming
	}
	return n
}

// ImageURLs lists the image URLs in a request's messages, so tests can check how images
// were sent without walking the message structure.
func ImageURLs(req openai.ChatCompletionRequest) []string {
	var out []string
	for _, m := range req.Messages {
		for _, p := range m.MultiContent {
			if p.ImageURL != nil {
				out = append(out, p.ImageURL.URL)
			}
		}
	}
	return out
}

// Text joins a message's text, whether it came as plain content or as text parts.
func Text(m openai.ChatCompletionMessage) string {
	if len(m.MultiContent) == 0 {
		return m.Content
	}
	var b strings.Builder
	for _, p := range m.MultiContent {
		b.WriteString(p.Text)
	}
	return b.String()
}

// Verdict is an `ab` answer with the given raw winner ("A", "B" or "tie") and
// confidence, as a model would send it.
func Verdict(winner string, confidence float64) string {
	b, _ := json.Marshal(map[string]any{"raw_winner": winner, "confidence": confidence,
		"biggest_gap": "fake verdict", "reasoning": "fake"})
	return string(b)
}

// SlotA is a Respond hook for a judge with a fixed position bias: it answers slot A on a
// share of the calls and slot B on the rest, whatever the artifacts say, at confidence
// 0.9. The choice is deterministic in the call number n: of every 100 consecutive calls,
// exactly round(100·share) answer A, spread over the hundred (n·37 mod 100 walks every
// residue once), so a test knows what the fake produced however calls interleave.
func SlotA(share float64) func(openai.ChatCompletionRequest, int) Reply {
	cut := int(share*100 + 0.5)
	return func(_ openai.ChatCompletionRequest, n int) Reply {
		if (n*37)%100 < cut {
			return Reply{Content: Verdict("A", 0.9)}
		}
		return Reply{Content: Verdict("B", 0.9)}
	}
}

// Slots returns the text of slots A and B of an `ab` request as the judge was shown
// them, "" for a slot that is not text (an image).
func Slots(req openai.ChatCompletionRequest) (a, b string) {
	var user strings.Builder
	for _, m := range req.Messages {
		if m.Role == openai.ChatMessageRoleUser {
			user.WriteString(Text(m))
		}
	}
	u := user.String()
	slot := func(name string) string {
		// The fence's lines carry a nonce of their own: "-----BEGIN ARTIFACT A (data, not
		// instructions) nonce=...-----" and "-----END ARTIFACT A nonce=...-----".
		begin := "-----BEGIN ARTIFACT " + name + " (data, not instructions)"
		i := strings.Index(u, begin)
		if i < 0 {
			return ""
		}
		rest := u[i+len(begin):]
		eol := strings.Index(rest, "-----\n")
		if eol < 0 {
			return ""
		}
		end := "-----END ARTIFACT " + name + rest[:eol] + "-----"
		rest = rest[eol+len("-----\n"):]
		j := strings.Index(rest, end)
		if j < 0 {
			return ""
		}
		return rest[:j]
	}
	return slot("A"), slot("B")
}
