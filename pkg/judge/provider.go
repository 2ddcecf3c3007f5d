// Package judge holds what the judge service owns apart from the bus: the provider
// abstraction (an OpenAI-compatible API or recorded answers), the versioned prompt
// templates, and the validation of each judge kind's answer.
//
// A Provider only turns a prompt into text. Building the prompt (blind: slots A/B, no
// roles, no paths, no diffs) and checking the answer against the kind's schema happen
// here, once, for every provider.
package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// Part is one piece of a message: text, or an image sent inline to a vision model.
type Part struct {
	Text string
	// Image, when non-nil, is sent as a data URL; Text is ignored for that part.
	Image *Image
}

// Image is raw image bytes and their media type ("image/png", ...).
type Image struct {
	MediaType string
	Data      []byte
}

// Message is one chat message. Role is "system", "user" or "assistant".
type Message struct {
	Role  string
	Parts []Part
}

// Schema is the JSON Schema the answer must follow, used for structured output where the
// server supports it.
type Schema struct {
	Name string
	JSON json.RawMessage
}

// Params are the sampling parameters a verdict is reproducible under.
type Params struct {
	Temperature *float32
	Seed        *int
	MaxTokens   int
}

// Request is one judge call.
type Request struct {
	// Kind is the judge kind ("ab", "rubric", "equivalence", "critic").
	Kind string
	// Key identifies the item being judged (the AC id) for recorded answers and logs.
	// It is never sent to a model.
	Key string
	// Model is the model to ask; empty means the provider's default.
	Model    string
	Messages []Message
	Schema   *Schema
	Params   Params
	// Attachments are the request's artifacts by name ("artifact_A"), for a judge that
	// reads files rather than a prompt (the external judge: an agent or a person). A model
	// provider ignores them: the messages carry the same bytes, fenced or as images.
	Attachments []Attachment
}

// Attachment is one blinded artifact of a request: a neutral name, a media type and the
// bytes, never a path or a role.
type Attachment struct {
	Name      string
	MediaType string
	Data      []byte
}

// Response is a provider's raw answer.
type Response struct {
	Content string
	// Model is the model id the server reported answering with ("" when it reported
	// none); Sampling.ReportedModel carries it into the verdict.
	Model            string
	PromptTokens     int
	CompletionTokens int
	Latency          time.Duration
	// Attempts counts HTTP attempts including retries.
	Attempts int
	// ID is the completion's id as the server gave it ("" when it gave none).
	ID string
	// FinishReasons are why the model stopped, one per choice as the server reported it
	// ("stop", "length", ...).
	FinishReasons []string
	// CachedPromptTokens are the prompt tokens the server served from its prompt cache
	// (part of PromptTokens), when it reports them.
	CachedPromptTokens int
	// Batch marks an answer obtained through the provider's batch API.
	Batch bool
	// Cost is what the call cost and Priced whether it is known, as Priced (the price
	// table's wrapper) computed it; PriceTable names the table.
	Cost       price.Money
	Priced     bool
	PriceTable string
	// Sampling is what the provider actually sent for the answering attempt: the
	// temperature (nil when none was pinned), seed, token limit and response format after
	// any fallback, and the model id the server reported. A provider that sends nothing
	// (recorded answers) reports the request's parameters and events.FormatNone.
	Sampling events.Sampling
	// BatchID is the provider's id of the batch that answered, when Batch.
	BatchID string
}

// Provider answers judge requests.
type Provider interface {
	// Name is the provider kind as it appears in every verdict ("openai", "scripted").
	Name() string
	// DefaultModel is the model used when a request names none.
	DefaultModel() string
	// Complete sends the request and returns the raw answer. Transient failures
	// (timeouts, 429, 5xx) are retried inside; the error returned after the last attempt
	// wraps ErrUnavailable.
	Complete(ctx context.Context, req Request) (Response, error)
}

// Recorded is a Provider that answers from recordings and asks no model
// (pkg/judge/scripted): its calls are not calls to a generative AI system, so
// instrument.Provider gives them no GenAI span (they are still measured).
type Recorded interface {
	// AsksNoModel reports that the provider answers without any model.
	AsksNoModel() bool
}

// Bounded is a Provider that caps its own calls in flight (the openai provider's
// Concurrency), so the service feeding it can keep that many calls busy.
type Bounded interface {
	// MaxInFlight is the most calls the provider makes at once.
	MaxInFlight() int
}

var (
	// ErrUnavailable marks a provider that could not be reached or kept failing after its
	// retries. The AC is blocked with the reason, never passed.
	ErrUnavailable = errclass.New(errclass.Unavailable, "judge provider unavailable")
	// ErrSchemaViolation marks an answer that stayed invalid after the repair re-ask.
	ErrSchemaViolation = errclass.New(errclass.Refused, "judge answer violates the schema")
	// ErrAnswerFinal is what a provider that cannot be asked again returns for a repair
	// re-ask (the external judge: an agent's or a person's answer is given once, as the
	// seed's winner file is). Ask then keeps the first answer's violation.
	ErrAnswerFinal = errors.New("the answer is final: no repair re-ask")
)

// StatusError is the HTTP status a provider's server answered a call with when it gave no
// answer. A provider that gives up wraps it (with ErrUnavailable), so a caller tells a 429
// from an outage with errors.As, never by reading the error's text.
type StatusError struct {
	// Status is the HTTP status code.
	Status int
}

// Error implements error.
func (e *StatusError) Error() string { return fmt.Sprintf("HTTP %d", e.Status) }

// RateLimited reports whether a provider gave up on err because the server answered 429.
func RateLimited(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Status == http.StatusTooManyRequests
}

// Find finds the optional interface T on p or on a provider it wraps (Limited's): a wrapper
// would otherwise hide, say, the server address of the provider under the rate limits.
func Find[T any](p Provider) (T, bool) {
	for p != nil {
		if t, ok := p.(T); ok {
			return t, true
		}
		u, ok := p.(interface{ Unwrap() Provider })
		if !ok {
			break
		}
		p = u.Unwrap()
	}
	var zero T
	return zero, false
}

// CallStatus classifies how a provider call ended, for rate limiters and metrics: "ok",
// StatusRateLimited, "unavailable", "canceled" (the caller gave up: a shutdown) or
// "error" (a request the provider could not make).
func CallStatus(ctx context.Context, err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrUnavailable) && RateLimited(err):
		return StatusRateLimited
	case errors.Is(err, ErrUnavailable):
		return "unavailable"
	case ctx.Err() != nil:
		return "canceled"
	default:
		return "error"
	}
}
