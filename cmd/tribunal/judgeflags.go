package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/batchmode"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/ratelimit"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// judgeFlags configure the judge provider, from flags or TRIBUNAL_* environment variables.
type judgeFlags struct {
	provider        string
	model           string
	scriptedAnswers string
	scriptedLatency time.Duration
	// fixtures are the kinds' canned answers (kind.Fixtured), each set by its flag,
	// in the registry's order.
	fixtures       []fixtureFlag
	baseURL        string
	apiKeyEnv      string
	azure          bool
	apiVersion     string
	timeout        time.Duration
	attempts       int
	concurrency    int
	rpm            int
	responseFormat string
	temperature    float64
	seed           int
	maxTokens      int
	sharedRPM      int
	sharedTPM      int
	tenantRPM      int
	tenantTPM      int
	pause429       time.Duration
	// The judge modes (app.JudgeModes).
	judgeMode     string
	allowBatch    bool
	batchRequests int
	batchMB       int
	batchLinger   time.Duration
	batchPoll     time.Duration
	batchPollMax  time.Duration
	batchWaiting  int
	// spend is what the judge may be asked to spend; registered apart (spendFlags.register)
	// by the commands that check it, with their own defaults.
	spend spendFlags
	// prices cost every call; the teams' budgets are registered apart, by serve.
	prices priceFlags
}

// fixtureFlag is one kind's fixture of the scripted judge with its setting.
type fixtureFlag struct {
	kind.Fixture
	setting string
}

// setFixture sets the fixture a flag names, as the flag would (calibrate clears the
// fixed winner so that only the set's recorded answers are used).
func (j *judgeFlags) setFixture(flag, setting string) {
	for i := range j.fixtures {
		if j.fixtures[i].Flag == flag {
			j.fixtures[i].setting = setting
		}
	}
}

func (j *judgeFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&j.provider, "judge", "scripted", "judge provider: scripted (recorded answers, offline) or openai (any OpenAI-compatible API)")
	fs.StringVar(&j.model, "judge-model", "", "model to ask (openai: required)")
	fs.StringVar(&j.scriptedAnswers, "scripted-answers", "", "scripted: JSON file of recorded answers keyed by AC id")
	fs.DurationVar(&j.scriptedLatency, "scripted-latency", 0, "scripted: simulated response time")
	j.fixtures = nil
	for _, k := range registry.All() {
		fk, ok := k.(kind.Fixtured)
		if !ok {
			continue
		}
		for _, f := range fk.Fixtures() {
			j.fixtures = append(j.fixtures, fixtureFlag{Fixture: f, setting: f.Default})
		}
	}
	for i, f := range j.fixtures { // after the slice is whole: each flag holds its element
		if f.Flag != "" {
			fs.StringVar(&j.fixtures[i].setting, f.Flag, f.Default, f.Usage)
		}
	}
	fs.StringVar(&j.baseURL, "openai-base-url", openai.DefaultBaseURL, "openai: API base URL (Ollama: http://localhost:11434/v1, vLLM: http://host:8000/v1)")
	fs.StringVar(&j.apiKeyEnv, "openai-api-key-env", "OPENAI_API_KEY", "openai: name of the environment variable holding the API key (keys never go on the command line)")
	fs.BoolVar(&j.azure, "openai-azure", false, "openai: the base URL is an Azure OpenAI resource; --judge-model names the deployment")
	fs.StringVar(&j.apiVersion, "openai-api-version", "", "openai: Azure API version")
	fs.DurationVar(&j.timeout, "judge-timeout", 120*time.Second, "openai: timeout of one attempt")
	fs.IntVar(&j.attempts, "judge-attempts", 4, "openai: attempts per call (timeouts, 429 and 5xx are retried with backoff)")
	fs.IntVar(&j.concurrency, "judge-concurrency", 8, "openai: calls in flight per judge instance")
	fs.IntVar(&j.rpm, "judge-rpm", 0, "openai: requests per minute per judge instance (0: unlimited)")
	fs.StringVar(&j.responseFormat, "judge-response-format", "auto", "openai: auto (JSON schema, falling back to JSON mode), json_schema, json_object or none")
	fs.Float64Var(&j.temperature, "judge-temperature", 0, "sampling temperature (-1: none pinned, the server's default; such verdicts are marked unpinned)")
	fs.IntVar(&j.seed, "judge-seed", 0, "sampling seed where the server supports it (0: none)")
	fs.IntVar(&j.maxTokens, "judge-max-tokens", 0, "answer token limit (0: openai's default of 4096, 16384 for reasoning models; -1: none, the server's own)")
	fs.IntVar(&j.sharedRPM, "judge-shared-rpm", 0, "requests per minute per provider and model, shared by every judge instance through JetStream KV (0: unlimited)")
	fs.IntVar(&j.sharedTPM, "judge-shared-tpm", 0, "tokens per minute per provider and model, shared by every judge instance (0: unlimited)")
	fs.IntVar(&j.tenantRPM, "tenant-rpm", 0, "judge requests per minute per tenant, shared by every judge instance (0: unlimited)")
	fs.IntVar(&j.tenantTPM, "tenant-tpm", 0, "tokens per minute per tenant (prompt plus completion, any model), shared by every judge instance (0: unlimited)")
	fs.DurationVar(&j.pause429, "judge-429-pause", 0, "how long every judge instance pauses a provider after a 429 (default 10s)")
	fs.StringVar(&j.judgeMode, "judge-mode", "direct", "judge: how calls reach the provider when a batch names no judge_mode: direct (one chat completion per call) or batch (the provider's batch API: about half the price, answers within 24h; needs --judge openai)")
	fs.BoolVar(&j.allowBatch, "judge-allow-batch", true, "judge: let a batch ask for judge_mode: batch (with --judge openai); false judges such batches directly")
	fs.IntVar(&j.batchRequests, "judge-batch-max-requests", batchmode.DefaultMaxRequests, fmt.Sprintf("judge, batch mode: calls per provider batch file (at most %d, and at most --judge-batch-waiting)", batchmode.MaxRequestsLimit))
	fs.IntVar(&j.batchMB, "judge-batch-max-mb", batchmode.DefaultMaxBytes>>20, "judge, batch mode: megabytes per provider batch file (at most 200, OpenAI's limit)")
	fs.DurationVar(&j.batchLinger, "judge-batch-linger", batchmode.DefaultLinger, "judge, batch mode: longest a call waits for its batch file to fill before the file is submitted")
	fs.DurationVar(&j.batchPoll, "judge-batch-poll", batchmode.DefaultPollMin, "judge, batch mode: first wait between two looks at a provider batch (doubling)")
	fs.DurationVar(&j.batchPollMax, "judge-batch-poll-max", batchmode.DefaultPollMax, "judge, batch mode: longest wait between two looks at a provider batch")
	fs.IntVar(&j.batchWaiting, "judge-batch-waiting", app.DefaultBatchWaiting, "judge, batch mode: messages this instance holds while their calls wait in provider batches (keep the sum over instances under the consumer's max ack pending, 4096)")
	j.prices.register(fs)
}

// planPolicy is the judge-mode policy the flags ask for, unchecked: what an estimate
// prices a batch's calls by (modes checks it before a run).
func (j *judgeFlags) planPolicy() batchmode.Policy {
	return batchmode.Policy{Default: j.judgeMode, AllowBatch: j.allowBatch}
}

// modes are the judge modes the flags ask for, checked.
func (j *judgeFlags) modes() (*app.JudgeModes, error) {
	switch j.judgeMode {
	case events.JudgeModeDirect, events.JudgeModeBatch:
	default:
		return nil, fmt.Errorf("--judge-mode %q: want direct or batch", j.judgeMode)
	}
	if j.judgeMode == events.JudgeModeBatch && j.provider != "openai" {
		return nil, fmt.Errorf("--judge-mode batch needs --judge openai: the %s judge has no batch API", j.provider)
	}
	if j.batchWaiting <= 0 {
		return nil, fmt.Errorf("--judge-batch-waiting %d: want at least 1", j.batchWaiting)
	}
	cfg := batchmode.Config{MaxRequests: j.batchRequests, MaxBytes: j.batchMB << 20, Linger: j.batchLinger, PollMin: j.batchPoll, PollMax: j.batchPollMax}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("--judge-batch-*: %w", err)
	}
	return &app.JudgeModes{Policy: batchmode.Policy{Default: j.judgeMode, AllowBatch: j.allowBatch}, Batch: cfg, Waiting: j.batchWaiting}, nil
}

// rateLimits are the limits shared by every judge instance, nil when none is set.
func (j *judgeFlags) rateLimits() *ratelimit.Limits {
	if j.sharedRPM <= 0 && j.sharedTPM <= 0 && j.tenantRPM <= 0 && j.tenantTPM <= 0 {
		return nil
	}
	return &ratelimit.Limits{RequestsPerMinute: j.sharedRPM, TokensPerMinute: j.sharedTPM, TenantRequestsPerMinute: j.tenantRPM,
		TenantTokensPerMinute: j.tenantTPM, Pause: j.pause429}
}

func (j *judgeFlags) build(instance string) (judge.Provider, judge.Params, error) {
	// A limit set here is a sampling parameter, recorded with every verdict; the default
	// (and -1, no limit) is the provider's.
	params := judge.Params{MaxTokens: max(j.maxTokens, 0)}
	if j.temperature >= 0 {
		// A negative temperature pins none: the server's default applies, and every
		// verdict is marked as sampled without a pinned temperature.
		t := float32(j.temperature)
		params.Temperature = &t
	}
	if j.seed != 0 {
		s := j.seed
		params.Seed = &s
	}
	switch j.provider {
	case "scripted":
		o := scripted.Options{AnswersFile: j.scriptedAnswers, Latency: j.scriptedLatency, Fixtures: map[string]string{}}
		for _, f := range j.fixtures {
			o.Fixtures[f.Request] = f.setting
			if f.Names {
				o.Named = f.Request
			}
		}
		p, err := scripted.New(o)
		if err != nil {
			// Name the flag whose setting the kind refused.
			for _, f := range j.fixtures {
				if f.Flag != "" && f.setting != "" {
					if _, _, ferr := judge.CannedAnswer(f.Request, f.setting); ferr != nil {
						return nil, params, fmt.Errorf("--%s: %w", f.Flag, ferr)
					}
				}
			}
		}
		return p, params, err
	case "openai":
		if j.model == "" {
			return nil, params, fmt.Errorf("--judge openai needs --judge-model (or TRIBUNAL_JUDGE_MODEL)")
		}
		p, err := openai.New(openai.Config{
			BaseURL: j.baseURL, APIKey: os.Getenv(j.apiKeyEnv), Model: j.model, Azure: j.azure, APIVersion: j.apiVersion,
			Timeout: j.timeout, MaxAttempts: j.attempts, Concurrency: j.concurrency, RequestsPerMinute: j.rpm,
			ResponseFormat: j.responseFormat, Instance: instance, MaxTokens: min(j.maxTokens, 0),
		})
		return p, params, err
	}
	return nil, params, fmt.Errorf("--judge %q: want scripted or openai", j.provider)
}

// prober is a provider that can check, before any work, that it can work at all (the
// openai provider: a key, a reachable server that accepts it).
type prober interface {
	Probe(ctx context.Context) error
}

// probeTimeout bounds one probe of the provider.
const probeTimeout = 15 * time.Second

// probe checks once that p can work; nil for providers that need no check (scripted).
// The error says what to fix.
func (j *judgeFlags) probe(ctx context.Context, p judge.Provider) error {
	pr, ok := p.(prober)
	if !ok {
		return nil
	}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	err := pr.Probe(pctx)
	if err == nil {
		return nil
	}
	hint := "check --openai-base-url"
	var pe *openai.ProbeError
	if errors.As(err, &pe) && (pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden || (pe.Status == 0 && !pe.Retryable)) {
		hint = fmt.Sprintf("the key is read from $%s; --openai-api-key-env names another variable", j.apiKeyEnv)
	}
	return fmt.Errorf("--judge %s cannot work: %w (%s)", j.provider, err, hint)
}

// retryable reports whether a later probe may pass without a configuration change.
func retryable(err error) bool {
	var pe *openai.ProbeError
	return errors.As(err, &pe) && pe.Retryable
}

// check probes p before a one-off command's work, trying a server that is briefly
// unavailable attempts times, a second apart.
func (j *judgeFlags) check(ctx context.Context, p judge.Provider, attempts int) error {
	for i := 1; ; i++ {
		err := j.probe(ctx, p)
		if err == nil || !retryable(err) || i >= attempts {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// maxProbeWait caps the wait between probes of a service's provider.
const maxProbeWait = 30 * time.Second

// providerGate holds a service's work back until its provider passes the probe, probing
// again with backoff (a key fixed in the secret store, a server that comes up later);
// until then its reason is why the process is not ready.
type providerGate struct {
	done chan struct{}
	mu   sync.Mutex
	err  error
}

// startProviderGate starts probing p, unless it needs no probe.
func startProviderGate(ctx context.Context, j *judgeFlags, p judge.Provider) *providerGate {
	g := &providerGate{done: make(chan struct{})}
	if _, ok := p.(prober); !ok {
		close(g.done)
		return g
	}
	g.err = errors.New("probing the judge provider")
	go func() {
		wait := time.Second
		for {
			err := j.probe(ctx, p)
			g.mu.Lock()
			g.err = err
			g.mu.Unlock()
			if err == nil {
				close(g.done)
				return
			}
			slog.Error("judge provider cannot work; not ready, probing again", "err", err, "in", wait)
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			wait = min(2*wait, maxProbeWait)
		}
	}()
	return g
}

// Err is why the provider cannot work yet, nil once it passed the probe.
func (g *providerGate) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Wait returns once the provider passed the probe, or ctx's error.
func (g *providerGate) Wait(ctx context.Context) error {
	select {
	case <-g.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
