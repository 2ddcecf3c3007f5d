package judge

import (
	"context"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// MaxRawBytes bounds the invalid answer kept for audit.
const MaxRawBytes = 2000

// RepairReAsks is how many times Ask asks again after an answer parse rejects. Every
// bound on what a judging may cost (pkg/spend) counts these calls too, so the number
// lives here, beside the loop that makes them.
const RepairReAsks = 1

// Usage says which provider and model answered a call, under which prompt, and at what
// cost. It is recorded with every runner transcript and judge answer so a reviewer can
// tell what produced it.
type Usage struct {
	Provider   string `json:"provider"`
	Model      string `json:"model"`
	Instance   string `json:"instance,omitempty"`
	PromptHash string `json:"prompt_hash"`
	// PromptTokens and CompletionTokens add up every call, the repair re-ask included.
	PromptTokens     int   `json:"prompt_tokens,omitempty"`
	CompletionTokens int   `json:"completion_tokens,omitempty"`
	LatencyMillis    int64 `json:"latency_ms,omitempty"`
	// Calls counts Complete calls: 1, or 2 when a repair was asked for, 0 when the
	// input was refused before any call.
	Calls int `json:"calls"`
	// Sampling is how the last answered call was sampled, as the provider reported it
	// (nil when no call was answered). Model stays the model asked for; the id the
	// server reported is Sampling.ReportedModel.
	Sampling *events.Sampling `json:"sampling,omitempty"`
	// Call is the stored record of the exchange (CallRecord), when one was kept.
	Call *events.Blob `json:"call,omitempty"`
	// CachedPromptTokens and Batch are as the provider reported them (Response).
	CachedPromptTokens int  `json:"cached_prompt_tokens,omitempty"`
	Batch              bool `json:"batch,omitempty"`
	// Priced says every call was priced, Cost what they cost together and PriceTable the
	// table's version; Unpriced counts calls of a model the table has no price for.
	Priced     bool        `json:"priced,omitempty"`
	Cost       price.Money `json:"cost_nanos,omitempty"`
	PriceTable string      `json:"price_table,omitempty"`
	Unpriced   int         `json:"unpriced,omitempty"`
	// Saved is, for an answer served from the judge-call cache, what it cost when asked.
	Saved price.Money `json:"saved_nanos,omitempty"`
	// BudgetRefused is why a budget refused the call (ErrBudgetExhausted); nothing was
	// sent.
	BudgetRefused string `json:"budget_refused,omitempty"`
}

// add counts one answered call's usage.
func (u *Usage) add(resp Response) {
	u.PromptTokens += resp.PromptTokens
	u.CompletionTokens += resp.CompletionTokens
	u.CachedPromptTokens += resp.CachedPromptTokens
	u.Batch = u.Batch || resp.Batch
	if resp.PriceTable != "" {
		u.PriceTable = resp.PriceTable
	}
	if resp.Priced {
		u.Cost += resp.Cost
	} else {
		u.Unpriced++
	}
	u.Priced = u.Unpriced == 0
}

// JudgeInfo converts the usage to the event form recorded on verdicts.
func (u Usage) JudgeInfo() events.JudgeInfo {
	return events.JudgeInfo{
		Provider: u.Provider, Model: u.Model, Instance: u.Instance, PromptHash: u.PromptHash,
		PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, LatencyMillis: u.LatencyMillis, Call: u.Call,
		Sampling: u.Sampling, CachedPromptTokens: u.CachedPromptTokens, Batch: u.Batch, Priced: u.Priced && u.Unpriced == 0,
		CostNanos: int64(u.Cost), SavedNanos: int64(u.Saved), PriceTable: u.PriceTable, BudgetRefused: u.BudgetRefused,
	}
}

// Outcome is one judge call's result for the kinds without slots (`equivalence`,
// `critic`): the same statuses an `ab` vote has, with the kind's parsed answer.
//
// Status is "ok", "schema_violation" (the answer stayed invalid after one repair re-ask;
// Raw keeps it for audit), "unavailable" (the provider failed) or "blocked" (the input
// was refused before any call, e.g. "missing input"; nothing was asked). Answer is the
// zero value unless Status is "ok".
type Outcome[T any] struct {
	Usage  Usage             `json:"usage"`
	Status events.VoteStatus `json:"status"`
	Error  string            `json:"error,omitempty"`
	Answer T                 `json:"answer"`
	// Raw is the model's last invalid answer as received (cut to 2000 bytes).
	Raw string `json:"raw,omitempty"`
}

// Call is one judge call of a kind, as the kind's Judge function is asked to make it.
type Call struct {
	Kind events.Kind
	// Key names the job (or case) for recorded answers and logs; it never reaches a model.
	Key string
	// Model is the model to ask; "" asks the provider's default.
	Model    string
	Instance string
	// PromptHash identifies the kind's instructions (PromptHash of its template).
	PromptHash string
	Params     Params
	// Attachments are the call's blinded artifacts (Request.Attachments).
	Attachments []Attachment
}

// Usage is the call's usage before any answer: who is asked, under which prompt.
func (c Call) Usage(p Provider) Usage {
	model := c.Model
	if model == "" {
		model = p.DefaultModel()
	}
	return Usage{Provider: p.Name(), Model: model, Instance: c.Instance, PromptHash: c.PromptHash}
}

// Refused is the outcome of a call refused before anything was asked (an input the kind
// will not judge): status "blocked" with the reason.
func Refused[T any](p Provider, c Call, reason string) Outcome[T] {
	return Outcome[T]{Usage: c.Usage(p), Status: events.VoteBlocked, Error: reason}
}

// AskCall makes the call c with these messages and answer schema (Ask: one repair
// re-ask when parse rejects the answer) and returns its outcome.
func AskCall[T any](ctx context.Context, p Provider, c Call, msgs []Message, schema *Schema, parse func([]byte) (T, error)) Outcome[T] {
	usage := c.Usage(p)
	req := Request{Kind: string(c.Kind), Key: c.Key, Model: usage.Model, Messages: msgs, Schema: schema, Params: c.Params, Attachments: c.Attachments}
	out, _ := Ask(ctx, p, req, usage, parse)
	return out
}

// Ask sends req and, when parse rejects the answer, re-asks once with the
// problem named. It returns the outcome and the last error seen
// (the provider's or parse's), for callers that report errors rather than statuses.
func Ask[T any](ctx context.Context, p Provider, req Request, usage Usage, parse func([]byte) (T, error)) (out Outcome[T], last error) {
	out.Usage = usage
	start := time.Now()
	defer func() { out.Usage.LatencyMillis = time.Since(start).Milliseconds() }()
	for attempt := 0; attempt <= RepairReAsks; attempt++ {
		resp, err := p.Complete(ctx, req)
		if err != nil && attempt > 0 && errors.Is(err, ErrAnswerFinal) {
			// Nobody can be asked again: the first answer's violation stands, and no
			// second call was made.
			return out, last
		}
		if err != nil && errors.Is(err, ErrBudgetExhausted) {
			// Nothing was sent: no call to count, and the refusal is recorded for the
			// rules, which block the job with it.
			out.Status, out.Error, out.Usage.BudgetRefused = events.VoteUnavailable, err.Error(), err.Error()
			return out, err
		}
		out.Usage.Calls++
		if err != nil {
			out.Usage.add(resp)
			// The caller tells a cancelled ctx (a shutdown) from an outage.
			out.Status, out.Error = events.VoteUnavailable, err.Error()
			return out, err
		}
		sampling := resp.Sampling
		if sampling.ReportedModel == "" {
			sampling.ReportedModel = resp.Model
		}
		out.Usage.Sampling = &sampling
		out.Usage.add(resp)
		v, perr := parse([]byte(resp.Content))
		if perr == nil {
			out.Status, out.Answer, out.Error, out.Raw = events.VoteOK, v, "", ""
			return out, nil
		}
		out.Status, out.Error, out.Raw = events.VoteSchemaViolation, perr.Error(), Truncate(resp.Content, MaxRawBytes)
		last = perr
		repair, rerr := Render(repairTemplate, map[string]string{"Problem": perr.Error()})
		if rerr != nil {
			out.Error = rerr.Error()
			return out, rerr
		}
		req.Messages = append(req.Messages,
			Message{Role: "assistant", Parts: []Part{{Text: resp.Content}}},
			Message{Role: "user", Parts: []Part{{Text: repair}}})
	}
	return out, last
}

// Truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// CopySchema hands out a schema whose bytes the caller may keep or change without
// touching the one every request is built from.
func CopySchema(s Schema) *Schema {
	return &Schema{Name: s.Name, JSON: append([]byte(nil), s.JSON...)}
}
