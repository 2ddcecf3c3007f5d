// Package openai is the judge provider for any OpenAI-compatible chat-completions API:
// OpenAI itself, Azure OpenAI, vLLM, Ollama and llama.cpp.
//
// It owns what differs between talking to a real server and asking for a verdict: per
// instance concurrency and rate limits, per-attempt timeouts, retries of transient
// failures (timeouts, network errors, 429 with Retry-After, 5xx), and structured output
// negotiation (JSON schema, falling back to JSON mode for servers that do not support it).
// Building the prompt and validating the answer stay in package judge.
package openai

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"

	goopenai "github.com/sashabaranov/go-openai"
	"golang.org/x/time/rate"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Response format modes for Config.ResponseFormat. They differ in how hard the server is
// asked to keep to the answer schema, since servers differ in what they support.
const (
	// FormatAuto asks for the JSON schema and, when the server rejects that, falls back to
	// JSON mode (and, if that is rejected too, to no response format) for the rest of the
	// instance's life, so a mixed fleet works without per-server configuration.
	FormatAuto = "auto"
	// FormatJSONSchema always sends the schema (strict structured output).
	FormatJSONSchema = events.FormatJSONSchema
	// FormatJSONObject always uses JSON mode, for servers known to lack schema support.
	FormatJSONObject = events.FormatJSONObject
	// FormatNone never sends a response format; the prompt alone asks for JSON.
	FormatNone = events.FormatNone
)

// Defaults applied by New to zero Config fields. They suit a hosted API under moderate
// load; local servers usually want a higher Concurrency and no rate limit.
const (
	// DefaultTimeout leaves room for a long prompt with images on a busy server while
	// still abandoning an attempt that has hung.
	DefaultTimeout = 120 * time.Second
	// DefaultMaxAttempts rides out a short outage or a rate-limit window, not a real one.
	DefaultMaxAttempts = 4
	// DefaultBackoffBase is the first retry's wait before jitter.
	DefaultBackoffBase = 500 * time.Millisecond
	// DefaultBackoffMax caps the backoff; Retry-After may ask for up to four times this.
	DefaultBackoffMax = 30 * time.Second
	// DefaultConcurrency keeps a hosted API's per-key limits comfortable.
	DefaultConcurrency = 8
	// DefaultAzureAPIVersion is the first GA Azure OpenAI API version with structured
	// outputs, so FormatAuto works against Azure without a fallback.
	DefaultAzureAPIVersion = "2024-10-21"
	// DefaultBaseURL is OpenAI's own API.
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultMaxTokens caps an answer when neither the request nor Config sets a limit.
	// A verdict is a small JSON object (a rubric verdict with its evidence per
	// dimension is the longest, well under 2,000 tokens), so 4,096 leaves room while
	// keeping a model talked into writing at length from running up the bill, or an
	// answer from growing past what an event can carry.
	DefaultMaxTokens = 4096
	// DefaultReasoningMaxTokens is the cap for reasoning models (o1, o3, o4, gpt-5...),
	// whose max_completion_tokens counts their hidden reasoning as well as the answer.
	DefaultReasoningMaxTokens = 16384
)

// retryAfterFactor bounds a server's Retry-After at this multiple of BackoffMax, so one
// misbehaving header cannot park a judge for an hour.
const retryAfterFactor = 4

// Config describes one provider instance (one endpoint and its limits). Several
// instances may point at different servers; each keeps its own limits and fallbacks.
type Config struct {
	// BaseURL is the API root: "https://api.openai.com/v1" (the default),
	// "http://localhost:8000/v1" for vLLM, "http://localhost:11434/v1" for Ollama. For Azure
	// it is the resource endpoint ("https://NAME.openai.azure.com"), without /openai.
	BaseURL string
	// APIKey is sent as a bearer token, or as the api-key header for Azure. Local servers
	// usually need none.
	APIKey string
	// Model is used when a request names none. For Azure it is the deployment name. It is
	// required because every verdict records the model that produced it.
	Model string
	// Azure switches to Azure OpenAI's deployment URLs and api-key authentication.
	Azure bool
	// APIVersion is Azure's api-version query parameter; DefaultAzureAPIVersion if empty.
	APIVersion string
	// Timeout bounds one HTTP attempt, not the whole call: a hung attempt is abandoned and
	// retried while the caller's context still has time.
	Timeout time.Duration
	// MaxAttempts bounds attempts for transient failures (DefaultMaxAttempts if 0). A
	// response-format fallback does not use up an attempt.
	MaxAttempts int
	// BackoffBase and BackoffMax shape the exponential backoff between attempts (with
	// jitter, so judges that failed together do not retry together).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// Concurrency caps calls in flight on this instance (DefaultConcurrency if 0), so a
	// burst of judge work queues here instead of overloading the server. A call holds its
	// slot through its retries, which slows the instance down while the server struggles.
	Concurrency int
	// RequestsPerMinute caps HTTP requests (retries included) on this instance, to stay
	// under a hosted API's quota instead of living on 429s. 0 means unlimited.
	RequestsPerMinute int
	// MaxTokens caps the answer of a request that sets no Params.MaxTokens: sent as
	// max_tokens, or as max_completion_tokens to reasoning models. 0 means
	// DefaultMaxTokens (DefaultReasoningMaxTokens for reasoning models); negative sends
	// no limit, leaving it to the server.
	MaxTokens int
	// ResponseFormat is one of the Format constants; FormatAuto if empty. It only applies
	// to requests that carry a Schema; others never send a response format.
	ResponseFormat string
	// Instance names this instance in logs and errors; the BaseURL's host if empty.
	Instance string
	// Logger receives retry and fallback logs; slog.Default() if nil.
	Logger *slog.Logger
}

// formatLevel is a rung on the structured-output ladder; higher rungs ask less of the
// server.
type formatLevel int32

const (
	levelSchema formatLevel = iota
	levelObject
	levelNone
)

func (l formatLevel) String() string {
	switch l {
	case levelSchema:
		return FormatJSONSchema
	case levelObject:
		return FormatJSONObject
	default:
		return FormatNone
	}
}

// Provider is a judge.Provider backed by an OpenAI-compatible server. It is safe for
// concurrent use; share one per endpoint so its limits mean something.
type Provider struct {
	cfg     Config
	client  *goopenai.Client
	slots   chan struct{}
	limiter *rate.Limiter
	// autoLevel is where FormatAuto has settled after the server's rejections; it only
	// ever rises, so concurrent calls can race on it harmlessly.
	autoLevel atomic.Int32
}

var (
	_ judge.Provider = (*Provider)(nil)
	_ judge.Bounded  = (*Provider)(nil)
)

// New checks cfg, fills in defaults and builds a provider. It does not contact the
// server, so a provider can be built before its server is up.
func New(cfg Config) (*Provider, error) {
	if cfg.Model == "" {
		return nil, errors.New("openai provider: Model is required (the deployment name for Azure)")
	}
	if cfg.BaseURL == "" {
		if cfg.Azure {
			return nil, errors.New("openai provider: BaseURL is required for Azure (https://NAME.openai.azure.com)")
		}
		cfg.BaseURL = DefaultBaseURL
	}
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("openai provider: BaseURL %q is not an http(s) URL", cfg.BaseURL)
	}
	if cfg.Azure && cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAzureAPIVersion
	}
	switch {
	case cfg.Timeout < 0, cfg.MaxAttempts < 0, cfg.BackoffBase < 0, cfg.BackoffMax < 0,
		cfg.Concurrency < 0, cfg.RequestsPerMinute < 0:
		return nil, errors.New("openai provider: Timeout, MaxAttempts, BackoffBase, BackoffMax, Concurrency and RequestsPerMinute must not be negative")
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase = DefaultBackoffBase
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = DefaultBackoffMax
	}
	cfg.BackoffMax = max(cfg.BackoffMax, cfg.BackoffBase)
	if cfg.Concurrency == 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	switch cfg.ResponseFormat {
	case "":
		cfg.ResponseFormat = FormatAuto
	case FormatAuto, FormatJSONSchema, FormatJSONObject, FormatNone:
	default:
		return nil, fmt.Errorf("openai provider: ResponseFormat %q is not one of auto, json_schema, json_object, none", cfg.ResponseFormat)
	}
	if cfg.Instance == "" {
		cfg.Instance = u.Host
	}

	// Per-attempt deadlines come from contexts, so the client itself has no timeout. Keep
	// as many idle connections as calls may be in flight, or every burst reconnects.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = cfg.Concurrency
	httpClient := &doer{client: &http.Client{Transport: transport}}

	var cc goopenai.ClientConfig
	if cfg.Azure {
		cc = goopenai.DefaultAzureConfig(cfg.APIKey, cfg.BaseURL)
		cc.APIVersion = cfg.APIVersion
		// The model is the deployment name as configured; go-openai's default mapper
		// would strip characters from it.
		cc.AzureModelMapperFunc = func(model string) string { return model }
	} else {
		cc = goopenai.DefaultConfig(cfg.APIKey)
		cc.BaseURL = cfg.BaseURL
	}
	cc.HTTPClient = httpClient

	p := &Provider{
		cfg:    cfg,
		client: goopenai.NewClientWithConfig(cc),
		slots:  make(chan struct{}, cfg.Concurrency),
	}
	if cfg.RequestsPerMinute > 0 {
		// A burst of 1 spaces requests evenly: hosted APIs enforce their per-minute quotas
		// over much shorter windows.
		p.limiter = rate.NewLimiter(rate.Limit(float64(cfg.RequestsPerMinute)/60), 1)
	}
	return p, nil
}

// MaxInFlight is Config.Concurrency: calls beyond it wait for a slot (judge.Bounded).
func (p *Provider) MaxInFlight() int { return p.cfg.Concurrency }

// Name is "openai" for every OpenAI-compatible server (Azure, vLLM, ... included): the
// verdict records the wire protocol; the model and instance say which server.
func (p *Provider) Name() string { return "openai" }

// ServerAddress is the endpoint's host and port (the scheme's default when the URL has
// none), for the server.address and server.port of the calls' spans.
func (p *Provider) ServerAddress() (string, int) {
	u, err := url.Parse(p.cfg.BaseURL)
	if err != nil {
		return "", 0
	}
	port, _ := strconv.Atoi(u.Port())
	if port == 0 {
		port = map[string]int{"http": 80, "https": 443}[u.Scheme]
	}
	return u.Hostname(), port
}

// DefaultModel is Config.Model.
func (p *Provider) DefaultModel() string { return p.cfg.Model }

// MaxAnswerTokens is the answer token limit a request to model that sets none is sent
// with (0: none is sent), so a budget can bound what the answer may cost.
func (p *Provider) MaxAnswerTokens(model string) int {
	probe := judge.Request{Model: model, Messages: []judge.Message{{Role: "user", Parts: []judge.Part{{Text: "?"}}}}}
	creq, _, err := buildRequest(model, probe, p.cfg.MaxTokens)
	if err != nil {
		return 0
	}
	return max(creq.MaxTokens, creq.MaxCompletionTokens)
}

// Complete asks the server for one chat completion, retrying transient failures. Errors
// after the last attempt, and non-retryable server answers, wrap judge.ErrUnavailable
// (and the go-openai error, for errors.As). A malformed request gets a plain error, and a
// cancelled or expired ctx gets an error wrapping ctx.Err(): neither is the server's
// fault. Latency is the wall time of the whole call, queueing and retries included.
func (p *Provider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	start := time.Now()
	model := req.Model
	if model == "" {
		model = p.cfg.Model
	}
	base, zeroTemp, err := buildRequest(model, req, p.cfg.MaxTokens)
	if err != nil {
		return judge.Response{}, fmt.Errorf("%s: invalid request for %s %s: %w", p.label(), req.Kind, req.Key, err)
	}
	log := p.logger().With(
		slog.String("provider", p.Name()), slog.String("instance", p.cfg.Instance),
		slog.String("model", model), slog.String("kind", req.Kind), slog.String("key", req.Key))

	select {
	case p.slots <- struct{}{}:
		defer func() { <-p.slots }()
	case <-ctx.Done():
		return judge.Response{}, p.stopped(ctx, "waiting for a concurrency slot")
	}

	level := p.startLevel()
	attempts, failures := 0, 0
	for {
		if p.limiter != nil {
			if err := p.limiter.Wait(ctx); err != nil {
				if ctx.Err() != nil {
					return judge.Response{}, p.stopped(ctx, "waiting for the rate limiter")
				}
				return judge.Response{}, fmt.Errorf("%s: %d requests/minute leaves no time before the deadline: %w",
					p.label(), p.cfg.RequestsPerMinute, context.DeadlineExceeded)
			}
		}
		if p.cfg.ResponseFormat == FormatAuto {
			level = max(level, formatLevel(p.autoLevel.Load()))
		}
		attempts++
		creq := base
		creq.ResponseFormat = responseFormat(level, req.Schema)
		resp, f := p.attempt(ctx, creq, zeroTemp)
		if f == nil {
			if resp.Choices[0].Message.Content == "" && resp.Choices[0].Message.Refusal != "" {
				log.WarnContext(ctx, "model refused", slog.Int("attempt", attempts), slog.String("refusal", resp.Choices[0].Message.Refusal))
			}
			out := answer(resp, model, creq, zeroTemp, level, req.Schema)
			out.Latency, out.Attempts = time.Since(start), attempts
			return out, nil
		}
		if ctx.Err() != nil {
			return judge.Response{}, p.stopped(ctx, fmt.Sprintf("attempt %d", attempts))
		}
		if f.status == http.StatusTooManyRequests {
			telemetry.ProviderRateLimited(p.Name(), model)
		}

		if p.cfg.ResponseFormat == FormatAuto && req.Schema != nil && level < levelNone && f.formatRejected() {
			next := level + 1
			if p.raiseAutoLevel(next) {
				log.WarnContext(ctx, "server rejected the response format; falling back for this instance",
					slog.Int("attempt", attempts), slog.Int("status", f.status),
					slog.String("from", level.String()), slog.String("to", next.String()),
					slog.String("error", f.msg))
			}
			level = next
			continue
		}
		if !f.retryable {
			return judge.Response{}, p.unavailable(model, f, attempts, "not retryable")
		}
		failures++
		if failures >= p.cfg.MaxAttempts {
			return judge.Response{}, p.unavailable(model, f, attempts, "gave up")
		}
		wait := p.backoff(failures)
		if f.hasRetryAfter {
			wait = min(f.retryAfter, retryAfterFactor*p.cfg.BackoffMax)
		}
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return judge.Response{}, p.unavailable(model, f, attempts,
				fmt.Sprintf("next retry in %s would pass the deadline", wait.Round(time.Millisecond)))
		}
		telemetry.ProviderRetry(ctx, p.Name(), model, f.reason, f.status, attempts, wait)
		log.WarnContext(ctx, "retrying judge call",
			slog.Int("attempt", attempts), slog.Int("status", f.status),
			slog.Duration("wait", wait), slog.Bool("retry_after", f.hasRetryAfter),
			slog.String("error", f.msg))
		if ctxtime.Sleep(ctx, wait) != nil {
			return judge.Response{}, p.stopped(ctx, fmt.Sprintf("backing off after attempt %d", attempts))
		}
	}
}

// answer is the judge's view of a chat completion with at least one choice, answering
// creq (sent at rung level).
func answer(resp goopenai.ChatCompletionResponse, model string, creq goopenai.ChatCompletionRequest, zeroTemp bool, level formatLevel, schema *judge.Schema) judge.Response {
	respModel := resp.Model
	if respModel == "" {
		respModel = model
	}
	var finish []string
	for _, c := range resp.Choices {
		if c.FinishReason != "" {
			finish = append(finish, string(c.FinishReason))
		}
	}
	cachedTokens := 0
	if d := resp.Usage.PromptTokensDetails; d != nil {
		cachedTokens = d.CachedTokens
	}
	return judge.Response{
		CachedPromptTokens: cachedTokens,
		Content:            resp.Choices[0].Message.Content,
		Model:              respModel,
		ID:                 resp.ID,
		FinishReasons:      finish,
		PromptTokens:       resp.Usage.PromptTokens,
		CompletionTokens:   resp.Usage.CompletionTokens,
		Attempts:           1,
		Sampling:           sent(creq, zeroTemp, level, schema, resp.Model),
	}
}

// attempt makes one HTTP request under the per-attempt timeout. A nil failure means a
// response with at least one choice.
func (p *Provider) attempt(ctx context.Context, creq goopenai.ChatCompletionRequest, zeroTemp bool) (goopenai.ChatCompletionResponse, *failure) {
	actx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	info := &attemptInfo{zeroTemperature: zeroTemp}
	resp, err := p.client.CreateChatCompletion(context.WithValue(actx, attemptKey{}, info), creq)
	if err == nil && len(resp.Choices) == 0 {
		// A 200 without choices is a server hiccup, not an answer; another attempt may do.
		return resp, &failure{status: info.status, retryable: true, msg: "response has no choices", reason: telemetry.RetryEmpty}
	}
	if err == nil {
		return resp, nil
	}
	timedOut := ctx.Err() == nil && errors.Is(actx.Err(), context.DeadlineExceeded)
	return resp, classify(err, info, timedOut, p.cfg.Timeout)
}

// startLevel is the structured-output rung a call starts on.
func (p *Provider) startLevel() formatLevel {
	switch p.cfg.ResponseFormat {
	case FormatJSONSchema:
		return levelSchema
	case FormatJSONObject:
		return levelObject
	case FormatNone:
		return levelNone
	default:
		return formatLevel(p.autoLevel.Load())
	}
}

// raiseAutoLevel moves the instance's auto rung up to l; it reports whether this call
// made the move, so the fallback is logged once.
func (p *Provider) raiseAutoLevel(l formatLevel) bool {
	for {
		cur := p.autoLevel.Load()
		if formatLevel(cur) >= l {
			return false
		}
		if p.autoLevel.CompareAndSwap(cur, int32(l)) {
			return true
		}
	}
}

func (p *Provider) logger() *slog.Logger {
	if p.cfg.Logger != nil {
		return p.cfg.Logger
	}
	return slog.Default()
}

func (p *Provider) label() string { return "openai[" + p.cfg.Instance + "]" }

// unavailable is the error for a call the server did not answer, with enough detail to
// be the blocked AC's reason.
func (p *Provider) unavailable(model string, f *failure, attempts int, why string) error {
	what := f.msg
	if f.status != 0 {
		what = fmt.Sprintf("HTTP %d: %s", f.status, f.msg)
	}
	e := &unavailableError{
		msg: fmt.Sprintf("%s: %s model %s: %s after %d attempt(s): %s",
			judge.ErrUnavailable, p.label(), model, why, attempts, what),
		cause: f.err,
	}
	if f.status != 0 {
		e.status = &judge.StatusError{Status: f.status}
	}
	return e
}

// unavailableError wraps both judge.ErrUnavailable, which callers branch on, and the last
// underlying error (a *goopenai.APIError, say), which errors.As can dig out, while its
// message says everything once.
type unavailableError struct {
	msg    string
	cause  error
	status *judge.StatusError
}

func (e *unavailableError) Error() string { return e.msg }

func (e *unavailableError) Unwrap() []error {
	out := []error{judge.ErrUnavailable}
	if e.cause != nil {
		out = append(out, e.cause)
	}
	if e.status != nil {
		out = append(out, e.status)
	}
	return out
}

func (p *Provider) stopped(ctx context.Context, while string) error {
	return fmt.Errorf("%s: stopped while %s: %w", p.label(), while, ctx.Err())
}

// buildRequest maps a judge request to go-openai's. zeroTemp reports a temperature of
// exactly 0, which go-openai would silently drop (its Temperature is omitempty), so the
// transport adds it back. maxTokens is Config.MaxTokens, the cap of a request that sets
// none.
func buildRequest(model string, req judge.Request, maxTokens int) (goopenai.ChatCompletionRequest, bool, error) {
	if model == "" {
		return goopenai.ChatCompletionRequest{}, false, errors.New("no model")
	}
	if len(req.Messages) == 0 {
		return goopenai.ChatCompletionRequest{}, false, errors.New("no messages")
	}
	msgs := make([]goopenai.ChatCompletionMessage, 0, len(req.Messages))
	for i, m := range req.Messages {
		cm, err := toMessage(m)
		if err != nil {
			return goopenai.ChatCompletionRequest{}, false, fmt.Errorf("message %d (%s): %w", i, m.Role, err)
		}
		msgs = append(msgs, cm)
	}
	if req.Schema != nil && !json.Valid(req.Schema.JSON) {
		return goopenai.ChatCompletionRequest{}, false, fmt.Errorf("schema %q is not valid JSON", req.Schema.Name)
	}
	out := goopenai.ChatCompletionRequest{
		Model:    model,
		Messages: msgs,
		Seed:     req.Params.Seed,
	}
	zeroTemp := false
	if t := req.Params.Temperature; t != nil {
		if *t == 0 {
			zeroTemp = true
		} else {
			out.Temperature = *t
		}
	}
	// Reasoning models (o1/o3/o4/gpt-5...) only take max_completion_tokens; go-openai
	// refuses max_tokens for them before sending anything.
	probe := goopenai.ChatCompletionRequest{Model: model, MaxTokens: 1}
	reasoning := errors.Is(goopenai.NewReasoningValidator().Validate(probe), goopenai.ErrReasoningModelMaxTokensDeprecated)
	limit := req.Params.MaxTokens
	switch {
	case limit > 0:
	case maxTokens > 0:
		limit = maxTokens
	case maxTokens < 0:
		limit = 0 // no limit asked for: the server's own applies
	case reasoning:
		limit = DefaultReasoningMaxTokens
	default:
		limit = DefaultMaxTokens
	}
	if reasoning {
		out.MaxCompletionTokens = limit
	} else {
		out.MaxTokens = limit
	}
	return out, zeroTemp, nil
}

// sent is the sampling of the request that was answered: the temperature as it went on
// the wire (an explicit 0 included, nil when none was pinned), the seed, the token limit
// under whichever name it was sent, the response format of the rung that answered, and
// the model id the server reported ("" for none).
func sent(creq goopenai.ChatCompletionRequest, zeroTemp bool, level formatLevel, schema *judge.Schema, reported string) events.Sampling {
	s := events.Sampling{MaxTokens: max(creq.MaxTokens, creq.MaxCompletionTokens), ReportedModel: reported,
		ResponseFormat: events.FormatNone}
	if creq.Seed != nil {
		seed := *creq.Seed
		s.Seed = &seed
	}
	switch {
	case zeroTemp:
		t := float32(0)
		s.Temperature = &t
	case creq.Temperature != 0:
		t := creq.Temperature
		s.Temperature = &t
	}
	if schema != nil {
		s.ResponseFormat = level.String()
	}
	return s
}

// toMessage uses plain content for text-only messages (every server takes that) and
// content parts only when an image needs them (vision servers).
func toMessage(m judge.Message) (goopenai.ChatCompletionMessage, error) {
	if m.Role == "" {
		return goopenai.ChatCompletionMessage{}, errors.New("no role")
	}
	hasImage := false
	var text strings.Builder
	for _, part := range m.Parts {
		if part.Image != nil {
			hasImage = true
		} else {
			text.WriteString(part.Text)
		}
	}
	if !hasImage {
		if text.Len() == 0 {
			return goopenai.ChatCompletionMessage{}, errors.New("no content")
		}
		return goopenai.ChatCompletionMessage{Role: m.Role, Content: text.String()}, nil
	}
	parts := make([]goopenai.ChatMessagePart, 0, len(m.Parts))
	for j, part := range m.Parts {
		if part.Image == nil {
			if part.Text != "" {
				parts = append(parts, goopenai.ChatMessagePart{Type: goopenai.ChatMessagePartTypeText, Text: part.Text})
			}
			continue
		}
		if len(part.Image.Data) == 0 {
			return goopenai.ChatCompletionMessage{}, fmt.Errorf("part %d: empty image", j)
		}
		parts = append(parts, goopenai.ChatMessagePart{
			Type:     goopenai.ChatMessagePartTypeImageURL,
			ImageURL: &goopenai.ChatMessageImageURL{URL: dataURL(part.Image)},
		})
	}
	return goopenai.ChatCompletionMessage{Role: m.Role, MultiContent: parts}, nil
}

// dataURL inlines an image; servers in a sandbox cannot fetch URLs, and the judge must
// see exactly the bytes that were captured.
func dataURL(img *judge.Image) string {
	mt := img.MediaType
	if mt == "" {
		mt = http.DetectContentType(img.Data)
	}
	return "data:" + mt + ";base64," + base64.StdEncoding.EncodeToString(img.Data)
}

// responseFormat is the response_format for a rung; requests without a schema are free
// text and never get one.
func responseFormat(l formatLevel, schema *judge.Schema) *goopenai.ChatCompletionResponseFormat {
	if schema == nil {
		return nil
	}
	switch l {
	case levelSchema:
		return &goopenai.ChatCompletionResponseFormat{
			Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
				Name:   schemaName(schema.Name),
				Schema: json.RawMessage(schema.JSON),
				Strict: true,
			},
		}
	case levelObject:
		return &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONObject}
	default:
		return nil
	}
}

// schemaName fits a name to OpenAI's rule for schema names (^[a-zA-Z0-9_-]{1,64}$),
// which rejects the whole request otherwise.
func schemaName(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
		if b.Len() == 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "answer"
	}
	return b.String()
}
