package judge

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync"
	"time"
)

// CallRecordVersion is the version of the call record's JSON.
const CallRecordVersion = 1

// CallRecordMediaType is the media type call records are stored under.
const CallRecordMediaType = "application/json"

// CallRecord is what one judge call sent and received, exactly, for reviewers: every
// request the call made (a repair re-ask is a second one, holding the first answer and
// the repair message) and each raw answer. The judge service stores it as a blob and puts
// only its reference on the verdict: prompts never travel in events, and no judge is
// ever handed a record (judges are given gated slots, nothing else). Images are recorded
// by digest and media type; the bytes are the artifacts already in blob storage under the
// same tenant.
type CallRecord struct {
	Version   int        `json:"version"`
	Exchanges []Exchange `json:"exchanges"`
}

// Exchange is one request and its answer.
type Exchange struct {
	Kind     string            `json:"kind"`
	Model    string            `json:"model"`
	Schema   string            `json:"schema,omitempty"`
	Messages []RecordedMessage `json:"messages"`
	// Response is the model's answer text as received; Error says why there is none.
	Response         string `json:"response,omitempty"`
	ResponseModel    string `json:"response_model,omitempty"`
	Error            string `json:"error,omitempty"`
	PromptTokens     int    `json:"prompt_tokens,omitempty"`
	CompletionTokens int    `json:"completion_tokens,omitempty"`
	LatencyMillis    int64  `json:"latency_ms"`
	// Batch is true when the exchange went through the provider's batch API; BatchID
	// names the provider's batch that answered it.
	Batch   bool   `json:"batch,omitempty"`
	BatchID string `json:"batch_id,omitempty"`
}

// RecordedMessage is one message of a request.
type RecordedMessage struct {
	Role  string         `json:"role"`
	Parts []RecordedPart `json:"parts"`
}

// RecordedPart is a text part, or an image named by its digest.
type RecordedPart struct {
	Text  string         `json:"text,omitempty"`
	Image *RecordedImage `json:"image,omitempty"`
}

// RecordedImage is an image part: the SHA-256 of the bytes sent, their media type and
// size.
type RecordedImage struct {
	SHA256    string `json:"sha256"`
	MediaType string `json:"media_type"`
	Size      int    `json:"size"`
}

// Recording is a Provider that keeps every request it forwards and its answer. Wrap the
// provider once per judge call (Record), make the call, then take the record.
type Recording struct {
	Provider
	mu        sync.Mutex
	exchanges []Exchange
}

// Record wraps p for one judge call.
func Record(p Provider) *Recording { return &Recording{Provider: p} }

// Complete implements Provider.
func (r *Recording) Complete(ctx context.Context, req Request) (Response, error) {
	start := time.Now()
	resp, err := r.Provider.Complete(ctx, req)
	x := Exchange{Kind: req.Kind, Model: req.Model, Messages: recordMessages(req.Messages), Response: resp.Content,
		ResponseModel: resp.Model, PromptTokens: resp.PromptTokens, CompletionTokens: resp.CompletionTokens,
		LatencyMillis: time.Since(start).Milliseconds(), Batch: resp.Batch, BatchID: resp.BatchID}
	if req.Schema != nil {
		x.Schema = req.Schema.Name
	}
	if err != nil {
		x.Error = err.Error()
	}
	r.mu.Lock()
	r.exchanges = append(r.exchanges, x)
	r.mu.Unlock()
	return resp, err
}

// Record returns what the call sent and received; nil when it sent nothing (an input
// refused before any request).
func (r *Recording) Record() *CallRecord {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.exchanges) == 0 {
		return nil
	}
	return &CallRecord{Version: CallRecordVersion, Exchanges: append([]Exchange(nil), r.exchanges...)}
}

// Encode is the record's stored bytes: json.MarshalIndent's, byte for byte, written through
// a pooled encoder. Every judge call stores one, and MarshalIndent's two fresh buffers
// were 4 % of the bytes a 10,000-AC run allocated.
func (c *CallRecord) Encode() ([]byte, error) {
	e := recordEncoders.Get().(*indentEncoder)
	defer func() {
		if e.buf.Cap() <= 256<<10 { // a rare large record's buffer is not kept
			recordEncoders.Put(e)
		}
	}()
	e.buf.Reset()
	if err := e.enc.Encode(c); err != nil {
		return nil, err
	}
	b := e.buf.Bytes()
	return bytes.Clone(b[:len(b)-1]), nil // the encoder ends the value with a newline
}

// indentEncoder is a JSON encoder that indents like Encode into its own buffer.
type indentEncoder struct {
	buf bytes.Buffer
	enc *json.Encoder
}

var recordEncoders = sync.Pool{New: func() any {
	e := &indentEncoder{}
	e.enc = json.NewEncoder(&e.buf)
	e.enc.SetIndent("", "  ")
	return e
}}

// DecodeCallRecord reads a stored record.
func DecodeCallRecord(data []byte) (*CallRecord, error) {
	var c CallRecord
	if err := json.Unmarshal(data, &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// RecordMessages is messages as a call record keeps them: text as sent, images by
// digest, media type and size.
func RecordMessages(msgs []Message) []RecordedMessage { return recordMessages(msgs) }

func recordMessages(msgs []Message) []RecordedMessage {
	out := make([]RecordedMessage, 0, len(msgs))
	for _, m := range msgs {
		rm := RecordedMessage{Role: m.Role}
		for _, p := range m.Parts {
			if p.Image != nil {
				sum := sha256.Sum256(p.Image.Data)
				rm.Parts = append(rm.Parts, RecordedPart{Image: &RecordedImage{SHA256: hex.EncodeToString(sum[:]), MediaType: p.Image.MediaType, Size: len(p.Image.Data)}})
				continue
			}
			rm.Parts = append(rm.Parts, RecordedPart{Text: p.Text})
		}
		out = append(out, rm)
	}
	return out
}
