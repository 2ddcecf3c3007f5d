package openai

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
)

// BatchAPI is the provider's batch endpoints (files and batches, through go-openai) as
// the batch judge mode uses them (batchmode.Backend). Its lines are the bodies Complete
// sends, so a call asked through a batch is the call a direct judge makes.
type BatchAPI struct {
	p *Provider
}

var (
	_ batchmode.Backend  = (*BatchAPI)(nil)
	_ batchmode.Batching = (*Provider)(nil)
)

// BatchAPI is p's batch API. Azure's batch deployments use other URLs; only the OpenAI
// path is offered.
func (p *Provider) BatchAPI() (batchmode.Backend, error) {
	if p.cfg.Azure {
		return nil, errors.New("openai provider: the batch judge mode is not offered for Azure OpenAI (its batch deployments use other URLs)")
	}
	return &BatchAPI{p: p}, nil
}

// batchLine is one line of a batch input file; Body is the chat completion request as
// Complete sends it (an explicit temperature 0 included).
type batchLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// body is the chat completion request Complete would send first for req, and what it
// needs to read the answer.
func (b *BatchAPI) body(req judge.Request) (goopenai.ChatCompletionRequest, bool, formatLevel, error) {
	model := req.Model
	if model == "" {
		model = b.p.cfg.Model
	}
	creq, zeroTemp, err := buildRequest(model, req, b.p.cfg.MaxTokens)
	if err != nil {
		return creq, false, 0, fmt.Errorf("%s: invalid request for %s %s: %w", b.p.label(), req.Kind, req.Key, err)
	}
	// A batch line cannot fall back down the response-format ladder mid-call: it is sent
	// at the rung this instance stands on.
	level := b.p.startLevel()
	creq.ResponseFormat = responseFormat(level, req.Schema)
	return creq, zeroTemp, level, nil
}

// Line implements batchmode.Backend.
func (b *BatchAPI) Line(customID string, req judge.Request) ([]byte, error) {
	creq, zeroTemp, _, err := b.body(req)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(creq)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", b.p.label(), err)
	}
	if zeroTemp {
		if body, err = withZeroTemperature(body); err != nil {
			return nil, err
		}
	}
	return json.Marshal(batchLine{CustomID: customID, Method: http.MethodPost, URL: string(goopenai.BatchEndpointChatCompletions), Body: body})
}

// Decode implements batchmode.Backend.
func (b *BatchAPI) Decode(body json.RawMessage, req judge.Request) (judge.Response, error) {
	creq, zeroTemp, level, err := b.body(req)
	if err != nil {
		return judge.Response{}, err
	}
	var resp goopenai.ChatCompletionResponse
	if err := json.Unmarshal(body, &resp); err != nil {
		return judge.Response{}, fmt.Errorf("the answer is not a chat completion: %w", err)
	}
	if len(resp.Choices) == 0 {
		return judge.Response{}, errors.New("the answer has no choices")
	}
	return answer(resp, creq.Model, creq, zeroTemp, level, req.Schema), nil
}

// Upload implements batchmode.Backend.
func (b *BatchAPI) Upload(ctx context.Context, name string, jsonl []byte) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, b.p.cfg.Timeout)
	defer cancel()
	f, err := b.p.client.CreateFileBytes(ctx, goopenai.FileBytesRequest{Name: name, Bytes: jsonl, Purpose: goopenai.PurposeBatch})
	if err != nil {
		return "", fmt.Errorf("%s: upload batch file %s: %w", b.p.label(), name, err)
	}
	return f.ID, nil
}

// Create implements batchmode.Backend.
func (b *BatchAPI) Create(ctx context.Context, fileID string, metadata map[string]string) (batchmode.Remote, error) {
	ctx, cancel := context.WithTimeout(ctx, b.p.cfg.Timeout)
	defer cancel()
	md := map[string]any{}
	for k, v := range metadata {
		md[k] = v
	}
	r, err := b.p.client.CreateBatch(ctx, goopenai.CreateBatchRequest{InputFileID: fileID, Endpoint: goopenai.BatchEndpointChatCompletions,
		CompletionWindow: batchmode.Window, Metadata: md})
	if err != nil {
		return batchmode.Remote{}, fmt.Errorf("%s: create batch of file %s: %w", b.p.label(), fileID, err)
	}
	return remote(r.Batch), nil
}

// Retrieve implements batchmode.Backend.
func (b *BatchAPI) Retrieve(ctx context.Context, id string) (batchmode.Remote, error) {
	ctx, cancel := context.WithTimeout(ctx, b.p.cfg.Timeout)
	defer cancel()
	r, err := b.p.client.RetrieveBatch(ctx, id)
	if err != nil {
		return batchmode.Remote{}, fmt.Errorf("%s: retrieve batch %s: %w", b.p.label(), id, err)
	}
	return remote(r.Batch), nil
}

// Content implements batchmode.Backend.
func (b *BatchAPI) Content(ctx context.Context, fileID string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, b.p.cfg.Timeout)
	defer cancel()
	raw, err := b.p.client.GetFileContent(ctx, fileID)
	if err != nil {
		return nil, fmt.Errorf("%s: read file %s: %w", b.p.label(), fileID, err)
	}
	defer raw.Close()
	data, err := io.ReadAll(io.LimitReader(raw, 2*batchmode.MaxBytesLimit))
	if err != nil {
		return nil, fmt.Errorf("%s: read file %s: %w", b.p.label(), fileID, err)
	}
	return data, nil
}

// Find implements batchmode.Backend: it pages through the provider's batches, newest
// first, for one whose metadata has key set to value.
func (b *BatchAPI) Find(ctx context.Context, key, value string) (batchmode.Remote, bool, error) {
	var after *string
	limit := 100
	for page := 0; page < 50; page++ {
		pctx, cancel := context.WithTimeout(ctx, b.p.cfg.Timeout)
		l, err := b.p.client.ListBatch(pctx, after, &limit)
		cancel()
		if err != nil {
			return batchmode.Remote{}, false, fmt.Errorf("%s: list batches: %w", b.p.label(), err)
		}
		for _, bt := range l.Data {
			if v, ok := bt.Metadata[key].(string); ok && v == value {
				return remote(bt), true, nil
			}
		}
		if !l.HasMore || l.LastID == "" {
			return batchmode.Remote{}, false, nil
		}
		last := l.LastID
		after = &last
	}
	return batchmode.Remote{}, false, fmt.Errorf("%s: list batches: more than 5,000 batches, stopped looking", b.p.label())
}

// Cancel implements batchmode.Backend.
func (b *BatchAPI) Cancel(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, b.p.cfg.Timeout)
	defer cancel()
	if _, err := b.p.client.CancelBatch(ctx, id); err != nil {
		return fmt.Errorf("%s: cancel batch %s: %w", b.p.label(), id, err)
	}
	return nil
}

// remote is go-openai's batch as the batch mode reads it.
func remote(bt goopenai.Batch) batchmode.Remote {
	r := batchmode.Remote{ID: bt.ID, Status: bt.Status, InputFileID: bt.InputFileID, Total: bt.RequestCounts.Total,
		Completed: bt.RequestCounts.Completed, Failed: bt.RequestCounts.Failed}
	if bt.OutputFileID != nil {
		r.OutputFileID = *bt.OutputFileID
	}
	if bt.ErrorFileID != nil {
		r.ErrorFileID = *bt.ErrorFileID
	}
	if bt.Errors != nil {
		var msgs []string
		for _, e := range bt.Errors.Data {
			m := e.Code + ": " + e.Message
			if e.Line != nil {
				m = fmt.Sprintf("line %d: %s", *e.Line, m)
			}
			msgs = append(msgs, m)
		}
		r.Errors = judge.Truncate(strings.Join(msgs, "; "), 1000)
	}
	return r
}
