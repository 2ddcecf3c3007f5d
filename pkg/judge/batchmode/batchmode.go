// Package batchmode is the judge mode that asks a provider through its batch API
// (OpenAI's /v1/batches and the servers that copy it): the same requests, at about half
// the price and from a rate-limit pool of their own, answered within the batch's
// completion window instead of seconds.
//
// It is a judge.Provider, so a kind's Judge stage, the answer checking, the repair
// re-ask, the cache and the events are the ones a direct call goes through: Complete
// parks the call until the provider batch holding it has ended. Calls are gathered into
// a JSONL file (one line per call, the exact chat-completions body the direct provider
// would send, named by CustomID; one file per model, as the provider requires), flushed
// when it reaches MaxRequests or MaxBytes or its oldest call has waited Linger,
// uploaded, and made a provider batch, which is polled with backoff until it ends.
//
// Durable: the state of each provider batch (its group record: the provider's batch id,
// the input file, the custom_ids in it, its status) and, per call, the group that holds
// it (a claim, created with compare-and-set) live in a JetStream key-value bucket, written
// before the provider batch is created. A judge that restarts, or another instance that
// gets the redelivered message, finds the claim and waits for that batch instead of
// submitting the call again: a call is in at most one provider batch, ever. The message
// of a parked call stays unacknowledged while it waits (the subscriber sends InProgress
// every third of AckWait), so it is redelivered only when the judge holding it is gone.
//
// Bounded: a provider batch that ends expired, cancelled or failed, and a request its
// error file names, give the call an error wrapping judge.ErrUnavailable that names the
// provider batch and the error, so the AC is blocked with that reason, never left waiting.
package batchmode

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// Bucket is the key-value bucket that holds the provider batches' state.
const Bucket = "tribunal_provider_batches"

// BucketTTL is how long a provider batch's state is kept: the 24-hour completion window,
// the time its messages may wait for a redelivery, and a margin.
const BucketTTL = 7 * 24 * time.Hour

// Provider limits and defaults.
const (
	// MaxRequestsLimit is the most calls one provider batch holds: OpenAI takes 50,000,
	// but a group record lists its custom_ids in one key-value entry, which must fit in a
	// NATS message (1 MiB by default).
	MaxRequestsLimit = 20000
	// MaxBytesLimit is OpenAI's 200 MB cap on a batch input file.
	MaxBytesLimit = 200 << 20
	// DefaultMaxRequests, DefaultMaxBytes and DefaultLinger flush a file well inside the
	// provider's limits, or once its first call has waited half a minute.
	DefaultMaxRequests = 10000
	DefaultMaxBytes    = 100 << 20
	DefaultLinger      = 30 * time.Second
	// DefaultPollMin and DefaultPollMax bound the wait between two looks at a provider
	// batch: its status changes in minutes, and a tighter loop only spends requests.
	DefaultPollMin = 5 * time.Second
	DefaultPollMax = time.Minute
	// DefaultMaxWait is how long a provider batch may take before tribunal cancels it and
	// ends its calls: the 24-hour window and two hours for the provider to report the
	// expiry it promises. A provider that never ends a batch cannot park a call forever.
	DefaultMaxWait = 26 * time.Hour
	// DefaultSubmitStale is how long a group another judge left mid-submission waits
	// before this one looks for its provider batch, and fails it when there is none. The
	// submission itself takes seconds.
	DefaultSubmitStale = 10 * time.Minute
	// Window is the completion window asked for; OpenAI offers only 24h.
	Window = "24h"
	// MetadataKey is the provider batch's metadata key holding its group's id, by which
	// a submission interrupted before its record was updated is found again.
	MetadataKey = "tribunal_group"
)

// Provider batch statuses (OpenAI's).
const (
	StatusValidating = "validating"
	StatusInProgress = "in_progress"
	StatusFinalizing = "finalizing"
	StatusCompleted  = "completed"
	StatusExpired    = "expired"
	StatusCancelling = "cancelling"
	StatusCancelled  = "cancelled"
	StatusFailed     = "failed"
)

// Terminal reports whether a provider batch in status s has ended.
func Terminal(s string) bool {
	switch s {
	case StatusCompleted, StatusExpired, StatusCancelled, StatusFailed:
		return true
	}
	return false
}

// Remote is a provider batch as the provider reports it.
type Remote struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	InputFileID  string `json:"input_file_id,omitempty"`
	OutputFileID string `json:"output_file_id,omitempty"`
	ErrorFileID  string `json:"error_file_id,omitempty"`
	// Errors is the batch's own errors (a file that failed validation), joined.
	Errors    string `json:"errors,omitempty"`
	Total     int    `json:"total,omitempty"`
	Completed int    `json:"completed,omitempty"`
	Failed    int    `json:"failed,omitempty"`
}

// Backend is a provider's batch API (pkg/judge/openai.BatchAPI implements it).
type Backend interface {
	// Line is the JSONL line asking req under customID: the body a direct call of the
	// provider would send.
	Line(customID string, req judge.Request) ([]byte, error)
	// Decode is the answer in the chat completion body of a result line, as a direct
	// call would have returned it.
	Decode(body json.RawMessage, req judge.Request) (judge.Response, error)
	// Upload stores a batch input file (purpose "batch") and returns its id.
	Upload(ctx context.Context, name string, jsonl []byte) (string, error)
	// Create makes a provider batch of the file, for the chat completions endpoint over
	// Window, with metadata.
	Create(ctx context.Context, fileID string, metadata map[string]string) (Remote, error)
	// Retrieve reads a provider batch's status.
	Retrieve(ctx context.Context, id string) (Remote, error)
	// Content reads a file (an output or error file).
	Content(ctx context.Context, fileID string) ([]byte, error)
	// Find looks for a provider batch whose metadata has key set to value.
	Find(ctx context.Context, key, value string) (Remote, bool, error)
	// Cancel asks the provider to cancel a batch.
	Cancel(ctx context.Context, id string) error
}

// Config tunes the gathering and polling. Zero fields take the defaults.
type Config struct {
	// MaxRequests and MaxBytes flush a batch file at that many calls or bytes.
	MaxRequests int
	MaxBytes    int
	// Linger flushes a file once its oldest call has waited this long.
	Linger time.Duration
	// PollMin and PollMax bound the backoff between two looks at a provider batch.
	PollMin, PollMax time.Duration
	// SubmitStale: see DefaultSubmitStale.
	SubmitStale time.Duration
	// MaxWait: see DefaultMaxWait.
	MaxWait time.Duration
	// Attempts bounds the tries of an upload, a create and a file download (transient
	// failures: a 5xx, a network error); 0 means 4.
	Attempts int
	Logger   *slog.Logger
}

// Validate refuses limits past the provider's or negative ones.
func (c Config) Validate() error {
	switch {
	case c.MaxRequests < 0 || c.MaxRequests > MaxRequestsLimit:
		return fmt.Errorf("batch mode: max requests %d: want 1..%d", c.MaxRequests, MaxRequestsLimit)
	case c.MaxBytes < 0 || c.MaxBytes > MaxBytesLimit:
		return fmt.Errorf("batch mode: max bytes %d: want 1..%d (the provider's 200 MB)", c.MaxBytes, MaxBytesLimit)
	case c.Linger < 0 || c.PollMin < 0 || c.PollMax < 0 || c.SubmitStale < 0 || c.MaxWait < 0 || c.Attempts < 0:
		return errors.New("batch mode: linger, poll intervals, submit staleness, max wait and attempts must not be negative")
	}
	return nil
}

// HoldFor is how long a budget reservation of a call parked here must last if its judge
// never settles it (pkg/budget): past the longest the call can wait (its file's linger,
// another judge's stale submission, the provider batch's MaxWait and a last poll), with
// an hour for the uploads, downloads and retries around them.
func (c Config) HoldFor() time.Duration {
	c = c.withDefaults()
	return c.Linger + c.SubmitStale + c.MaxWait + c.PollMax + time.Hour
}

func (c Config) withDefaults() Config {
	if c.MaxRequests == 0 {
		c.MaxRequests = DefaultMaxRequests
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Linger == 0 {
		c.Linger = DefaultLinger
	}
	if c.PollMin == 0 {
		c.PollMin = DefaultPollMin
	}
	if c.PollMax == 0 {
		c.PollMax = DefaultPollMax
	}
	c.PollMax = max(c.PollMax, c.PollMin)
	if c.SubmitStale == 0 {
		c.SubmitStale = DefaultSubmitStale
	}
	if c.Attempts == 0 {
		c.Attempts = 4
	}
	if c.MaxWait == 0 {
		c.MaxWait = DefaultMaxWait
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Group states.
const (
	// StateSubmitting: the record and the claims are written, the provider batch may not
	// exist yet.
	StateSubmitting = "submitting"
	// StateSubmitted: the provider batch exists and is polled.
	StateSubmitted = "submitted"
	// StateEnded: the provider batch ended (any terminal status); its files hold the
	// results.
	StateEnded = "ended"
	// StateFailed: no provider batch holds the calls (the upload or the create failed);
	// Error says why.
	StateFailed = "failed"
)

// Group is the durable record of one provider batch, under "g.<id>" in Bucket.
type Group struct {
	ID    string `json:"id"`
	State string `json:"state"`
	// Instance is the process that submits it (a fresh id per process).
	Instance string `json:"instance"`
	Remote   Remote `json:"remote"`
	Error    string `json:"error,omitempty"`
	// CustomIDs are the calls in the batch file.
	CustomIDs []string  `json:"custom_ids"`
	Created   time.Time `json:"created"`
	Updated   time.Time `json:"updated"`
}

func groupKey(id string) string  { return "g." + id }
func claimKey(cid string) string { return "r." + cid }

// Provider is a judge.Provider whose calls go through a provider's batch API. Close it
// to stop its pollers; calls parked in it then end with their context.
type Provider struct {
	base   judge.Provider
	api    Backend
	kv     kv.KV
	cfg    Config
	holder string

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// files are the batch files being gathered, one per model: a provider batch's
	// requests must all name the same model (OpenAI refuses a file that mixes them).
	files map[string]*file
	// waiters are the calls parked here by custom_id; reqs the request of each, for
	// decoding its answer; claims the group each is in, once known.
	waiters map[string][]chan outcome
	reqs    map[string]judge.Request
	claims  map[string]string
	// polling are the groups a poller of this process watches.
	polling map[string]bool
	stats   Stats
}

// Stats counts what a Provider did, for tests and logs.
type Stats struct {
	// Submitted counts the provider batches this process created, and Requests the
	// calls in them.
	Submitted, Requests int
	// Joined counts calls found already in a provider batch (a redelivery, another
	// instance's submission) and not submitted again.
	Joined int
}

type item struct {
	cid  string
	line []byte
}

type outcome struct {
	resp judge.Response
	err  error
}

// New builds a batch-mode provider over base's batch API, keeping its state in store
// (Bucket). base names the provider and its default model in verdicts.
func New(base judge.Provider, api Backend, store kv.KV, cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if base == nil || api == nil || store == nil {
		return nil, errors.New("batch mode: needs a provider, its batch API and a state bucket")
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Provider{base: base, api: api, kv: store, cfg: cfg.withDefaults(), holder: nuid.Next(), ctx: ctx, cancel: cancel,
		files: map[string]*file{}, waiters: map[string][]chan outcome{}, reqs: map[string]judge.Request{}, claims: map[string]string{}, polling: map[string]bool{}}, nil
}

// Name is the provider's: a verdict records the provider and model, and the call record
// says it went through a batch.
func (p *Provider) Name() string { return p.base.Name() }

// DefaultModel is the provider's.
func (p *Provider) DefaultModel() string { return p.base.DefaultModel() }

// Unwrap is the direct provider, for the optional interfaces it implements (its server
// address on the calls' spans).
func (p *Provider) Unwrap() judge.Provider { return p.base }

// BatchMode marks the provider's calls as made through a batch API (their metrics'
// mode label).
func (p *Provider) BatchMode() bool { return true }

// Stats is what the provider did so far.
func (p *Provider) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stats
}

// Close stops gathering and polling. Calls still parked end with their own context (the
// judge service's shutdown hands their messages back, and the next judge resumes them
// from the bucket).
func (p *Provider) Close() {
	p.cancel()
	p.mu.Lock()
	for _, f := range p.files {
		if f.timer != nil {
			f.timer.Stop()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// Complete parks the call until the provider batch holding it has ended, submitting it
// in the next batch file unless a provider batch holds it already. ctx must carry the
// call's scope (judge.WithScope).
func (p *Provider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	scope := judge.ScopeOf(ctx)
	if scope == "" {
		return judge.Response{}, errors.New("batch mode: the call has no scope (judge.WithScope): it could not be named, so it is not submitted")
	}
	if req.Model == "" {
		req.Model = p.base.DefaultModel()
	}
	start := time.Now()
	cid := CustomID(scope, req)
	ch := make(chan outcome, 1)
	p.mu.Lock()
	first := len(p.waiters[cid]) == 0
	p.waiters[cid] = append(p.waiters[cid], ch)
	if first {
		p.reqs[cid] = req
	}
	p.mu.Unlock()
	defer p.unwait(cid, ch)
	if first {
		p.route(ctx, cid, req)
	}
	select {
	case o := <-ch:
		o.resp.Latency = time.Since(start)
		return o.resp, o.err
	case <-ctx.Done():
		return judge.Response{}, fmt.Errorf("batch mode: call %s stopped while waiting for its provider batch: %w", cid, ctx.Err())
	}
}

// unwait removes a parked call that has its answer or gave up.
func (p *Provider) unwait(cid string, ch chan outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ws := p.waiters[cid]
	for i, w := range ws {
		if w == ch {
			ws = append(ws[:i], ws[i+1:]...)
			break
		}
	}
	if len(ws) == 0 {
		delete(p.waiters, cid)
		delete(p.reqs, cid)
		delete(p.claims, cid)
		return
	}
	p.waiters[cid] = ws
}

// deliver hands o to every call parked under cid.
func (p *Provider) deliver(cid string, o outcome) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.waiters[cid] {
		select {
		case w <- o:
		default:
		}
	}
}

// fail ends the calls parked under cid with an error wrapping judge.ErrUnavailable.
func (p *Provider) fail(cid, format string, args ...any) {
	p.deliver(cid, outcome{err: fmt.Errorf("%w: %s", judge.ErrUnavailable, fmt.Sprintf(format, args...))})
}

// route sends a call to the provider batch that holds it, or into the next batch file.
func (p *Provider) route(ctx context.Context, cid string, req judge.Request) {
	e, err := p.kv.Get(ctx, claimKey(cid))
	switch {
	case err == nil:
		p.join(cid, string(e.Value()))
		return
	case !errors.Is(err, jetstream.ErrKeyNotFound):
		p.fail(cid, "batch mode: the state of call %s is unreadable: %v", cid, err)
		return
	}
	line, err := p.api.Line(cid, req)
	if err != nil {
		p.deliver(cid, outcome{err: fmt.Errorf("batch mode: call %s: %w", cid, err)})
		return
	}
	if len(line)+1 > p.cfg.MaxBytes {
		p.fail(cid, "batch mode: call %s is %d bytes, over the batch file limit of %d", cid, len(line), p.cfg.MaxBytes)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.files[req.Model]
	if f == nil {
		f = &file{}
		p.files[req.Model] = f
	}
	if f.bytes+len(line)+1 > p.cfg.MaxBytes {
		p.flushLocked(f)
	}
	f.items = append(f.items, item{cid: cid, line: line})
	f.bytes += len(line) + 1
	if len(f.items) >= p.cfg.MaxRequests {
		p.flushLocked(f)
		return
	}
	if f.timer == nil {
		f.timer = time.AfterFunc(p.cfg.Linger, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			f.timer = nil
			p.flushLocked(f)
		})
	}
}

// file is a batch file being gathered for one model.
type file struct {
	items []item
	bytes int
	timer *time.Timer
}

// join makes a call wait for the group that already holds it.
func (p *Provider) join(cid, group string) {
	p.mu.Lock()
	p.claims[cid] = group
	p.stats.Joined++
	p.mu.Unlock()
	p.cfg.Logger.Debug("batch mode: call already in a provider batch, waiting for it", "call", cid, "group", group)
	p.poll(group)
}

// flushLocked submits f's calls as one provider batch, in the background.
func (p *Provider) flushLocked(f *file) {
	if f.timer != nil {
		f.timer.Stop()
		f.timer = nil
	}
	if len(f.items) == 0 || p.ctx.Err() != nil {
		return
	}
	items := f.items
	f.items, f.bytes = nil, 0
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.submit(items)
	}()
}

// submit writes the group record and the calls' claims, uploads the file and creates
// the provider batch, in that order: whatever point a crash stops it at, the state says
// where each call is, and no call gets into a second provider batch.
func (p *Provider) submit(items []item) {
	ctx := p.ctx
	now := time.Now().UTC()
	g := Group{ID: nuid.Next(), State: StateSubmitting, Instance: p.holder, Created: now, Updated: now}
	for _, it := range items {
		g.CustomIDs = append(g.CustomIDs, it.cid)
	}
	rev, err := p.put(ctx, g, 0)
	if err != nil {
		for _, it := range items {
			p.fail(it.cid, "batch mode: could not record provider batch %s: %v", g.ID, err)
		}
		return
	}
	var mine []item
	for _, it := range items {
		_, err := p.kv.Create(ctx, claimKey(it.cid), []byte(g.ID))
		switch {
		case err == nil:
			mine = append(mine, it)
			p.mu.Lock()
			p.claims[it.cid] = g.ID
			p.mu.Unlock()
		case kv.IsConflict(err):
			// Another judge submitted the same call first: wait for its batch.
			if e, gerr := p.kv.Get(ctx, claimKey(it.cid)); gerr == nil {
				p.join(it.cid, string(e.Value()))
			} else {
				p.fail(it.cid, "batch mode: call %s is claimed but its claim is unreadable: %v", it.cid, gerr)
			}
		default:
			p.fail(it.cid, "batch mode: could not claim call %s for provider batch %s: %v", it.cid, g.ID, err)
		}
	}
	g.CustomIDs = g.CustomIDs[:0]
	var file []byte
	for _, it := range mine {
		g.CustomIDs = append(g.CustomIDs, it.cid)
		file = append(append(file, it.line...), '\n')
	}
	if len(mine) == 0 {
		_ = p.kv.Delete(ctx, groupKey(g.ID))
		return
	}
	failAll := func(why error) {
		telemetry.ProviderBatch(p.Name(), "submit_failed")
		g.State, g.Error = StateFailed, why.Error()
		if _, err := p.put(ctx, g, rev); err != nil {
			p.cfg.Logger.Error("batch mode: could not record a failed submission", "group", g.ID, "err", err)
		}
		for _, it := range mine {
			p.fail(it.cid, "provider batch submission %s failed: %v", g.ID, why)
		}
	}
	var fileID string
	err = p.retry(ctx, "upload", func(ctx context.Context) error {
		var err error
		fileID, err = p.api.Upload(ctx, "tribunal-"+g.ID+".jsonl", file)
		return err
	})
	if err != nil {
		failAll(fmt.Errorf("upload of %d requests (%d bytes): %w", len(mine), len(file), err))
		return
	}
	g.Remote.InputFileID = fileID
	if rev, err = p.put(ctx, g, rev); err != nil {
		failAll(fmt.Errorf("record the input file %s: %w", fileID, err))
		return
	}
	var r Remote
	err = p.retry(ctx, "create", func(ctx context.Context) error {
		var err error
		r, err = p.api.Create(ctx, fileID, map[string]string{MetadataKey: g.ID})
		return err
	})
	if err != nil {
		failAll(fmt.Errorf("create the batch of file %s: %w", fileID, err))
		return
	}
	g.State, g.Remote = StateSubmitted, r
	if _, err := p.put(ctx, g, rev); err != nil {
		// Another judge gave the submission up as interrupted (or the bucket is down):
		// the provider batch was not recorded, so it must not run unseen.
		p.cfg.Logger.Error("batch mode: provider batch created but not recorded; cancelling it", "group", g.ID, "batch", r.ID, "err", err)
		_ = p.api.Cancel(ctx, r.ID)
		return
	}
	telemetry.ProviderBatch(p.Name(), "created")
	p.mu.Lock()
	p.stats.Submitted++
	p.stats.Requests += len(mine)
	p.mu.Unlock()
	p.cfg.Logger.Info("batch mode: provider batch created", "group", g.ID, "batch", r.ID, "requests", len(mine), "bytes", len(file))
	p.poll(g.ID)
}

// put writes g at revision rev (0: create) and returns its new revision.
func (p *Provider) put(ctx context.Context, g Group, rev uint64) (uint64, error) {
	g.Updated = time.Now().UTC()
	data, err := json.Marshal(g)
	if err != nil {
		return 0, err
	}
	if rev == 0 {
		return p.kv.Create(ctx, groupKey(g.ID), data)
	}
	return p.kv.Update(ctx, groupKey(g.ID), data, rev)
}

// retry runs fn up to Attempts times with a doubling wait between tries.
func (p *Provider) retry(ctx context.Context, what string, fn func(context.Context) error) error {
	wait := time.Second
	var err error
	for i := 1; ; i++ {
		if err = fn(ctx); err == nil || i >= p.cfg.Attempts || ctx.Err() != nil {
			return err
		}
		p.cfg.Logger.Warn("batch mode: retrying", "what", what, "attempt", i, "err", err, "wait", wait)
		if ctxtime.Sleep(ctx, wait) != nil {
			return err
		}
		wait = min(2*wait, 30*time.Second)
	}
}

// poll watches group until it ends and hands its results to the calls parked here,
// unless a poller of this process watches it already.
func (p *Provider) poll(group string) {
	p.mu.Lock()
	if p.polling[group] || p.ctx.Err() != nil {
		p.mu.Unlock()
		return
	}
	p.polling[group] = true
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		p.watch(group)
	}()
}

// take ends this process's poller of group and returns the calls parked here in it, in
// one step: a call that joins the group afterwards starts a poller of its own, which
// finds the group ended.
func (p *Provider) take(group string) ([]string, []judge.Request) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.polling, group)
	var cids []string
	var reqs []judge.Request
	for cid, grp := range p.claims {
		if grp != group {
			continue
		}
		if len(p.waiters[cid]) == 0 {
			// Its call gave up (a shutdown) after it was submitted: another judge gets
			// the redelivered message and the answer.
			delete(p.claims, cid)
			continue
		}
		cids = append(cids, cid)
		reqs = append(reqs, p.reqs[cid])
	}
	return cids, reqs
}

// watch is the poller of one group.
func (p *Provider) watch(group string) {
	ctx := p.ctx
	wait := p.cfg.PollMin
	sleep := func() bool {
		ok := ctxtime.Sleep(ctx, wait) == nil
		wait = min(2*wait, p.cfg.PollMax)
		return ok
	}
	for {
		e, err := p.kv.Get(ctx, groupKey(group))
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			p.failGroup(group, "provider batch group %s has no record (expired from the state bucket?)", group)
			return
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.cfg.Logger.Warn("batch mode: group record unreadable", "group", group, "err", err)
			if !sleep() {
				return
			}
			continue
		}
		var g Group
		if err := json.Unmarshal(e.Value(), &g); err != nil {
			p.failGroup(group, "provider batch group %s: record unreadable: %v", group, err)
			return
		}
		switch g.State {
		case StateFailed:
			p.failGroup(group, "provider batch submission %s failed: %s", group, g.Error)
			return
		case StateEnded:
			p.finish(g)
			return
		case StateSubmitting:
			if g.Instance != p.holder && time.Since(g.Updated) > p.cfg.SubmitStale {
				p.recover(ctx, g, e.Revision())
				continue
			}
		case StateSubmitted:
			r, err := p.api.Retrieve(ctx, g.Remote.ID)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				p.cfg.Logger.Warn("batch mode: provider batch status unreadable; polling again", "batch", g.Remote.ID, "err", err, "in", wait)
				break
			}
			if Terminal(r.Status) {
				// Counted by the poller that saw the end, which may be any instance's.
				telemetry.ProviderBatch(p.Name(), r.Status)
				g.State, g.Remote = StateEnded, r
				if _, err := p.put(ctx, g, e.Revision()); err != nil && !kv.IsConflict(err) {
					p.cfg.Logger.Warn("batch mode: could not record the end of a provider batch", "batch", r.ID, "err", err)
				}
				p.finish(g)
				return
			}
			if time.Since(g.Created) > p.cfg.MaxWait {
				// The provider promised an end it has not reported: give up on the batch,
				// and tell the provider so, rather than park its calls forever.
				_ = p.api.Cancel(ctx, r.ID)
				why := fmt.Sprintf("provider batch %s still %s after %s: cancelled", r.ID, r.Status, p.cfg.MaxWait)
				g.State, g.Remote, g.Error = StateFailed, r, why
				if _, err := p.put(ctx, g, e.Revision()); err != nil && !kv.IsConflict(err) {
					p.cfg.Logger.Warn("batch mode: could not record a provider batch given up", "batch", r.ID, "err", err)
				}
				telemetry.ProviderBatch(p.Name(), StatusCancelled)
				p.failGroup(group, "%s", why)
				return
			}
			if r.Status != g.Remote.Status {
				g.Remote = r
				if _, err := p.put(ctx, g, e.Revision()); err != nil && !kv.IsConflict(err) {
					p.cfg.Logger.Warn("batch mode: could not record a provider batch's status", "batch", r.ID, "err", err)
				}
			}
		}
		if !sleep() {
			return
		}
	}
}

// recover settles a group another judge left mid-submission. If the provider has a
// batch for it, that batch is adopted. If not and its input file was uploaded, this judge
// takes the submission over (compare-and-set on the record, so one judge does) and
// creates the batch from that file: the same calls under the same custom_ids, still in
// one provider batch. If no file was recorded, nothing holds the requests' bodies, and the
// group fails: its calls end bounded.
func (p *Provider) recover(ctx context.Context, g Group, rev uint64) {
	r, ok, err := p.api.Find(ctx, MetadataKey, g.ID)
	switch {
	case err != nil:
		p.cfg.Logger.Warn("batch mode: could not look for an interrupted submission's batch", "group", g.ID, "err", err)
		return
	case ok:
		g.State, g.Remote.ID, g.Remote.Status = StateSubmitted, r.ID, r.Status
	case g.Remote.InputFileID != "":
		left := g.Instance
		g.Instance = p.holder
		if rev, err = p.put(ctx, g, rev); err != nil {
			return // another judge took it over, or the bucket is down: the poll goes on
		}
		var r Remote
		err = p.retry(ctx, "create", func(ctx context.Context) error {
			var err error
			r, err = p.api.Create(ctx, g.Remote.InputFileID, map[string]string{MetadataKey: g.ID})
			return err
		})
		if err != nil {
			telemetry.ProviderBatch(p.Name(), "submit_failed")
			g.State, g.Error = StateFailed, fmt.Sprintf("the judge submitting it (%s) stopped before creating the provider batch, and creating it from file %s failed: %v", left, g.Remote.InputFileID, err)
			break
		}
		telemetry.ProviderBatch(p.Name(), "created")
		p.cfg.Logger.Info("batch mode: took over an interrupted submission", "group", g.ID, "batch", r.ID, "from", left)
		g.State, g.Remote = StateSubmitted, r
	default:
		g.State, g.Error = StateFailed, fmt.Sprintf("the judge submitting it (%s) stopped before its batch file was uploaded", g.Instance)
	}
	if _, err := p.put(ctx, g, rev); err != nil && !kv.IsConflict(err) {
		p.cfg.Logger.Warn("batch mode: could not record a recovered submission", "group", g.ID, "err", err)
	}
}

// finish reads an ended provider batch's files and answers its calls parked here.
func (p *Provider) finish(g Group) {
	r := g.Remote
	var files [][]byte
	for _, id := range []string{r.OutputFileID, r.ErrorFileID} {
		if id == "" {
			continue
		}
		var data []byte
		err := p.retry(p.ctx, "download", func(ctx context.Context) error {
			var err error
			data, err = p.api.Content(ctx, id)
			return err
		})
		if err != nil {
			p.failGroup(g.ID, "provider batch %s (%s): result file %s unreadable: %v", r.ID, r.Status, id, err)
			return
		}
		files = append(files, data)
	}
	results, err := ParseResults(files...)
	if err != nil {
		p.failGroup(g.ID, "provider batch %s (%s): %v", r.ID, r.Status, err)
		return
	}
	cids, reqs := p.take(g.ID)
	for i, cid := range cids {
		res, ok := results[cid]
		switch {
		case !ok:
			why := "no result for this request"
			if r.Errors != "" {
				why += "; the batch's errors: " + r.Errors
			}
			p.fail(cid, "provider batch %s ended %s: %s", r.ID, r.Status, why)
		case res.Error != "":
			p.fail(cid, "provider batch %s (%s): request %s: %s", r.ID, r.Status, cid, res.Error)
		default:
			resp, err := p.api.Decode(res.Body, reqs[i])
			if err != nil {
				p.fail(cid, "provider batch %s (%s): request %s: %v", r.ID, r.Status, cid, err)
				continue
			}
			resp.Batch, resp.BatchID = true, r.ID
			p.deliver(cid, outcome{resp: resp})
		}
	}
}

// failGroup ends every call parked here in group with the reason.
func (p *Provider) failGroup(group, format string, args ...any) {
	cids, _ := p.take(group)
	msg := fmt.Sprintf(format, args...)
	for _, cid := range cids {
		p.fail(cid, "%s", strings.TrimSpace(msg))
	}
}

// Batching is a provider that offers a batch API (pkg/judge/openai.Provider).
type Batching interface {
	// BatchAPI is the provider's batch endpoints, or why it has none.
	BatchAPI() (Backend, error)
}

// Policy is a deployment's judge modes: the mode of a job whose batch names none, and
// whether a batch may ask for the batch mode.
type Policy struct {
	// Default is events.JudgeModeDirect ("" too) or events.JudgeModeBatch.
	Default string
	// AllowBatch lets a batch ask for judge_mode batch on a deployment whose default is
	// direct. A deployment whose default is batch always allows it.
	AllowBatch bool
}

// Mode is the judge mode of a job whose batch asked for asked ("" for none), on a
// deployment with this policy whose provider can batch or not. refused says the batch
// asked for a mode it does not get, for the log.
func (p Policy) Mode(asked string, canBatch bool) (mode string, refused bool) {
	deflt := p.Default
	if deflt == "" || !canBatch {
		deflt = "direct"
	}
	switch asked {
	case "", deflt:
		return deflt, false
	case "batch":
		if canBatch && p.AllowBatch {
			return "batch", false
		}
		return deflt, true
	default: // direct: always allowed
		return "direct", false
	}
}

// Enabled reports whether a job can be judged in batch mode under the policy.
func (p Policy) Enabled() bool { return p.Default == "batch" || p.AllowBatch }
