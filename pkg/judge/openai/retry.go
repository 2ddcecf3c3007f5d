package openai

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// attemptKey carries an *attemptInfo in the request context from Provider.attempt to
// doer, the only place that sees the raw HTTP exchange.
type attemptKey struct{}

// attemptInfo is what go-openai does not report: whether the request left at all, and
// the status and headers (Retry-After) of the response. One goroutine owns it.
type attemptInfo struct {
	zeroTemperature bool

	sent   bool
	status int
	header http.Header
}

// doer is the HTTP client handed to go-openai. It records each response's status and
// headers, since go-openai's errors drop the headers, and puts back an explicit
// "temperature":0, which go-openai's omitempty drops (sashabaranov/go-openai#9) and
// without which servers sample at their default temperature.
type doer struct {
	client *http.Client
}

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	info, _ := req.Context().Value(attemptKey{}).(*attemptInfo)
	if info == nil {
		return d.client.Do(req)
	}
	info.sent = true
	if info.zeroTemperature {
		if err := addZeroTemperature(req); err != nil {
			return nil, err
		}
	}
	resp, err := d.client.Do(req)
	if resp != nil {
		info.status = resp.StatusCode
		info.header = resp.Header
	}
	return resp, err
}

// addZeroTemperature adds "temperature":0 as the body's first field. go-openai leaves
// the field out when it is 0, so the key cannot be there already.
func addZeroTemperature(req *http.Request) error {
	if req.Body == nil {
		return errors.New("openai: request has no body to set temperature in")
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return fmt.Errorf("openai: reading request body: %w", err)
	}
	nb, err := withZeroTemperature(body)
	if err != nil {
		return err
	}
	req.Body = io.NopCloser(bytes.NewReader(nb))
	req.ContentLength = int64(len(nb))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(nb)), nil }
	return nil
}

// withZeroTemperature is the JSON object body with "temperature":0 as its first field
// (a direct call's body, and a batch file line's).
func withZeroTemperature(body []byte) ([]byte, error) {
	if len(body) < 2 || body[0] != '{' {
		return nil, errors.New("openai: request body is not a JSON object")
	}
	const field = `"temperature":0`
	sep := ","
	if bytes.Equal(bytes.TrimSpace(body[1:]), []byte("}")) {
		sep = ""
	}
	nb := make([]byte, 0, len(body)+len(field)+1)
	nb = append(nb, '{')
	nb = append(nb, field...)
	nb = append(nb, sep...)
	nb = append(nb, body[1:]...)
	return nb, nil
}

// failure is one failed attempt, classified.
type failure struct {
	// status is the HTTP status, 0 if no response arrived.
	status    int
	msg       string
	retryable bool
	// retryAfter is the server's requested wait, when hasRetryAfter.
	retryAfter    time.Duration
	hasRetryAfter bool
	err           error
	// reason classifies a retryable failure for metrics (telemetry.Retry*).
	reason string
}

// formatRejected reports a server refusing the response_format itself (an old model, a
// server without structured outputs, an old Azure api-version), which a weaker format
// may fix, as opposed to any other bad request, which it will not.
func (f *failure) formatRejected() bool {
	if f.status != http.StatusBadRequest && f.status != http.StatusUnprocessableEntity {
		return false
	}
	m := strings.ToLower(f.msg)
	for _, s := range []string{"response_format", "response format", "json_schema", "json_object"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// classify decides whether a failed attempt is worth repeating: timeouts, network errors,
// 429 and 5xx are; other 4xx and requests go-openai refused to send are not, because
// they would fail the same way again.
func classify(err error, info *attemptInfo, timedOut bool, timeout time.Duration) *failure {
	f := &failure{status: info.status, err: err, msg: err.Error()}
	var apiErr *goopenai.APIError
	var reqErr *goopenai.RequestError
	switch {
	case errors.As(err, &apiErr):
		f.msg = apiErr.Message
	case errors.As(err, &reqErr):
		f.msg = strings.TrimSpace(string(reqErr.Body))
		if f.msg == "" {
			f.msg = http.StatusText(reqErr.HTTPStatusCode)
		}
	}
	const maxMsg = 500
	if len(f.msg) > maxMsg {
		f.msg = f.msg[:maxMsg] + "..."
	}

	switch {
	case !info.sent:
		// go-openai rejected the request locally (model/parameter validation, marshalling).
		f.retryable = false
	case timedOut:
		f.retryable, f.reason = true, telemetry.RetryTimeout
		f.msg = fmt.Sprintf("attempt timed out after %s", timeout)
	case f.status == 0:
		f.retryable, f.reason = true, telemetry.RetryNetwork // connection refused, reset, DNS...
	case f.status == http.StatusTooManyRequests:
		f.retryable, f.reason = true, telemetry.RetryRateLimited
	case f.status >= 500:
		f.retryable, f.reason = true, telemetry.RetryServerError
	case f.status >= 200 && f.status < 300:
		f.retryable, f.reason = true, telemetry.RetryEmpty // body cut off or garbled on the way
	default:
		f.retryable = false
	}
	if f.retryable && f.status != 0 {
		f.retryAfter, f.hasRetryAfter = parseRetryAfter(info.header, time.Now())
	}
	return f
}

// parseRetryAfter reads how long the server asked us to wait: retry-after-ms (OpenAI and
// Azure send it), else Retry-After in seconds or as an HTTP date (RFC 9110 10.2.3).
func parseRetryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if h == nil {
		return 0, false
	}
	if v := strings.TrimSpace(h.Get("retry-after-ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// backoff is the wait before retry n (from 1): exponential from BackoffBase, capped at
// BackoffMax, with "equal jitter" (half fixed, half random) so a herd of failed calls
// spreads out but none retries instantly.
func (p *Provider) backoff(n int) time.Duration {
	d := p.cfg.BackoffBase
	for i := 1; i < n && d < p.cfg.BackoffMax; i++ {
		d *= 2
	}
	d = min(d, p.cfg.BackoffMax)
	half := d / 2
	return half + rand.N(d-half+1)
}
