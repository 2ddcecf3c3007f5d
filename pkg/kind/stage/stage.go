// Package stage defines a judge kind's stages: what each service runs for a kind and what
// it may reach while it does (blob storage, the provider, the caches, the sensors). A
// kind's rules (pkg/kind) are pure; its stages live beside them, in the kind's folder
// (pkg/kind/<name>/stages), and implement Stages. The helpers here are the stages' shared
// rules: ingesting an artifact, the artifact gates, the judge-call cache.
package stage

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
)

// Stages are what the services run for one judge kind. Plan runs in the client, Render in
// the renderer, Gate in the gater and Judge in the judge service.
type Stages interface {
	// Plan turns one batch entry into the jobs it stands for (one for most kinds; one per
	// view for rubric). An entry with a problem still plans a job whose sources carry the
	// problem, so the AC is blocked with it rather than dropped.
	Plan(ctx context.Context, env *PlanEnv, ac batch.AC) ([]Plan, error)
	// Render produces a job's artifacts in blob storage, or says why it cannot. An error is
	// an infrastructure failure worth a retry; an artifact at fault is a blocked render.
	Render(ctx context.Context, env *RenderEnv, ev events.Event, spec events.JobSpec) (*events.RenderDone, error)
	// Gate runs the deterministic gates over a render and returns the blind, judge-facing
	// gates.done, or gates.failed for the aggregator.
	Gate(ctx context.Context, env *GateEnv, ev events.Event, rd *events.RenderDone) (events.Payload, error)
	// Judge asks the provider about a gated job and returns its raw answers.
	Judge(ctx context.Context, env *JudgeEnv, ev events.Event, gd *events.GatesDone) (*events.VerdictEmitted, error)
}

// Kind is a judge kind whole, as the registry (pkg/registry) holds it: its rules and its
// stages. A kind's stages package embeds its rules in the type that implements Stages.
type Kind interface {
	kind.Kind
	Stages
}

// Commanding is a kind with CLI subcommands of its own (rubric's `contrast`, ab's
// `shuffle`). cmd/tribunal adds every registered kind's commands to its tree
// (kinds.Commands) before it names the flags' TRIBUNAL_* variables, so a kind's command
// is configured, suggested and documented as any other. Commands builds new commands on
// each call; one that fails returns a cli.ExitError (internal/cli) for its exit status.
type Commanding interface {
	Commands() []*cobra.Command
}

// Selecting is a kind whose entries a run can narrow (`tribunal run --target`, `--ac <a
// job id of the entry>`): Selection lists an entry's target ids and the job ids of its
// parts, read from its files before anything is submitted (rubric's targets and views).
type Selecting interface {
	Selection(b *batch.Batch, ac batch.AC, allowOutside bool) (targets, parts []string, err error)
}

// Keyed is a kind with batch keys of its own (critic's task and output, equivalence's
// documents and cases, rubric's spec and mode): the registry hands them to the batch
// format (batch.SetKinds), which decodes an entry of the kind's own keys into the kind's
// struct (batch.AC.Part) and the batch's into another (batch.Batch.Part), refuses the
// keys no kind of the entry has, and publishes the kinds' keys in the batch schema. Plan
// reads them from the entry's part.
type Keyed interface {
	BatchKeys() batch.Keys
}

// Plan is what one job needs before it can be submitted: the artifacts to upload and a
// builder that turns the uploads into its spec.
type Plan struct {
	// JobID is the job's id: the AC id, or "<AC>--<view>" for a rubric view.
	JobID string
	// Names are the artifacts to upload, as the batch names them.
	Names []string
	// Build turns the uploaded sources (by name) into the job's spec.
	Build func(uploads map[string]events.Source) events.JobSpec
}

// PlanEnv is what planning may use: the batch, the submitter's choices and its store.
type PlanEnv struct {
	Batch  *batch.Batch
	Tenant string
	// Store keeps documents a kind uploads itself (inline outputs, feature files).
	Store blob.Store
	// AllowOutside lets artifact paths leave the batch folder.
	AllowOutside bool
	// ServeFeature, when set, serves a rubric feature folder over HTTP and returns its base
	// URL (the all-in-one mode).
	ServeFeature func(dir string) (string, error)
	// DefaultMode is a rubric view's mode when its AC names none (interactive when a person
	// sits at the terminal of `tribunal run`, else headless).
	DefaultMode string

	mu   sync.Mutex
	memo map[string]memoized
}

type memoized struct {
	v   any
	err error
}

// Once computes what one batch needs once for all its entries (the ab verify map, the
// threshold) and remembers it, error included.
func (e *PlanEnv) Once(key string, compute func() (any, error)) (any, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if m, ok := e.memo[key]; ok {
		return m.v, m.err
	}
	v, err := compute()
	if e.memo == nil {
		e.memo = map[string]memoized{}
	}
	e.memo[key] = memoized{v, err}
	return v, err
}

// RenderEnv is what rendering may use.
type RenderEnv struct {
	Store   blob.Store
	Fetcher *artifact.Fetcher
	// Provider runs documents (equivalence); nil blocks such jobs.
	Provider judge.Provider
	// Cache is the shared cache bucket (equivalence teacher transcripts).
	Cache    kv.KV
	Params   judge.Params
	Instance string
	// Sensors render views (rubric); nil blocks such jobs.
	Sensors Sensors
	Log     *slog.Logger
}

// Sensors render a view with the sensor a job names ("web" or an operator's command
// adapter). The renderer decides which sensors it offers.
type Sensors interface {
	Sense(ctx context.Context, adapter string, v sensor.View) (sensor.Capture, error)
}

// GateEnv is what gating may use.
type GateEnv struct {
	Store blob.Store
	// Views holds looping kinds' view state (previous render, baseline).
	Views kv.KV
	// Gates are the operator's gates commands by adapter name.
	Gates *command.Gates
	Log   *slog.Logger
}

// JudgeEnv is what judging may use.
type JudgeEnv struct {
	Store    blob.Store
	Provider judge.Provider
	// Cache, when set, is the judge-call cache shared by every judge instance.
	Cache kv.KV
	// ShareCache serves cached answers across tenants: identical inputs judged for one
	// team are answered from the cache for another. It saves provider calls at a privacy
	// cost (a cache hit, visible in results, tells a team that another team judged the
	// same content), so it is an operator's opt-in (`serve --share-judge-cache`).
	ShareCache bool
	Instance   string
	Params     judge.Params
	Log        *slog.Logger
}

// Problem says what is wrong with an AC's entry and where, the way the batch parser does:
// "AC-12: line 40: missing input: ...". A job whose entry is at fault carries it as its
// spec's Problem, which the renderer reports as it is.
func Problem(ac batch.AC, what string) string {
	return fmt.Sprintf("%s: line %d: %s", ac.ID, ac.Line, what)
}

// BlockedSource is a source that could not be provided, carrying why: the AC is blocked
// with the reason when it is rendered.
func BlockedSource(name, reason string) events.Source {
	if name == "" {
		name = "(none)"
	}
	return events.Source{Name: name, Error: reason}
}
