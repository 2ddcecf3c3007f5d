// Package external is the external judge: an agent or a person answers the blinded
// prompts a model would otherwise get. Seed 000 runs inside an agent that is itself the
// critic; this package lets any kind put someone in that seat.
//
// The judge service hands a gated job that names the external judge (judges:
// [external]) to the Provider here. A call whose answer is already recorded is answered
// with it; otherwise the call's prompt is published in the exchange (a JetStream
// key-value bucket beside the stream: the blinded messages, the artifacts as named
// attachments, and the gated event it was built from) and the judge service parks the
// job: it acknowledges the gated event and publishes nothing. Whoever answers later (a
// CLI, an API) records the answer in the exchange, and the judge step is resumed from the
// recorded gated event (services/judge.Service.Resume): the kind's own judge runs again,
// its calls are answered from the exchange, and the verdict it derives goes on to the
// aggregator like any other, chained to the gated event it rests on. Phase 1 (publish)
// and phase 2 (answer) can therefore be separate processes, any time apart, with nothing
// in flight in between.
//
// An answer is final, as seed 000's winner file is: a repair re-ask is refused
// (judge.ErrAnswerFinal), so an answer outside the kind's schema is a schema violation. A
// call can also be closed without an answer (Answer.Missing): its job is then blocked
// with that reason, never passed. Answers are never cached: a person's answer is given
// to one call.
package external

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// Name is the judge a job names to be judged externally (`judges: [external]`), and the
// provider name every such verdict records.
const Name = "external"

// Bucket is the key-value bucket that holds the exchange.
const Bucket = "tribunal_external"

// Named reports whether a gated job asks for the external judge: its judges are exactly
// [external]. A panel mixing it with models is not offered; Mixed reports one.
func Named(judges []string) bool { return len(judges) == 1 && judges[0] == Name }

// Mixed reports whether judges name the external judge beside other judges.
func Mixed(judges []string) bool {
	for _, j := range judges {
		if j == Name {
			return len(judges) > 1
		}
	}
	return false
}

// CallID names one call of one judged job: the job's identity, its iteration and redrive
// attempt, and the call's place among the job's calls (0 for the first; a kind that asks
// several times, a position swap, asks in a fixed order).
type CallID struct {
	Tenant    string `json:"tenant"`
	Batch     string `json:"batch"`
	Job       string `json:"job"`
	Iteration int    `json:"iteration"`
	Attempt   int    `json:"attempt,omitempty"`
	Seq       int    `json:"seq"`
}

// First is the first call of job (tenant, batch, job) at iteration and attempt 0: the one
// call of an ab comparison in one order, which seed 000's winner file answers.
func First(tenant, batch, job string, iteration int) CallID {
	return CallID{Tenant: tenant, Batch: batch, Job: job, Iteration: iteration}
}

// key is the call's key in the bucket.
func (c CallID) key() string {
	return "c." + c.Tenant + "." + c.Batch + "." + c.Job + "." + strconv.Itoa(c.Iteration) + "." + strconv.Itoa(c.Attempt) + "." + strconv.Itoa(c.Seq)
}

// validate refuses an id whose parts cannot be key segments.
func (c CallID) validate() error {
	for field, v := range map[string]string{"tenant": c.Tenant, "batch": c.Batch, "job": c.Job} {
		if err := events.ValidateName(v); err != nil {
			return fmt.Errorf("external call %s: %w", field, err)
		}
	}
	if c.Iteration < 0 || c.Attempt < 0 || c.Seq < 0 {
		return fmt.Errorf("external call %s: iteration, attempt and seq must not be negative", c)
	}
	return nil
}

// String names the call for messages: "team/batch/AC-7 iteration 0 call 1".
func (c CallID) String() string {
	s := fmt.Sprintf("%s/%s/%s iteration %d call %d", c.Tenant, c.Batch, c.Job, c.Iteration, c.Seq+1)
	if c.Attempt > 0 {
		s += fmt.Sprintf(" (redrive attempt %d)", c.Attempt)
	}
	return s
}

// sameJob reports whether a and b are calls of one job iteration and attempt.
func (c CallID) sameJob(o CallID) bool {
	return c.Tenant == o.Tenant && c.Batch == o.Batch && c.Job == o.Job && c.Iteration == o.Iteration && c.Attempt == o.Attempt
}

// Call is the exchange's record of one call: the prompt the judge published, the answer
// given to it, and when a verdict was derived from that answer after the job was parked.
// Either of Prompt and Answer may come first: an answer can be recorded before the judge
// reaches the call (seed 000's phase 2 without a phase 1, a fixture).
type Call struct {
	ID     CallID  `json:"id"`
	Prompt *Prompt `json:"prompt,omitempty"`
	Answer *Answer `json:"answer,omitempty"`
	// Resumed is when the parked job's verdict was published from the answer.
	Resumed *time.Time `json:"resumed,omitempty"`
}

// Parked reports whether the judge published the call's prompt and waits for its answer.
func (c Call) Parked() bool { return c.Prompt != nil && c.Answer == nil }

// Prompt is a published call: what was asked, stored as blobs under the tenant, and the
// gated event the judge step resumes from.
type Prompt struct {
	Kind  string `json:"kind"`
	Model string `json:"model"`
	// Request is the blinded request as an agent or a person reads it (RequestRecord, as
	// JSON): the messages a model would get and the named attachments.
	Request events.Blob `json:"request"`
	// Attachments are the request's artifacts ("artifact_A"), each stored as a blob.
	Attachments []Attachment `json:"attachments,omitempty"`
	// Digest identifies what was asked (RequestDigest): a resumed call that would ask
	// anything else is refused rather than answered with an answer to another question.
	Digest string `json:"digest"`
	// Gated is the gated event the prompt was built from, encoded (events.Encode), and
	// Link its link of the digest chain (its id and the SHA-256 of the bytes the judge
	// received): the verdict derived on resume chains to exactly that event.
	Gated events.Blob `json:"gated"`
	Link  string      `json:"link"`
	At    time.Time   `json:"at"`
}

// Attachment is one named artifact of a prompt, stored as a blob under the tenant.
type Attachment struct {
	Name string      `json:"name"`
	Blob events.Blob `json:"blob"`
}

// RequestRecord is a published request as stored: what the kind asked, in the form a
// call record keeps messages (images by digest).
type RequestRecord struct {
	Kind        string                  `json:"kind"`
	Model       string                  `json:"model"`
	Schema      string                  `json:"schema,omitempty"`
	SchemaJSON  string                  `json:"schema_json,omitempty"`
	Messages    []judge.RecordedMessage `json:"messages"`
	Attachments []Attachment            `json:"attachments,omitempty"`
}

// Answer is what was given to a call: the text the judge would have returned (for ab,
// the verdict object), or, instead, why there is none.
type Answer struct {
	Content string `json:"content,omitempty"`
	// Missing, set instead of Content, closes the call without an answer: its job is
	// blocked with this reason ("the winner file has no verdict for AC-7").
	Missing string `json:"missing,omitempty"`
	// By names who answered ("winner-file verdicts.json", "fixture", a person).
	By string    `json:"by"`
	At time.Time `json:"at"`
}

// same reports whether two answers say the same thing, whoever gave them and when.
func (a Answer) same(b Answer) bool { return a.Content == b.Content && a.Missing == b.Missing }

// nonce matches a fence marker's nonce, drawn afresh for every request (judge.Fence).
var nonce = regexp.MustCompile(`nonce=[0-9a-f]+`)

// RequestDigest identifies what a request asks: its kind, model, answer schema, every
// message (text with the fences' random nonces left out, images by digest) and every
// attachment. Building the same prompt twice from the same gated event gives the same
// digest.
func RequestDigest(req judge.Request) string {
	h := sha256.New()
	w := func(parts ...string) {
		for _, p := range parts {
			h.Write([]byte(p))
			h.Write([]byte{0})
		}
	}
	w(req.Kind, req.Model)
	if req.Schema != nil {
		w(req.Schema.Name, string(req.Schema.JSON))
	}
	for _, m := range judge.RecordMessages(req.Messages) {
		w("message", m.Role)
		for _, p := range m.Parts {
			if p.Image != nil {
				w("image", p.Image.SHA256, p.Image.MediaType)
				continue
			}
			w("text", nonce.ReplaceAllString(p.Text, "nonce="))
		}
	}
	for _, a := range req.Attachments {
		sum := sha256.Sum256(a.Data)
		w("attachment", a.Name, a.MediaType, hex.EncodeToString(sum[:]))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// isRepair reports whether req is a repair re-ask: it carries the answer being repaired
// as an assistant message.
func isRepair(req judge.Request) bool {
	for _, m := range req.Messages {
		if m.Role == "assistant" {
			return true
		}
	}
	return false
}

// ext is a file extension for an attachment of media type mt, so a reader that picks a
// tool by extension (seed 000's dispatch table) treats both slots alike.
func ext(mt string) string {
	switch mt {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/webp":
		return ".webp"
	case "image/gif":
		return ".gif"
	case "image/svg+xml":
		return ".svg"
	case "text/html":
		return ".html"
	case "text/markdown":
		return ".md"
	case "application/json":
		return ".json"
	case "application/yaml":
		return ".yaml"
	case "application/xml":
		return ".xml"
	case "text/x-go":
		return ".go"
	case "text/x-typescript":
		return ".ts"
	case "text/javascript":
		return ".js"
	case "text/x-rust":
		return ".rs"
	case "text/x-python":
		return ".py"
	case "text/css":
		return ".css"
	case "text/csv":
		return ".csv"
	}
	return ".txt"
}

// FileName is the file an attachment is written as: its name and an extension for its
// media type ("artifact_A.png").
func (a Attachment) FileName() string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, a.Name) + ext(a.Blob.MediaType)
}
