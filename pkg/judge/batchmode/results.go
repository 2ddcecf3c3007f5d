package batchmode

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
)

// CustomID names one judge call deterministically: the same step (judge.ScopeOf, the
// gated event's id) asking the same thing (the request's kind, model, schema, messages
// with the fences' random nonces left out, and its sampling parameters) gets the same id
// on every delivery and on every judge instance. It is the line's custom_id in the
// provider's batch file, and the key that keeps a call from being submitted twice.
func CustomID(scope string, req judge.Request) string {
	h := sha256.New()
	w := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	w("tribunal-batch-call-v1", scope, external.RequestDigest(req))
	if t := req.Params.Temperature; t != nil {
		w("temperature", strconv.FormatFloat(float64(*t), 'g', -1, 32))
	}
	if s := req.Params.Seed; s != nil {
		w("seed", strconv.Itoa(*s))
	}
	w("max_tokens", strconv.Itoa(req.Params.MaxTokens))
	sum := h.Sum(nil)
	return "tj-" + hex.EncodeToString(sum[:16])
}

// Result is what a provider batch's output or error file says about one request.
type Result struct {
	// Body is the chat completion the request was answered with (HTTP 200), nil when it
	// failed.
	Body json.RawMessage
	// Error says why the request has no answer: the line's error, or its non-200 status
	// and the error body; "" when Body is set.
	Error string
}

// resultLine is one line of a batch's output or error file.
type resultLine struct {
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// ParseResults reads a provider batch's output and error files (JSONL, either may be
// empty) into the result of each custom_id. A line answered 200 is an answer; a line with
// an error, or with another status, is a failure with its reason. A custom_id on several
// lines keeps its first answer. A line that is not JSON, or names no custom_id, is an
// error: the files are the provider's, and a result that cannot be mapped back must not
// be dropped unseen.
func ParseResults(files ...[]byte) (map[string]Result, error) {
	out := map[string]Result{}
	for fi, data := range files {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
		n := 0
		for sc.Scan() {
			n++
			line := bytes.TrimSpace(sc.Bytes())
			if len(line) == 0 {
				continue
			}
			var l resultLine
			if err := json.Unmarshal(line, &l); err != nil {
				return out, fmt.Errorf("result file %d line %d: %w", fi+1, n, err)
			}
			if l.CustomID == "" {
				return out, fmt.Errorf("result file %d line %d: no custom_id", fi+1, n)
			}
			r := lineResult(l)
			if prev, ok := out[l.CustomID]; ok && prev.Body != nil {
				continue
			}
			out[l.CustomID] = r
		}
		if err := sc.Err(); err != nil {
			return out, fmt.Errorf("result file %d: %w", fi+1, err)
		}
	}
	return out, nil
}

// lineResult is one line's answer or failure.
func lineResult(l resultLine) Result {
	if l.Error != nil && (l.Error.Code != "" || l.Error.Message != "") {
		return Result{Error: firstNonEmpty(l.Error.Code, "error") + ": " + l.Error.Message}
	}
	if l.Response == nil {
		return Result{Error: "the line has neither a response nor an error"}
	}
	if l.Response.StatusCode != 200 {
		var e struct {
			Error struct {
				Code    any    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		msg := string(l.Response.Body)
		if json.Unmarshal(l.Response.Body, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Message
			if c, ok := e.Error.Code.(string); ok && c != "" {
				msg = c + ": " + msg
			}
		}
		return Result{Error: fmt.Sprintf("HTTP %d: %s", l.Response.StatusCode, judge.Truncate(msg, 500))}
	}
	return Result{Body: l.Response.Body}
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
