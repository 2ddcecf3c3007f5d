package external

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// ErrParked is wrapped by the error a call returns when its prompt is published and no
// answer is recorded yet: the judge service parks the job instead of recording an outage.
var ErrParked = errors.New("awaiting the external judge's answer")

// Job is one gated job the external judge is asked about: the event and the digest of
// the bytes it came as, the calls made so far, and whether one of them was parked.
// The judge service begins one per handling (Begin); the provider numbers its calls.
type Job struct {
	ev     events.Event
	digest string

	mu     sync.Mutex
	seq    int
	parked bool
	err    error
	gated  *events.Blob
}

type jobKey struct{}

// Begin hands the gated event ev, received as bytes with SHA-256 digest, to the calls
// made under the returned context. An empty digest is that of ev encoded again (a caller
// without the received bytes: tests, a resume, which passes the recorded one).
func Begin(ctx context.Context, ev events.Event, digest string) (context.Context, *Job) {
	j := &Job{ev: ev, digest: digest}
	return context.WithValue(ctx, jobKey{}, j), j
}

// Parked reports whether a call of the job published its prompt and waits for an answer:
// the job's verdict comes when the answer does, and nothing is to be published now.
func (j *Job) Parked() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.parked
}

// Err is the first failure to read or write the exchange: the handling is to be tried
// again rather than a verdict derived from it.
func (j *Job) Err() error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.err
}

func (j *Job) next() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := j.seq
	j.seq++
	return n
}

func (j *Job) fail(err error) error {
	j.mu.Lock()
	if j.err == nil {
		j.err = err
	}
	j.mu.Unlock()
	return fmt.Errorf("%w: external judge: %w", judge.ErrUnavailable, err)
}

func (j *Job) park() {
	j.mu.Lock()
	j.parked = true
	j.mu.Unlock()
}

// Provider is the external judge as a judge.Provider: every call is answered from the
// exchange, or published there and parked.
type Provider struct{ x *Exchange }

// Provider is the external judge over x.
func (x *Exchange) Provider() *Provider { return &Provider{x: x} }

var _ judge.Provider = (*Provider)(nil)

// Name implements judge.Provider.
func (*Provider) Name() string { return Name }

// DefaultModel implements judge.Provider.
func (*Provider) DefaultModel() string { return Name }

// Complete implements judge.Provider. A call outside a Begin'd job is refused: the
// exchange keys every call by its job.
func (p *Provider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	start := time.Now()
	j, _ := ctx.Value(jobKey{}).(*Job)
	if j == nil {
		return judge.Response{}, fmt.Errorf("%w: the external judge answers the calls of a judged job only", judge.ErrUnavailable)
	}
	if isRepair(req) {
		return judge.Response{}, fmt.Errorf("external judge: %w", judge.ErrAnswerFinal)
	}
	ev := j.ev
	id := CallID{Tenant: ev.Tenant, Batch: ev.BatchID, Job: ev.JobID, Iteration: ev.Iteration, Attempt: ev.Attempt, Seq: j.next()}
	digest := RequestDigest(req)
	c, err := p.x.update(ctx, id, func(c *Call) (*Call, error) {
		if c != nil && c.Prompt != nil && c.Prompt.Digest != digest {
			return nil, refusal{fmt.Errorf("%s was published as another prompt (tribunal or its inputs changed since): its answer does not answer this one", id)}
		}
		if c != nil && (c.Answer != nil || c.Prompt != nil) {
			return nil, nil
		}
		pr, err := p.publish(ctx, j, id, req, digest)
		if err != nil {
			return nil, err
		}
		n := Call{Prompt: pr}
		if c != nil {
			n = *c
			n.Prompt = pr
		}
		return &n, nil
	})
	switch {
	case err != nil && ctx.Err() != nil:
		return judge.Response{}, ctx.Err()
	case isRefusal(err):
		// Not the exchange failing: this call cannot be answered, and the job is
		// blocked with the reason.
		return judge.Response{}, fmt.Errorf("%w: %w", judge.ErrUnavailable, err)
	case err != nil:
		return judge.Response{}, j.fail(err)
	}
	if c.Answer == nil {
		j.park()
		return judge.Response{}, fmt.Errorf("%w: %w: %s", judge.ErrUnavailable, ErrParked, id)
	}
	if c.Answer.Missing != "" {
		return judge.Response{}, fmt.Errorf("%w: no answer: %s", judge.ErrUnavailable, c.Answer.Missing)
	}
	model := req.Model
	// Nothing is sampled: the answer is whatever was given. It is reported under the
	// request's parameters, as recorded answers are, with who gave it as the model the
	// "server" reported.
	sampling := events.Sampling{Temperature: req.Params.Temperature, Seed: req.Params.Seed, MaxTokens: req.Params.MaxTokens,
		ResponseFormat: events.FormatNone, ReportedModel: c.Answer.By}
	return judge.Response{Content: c.Answer.Content, Model: model, Latency: time.Since(start), Attempts: 1, Sampling: sampling}, nil
}

// refusal is a prompt the exchange will not answer: published as another one.
type refusal struct{ error }

func isRefusal(err error) bool {
	var r refusal
	return errors.As(err, &r)
}

// publish stores what a prompt is made of: the request, its attachments and (once per
// job) the gated event.
func (p *Provider) publish(ctx context.Context, j *Job, id CallID, req judge.Request, digest string) (*Prompt, error) {
	gated, link, err := p.gated(ctx, j)
	if err != nil {
		return nil, err
	}
	rr := RequestRecord{Kind: req.Kind, Model: req.Model, Messages: judge.RecordMessages(req.Messages)}
	if req.Schema != nil {
		rr.Schema, rr.SchemaJSON = req.Schema.Name, string(req.Schema.JSON)
	}
	for _, m := range req.Messages {
		for _, part := range m.Parts {
			if part.Image == nil {
				continue
			}
			// The images a message names by digest, readable by whoever answers.
			if _, err := p.x.put(ctx, id.Tenant, part.Image.Data, part.Image.MediaType); err != nil {
				return nil, fmt.Errorf("image: %w", err)
			}
		}
	}
	for _, a := range req.Attachments {
		b, err := p.x.put(ctx, id.Tenant, a.Data, a.MediaType)
		if err != nil {
			return nil, fmt.Errorf("attachment %s: %w", a.Name, err)
		}
		rr.Attachments = append(rr.Attachments, Attachment{Name: a.Name, Blob: b})
	}
	data, err := json.MarshalIndent(rr, "", "  ")
	if err != nil {
		return nil, err
	}
	reqBlob, err := p.x.put(ctx, id.Tenant, data, "application/json")
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	return &Prompt{Kind: req.Kind, Model: req.Model, Request: reqBlob, Attachments: rr.Attachments, Digest: digest,
		Gated: gated, Link: link, At: time.Now().UTC()}, nil
}

// gated stores the job's gated event once and returns it with its link.
func (p *Provider) gated(ctx context.Context, j *Job) (events.Blob, string, error) {
	j.mu.Lock()
	stored := j.gated
	j.mu.Unlock()
	data, err := events.Encode(j.ev)
	if err != nil {
		return events.Blob{}, "", fmt.Errorf("gated event: %w", err)
	}
	digest := j.digest
	if digest == "" {
		sum := sha256.Sum256(data)
		digest = hex.EncodeToString(sum[:])
	}
	link := events.Link(j.ev.ID, digest)
	if stored != nil {
		return *stored, link, nil
	}
	b, err := p.x.put(ctx, j.ev.Tenant, data, EventMediaType)
	if err != nil {
		return events.Blob{}, "", fmt.Errorf("gated event: %w", err)
	}
	j.mu.Lock()
	j.gated = &b
	j.mu.Unlock()
	return b, link, nil
}
