package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/localstate"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// commandEnv is the CLI as a kind's commands see it (stage.CommandEnv): the connection
// flags and the state folder every command that reads the state takes, opened as inState
// opens it, and the judge flags every command that judges takes, judging as run does.
type commandEnv struct{}

// StateFlags implements stage.CommandEnv.
func (commandEnv) StateFlags(fs *pflag.FlagSet, command string) stage.OpenState {
	conn := &connFlags{}
	conn.register(fs)
	conn.registerLocalInput(fs, command)
	return func(ctx context.Context, fn func(stage.CommandState) error) error {
		return inState(ctx, conn, func(env *clientEnv, b bus.Buckets) error {
			return fn(stage.CommandState{Buckets: b, Store: env.store, Pub: env.pub, Applied: env.applied})
		})
	}
}

// JudgeFlags implements stage.CommandEnv.
func (commandEnv) JudgeFlags(fs *pflag.FlagSet) stage.Judge {
	j := &cliJudge{}
	j.flags.register(fs)
	return j
}

// cliJudge is the judge of a kind's command (stage.Judge): its judgeFlags, and the
// all-in-one mode run uses.
type cliJudge struct{ flags judgeFlags }

func (j *cliJudge) ScriptedByFixtures() bool {
	return j.flags.provider == "scripted" && j.flags.scriptedAnswers == ""
}

func (j *cliJudge) UseAnswers(p string) { j.flags.scriptedAnswers = p }

func (j *cliJudge) SetFixture(flag, setting string) { j.flags.setFixture(flag, setting) }

// JudgeBatch judges a batch in the all-in-one mode (an embedded NATS server and file
// storage in a temporary folder) and returns its final job records.
func (j *cliJudge) JudgeBatch(ctx context.Context, b *batch.Batch, concurrency int, quiet bool) ([]*records.Job, error) {
	dataDir, err := os.MkdirTemp("", "tribunal-calibrate-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dataDir)
	env, err := startEmbedded(ctx, dataDir, true, "", concurrency, &j.flags, artifact.FetchOptions{}, nil, nil)
	if err != nil {
		return nil, exitError{2, err}
	}
	defer env.Close()
	sub := &client.Submitter{Pub: env.Running.Pub, Store: env.Store}
	s, err := sub.Submit(ctx, b, cmp.Or(b.Tenant, "default"), client.NewBatchID(b))
	if err != nil {
		return nil, err
	}
	progress := newProgress(os.Stderr, quiet)
	if _, err := client.Watch(ctx, env.Running.Buckets, s.Tenant, s.BatchID, 100*time.Millisecond, progress.report); err != nil {
		return nil, fmt.Errorf("calibration batch %s: %w", s.BatchID, err)
	}
	return records.New(env.Running.Buckets).LoadJobs(ctx, s.Tenant, s.BatchID)
}

// exportGold writes the batch's reviewed jobs into dir as a calibration set, each kind
// that makes one (stage.GoldExporting) taking its own, and reports what it wrote and,
// by kind, every reviewed AC it left out and why: a reviewed AC of a kind that makes no
// set is never dropped without a word.
func exportGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir string) (goldReport, error) {
	rep := goldReport{written: map[events.Kind]int{}, skipped: map[events.Kind][]stage.GoldSkip{}}
	var exporting []string
	for _, k := range registry.All() {
		g, ok := k.(stage.GoldExporting)
		if !ok {
			continue
		}
		exporting = append(exporting, string(k.Name()))
		ex, err := g.ExportGold(ctx, store, jobs, dir)
		if err != nil {
			return rep, err
		}
		rep.written[k.Name()] += ex.Written
		rep.skipped[k.Name()] = append(rep.skipped[k.Name()], ex.Skipped...)
	}
	for _, j := range jobs {
		if len(j.Reviews) == 0 {
			continue
		}
		if k, err := kind.Lookup(j.Spec.Kind); err == nil {
			if _, ok := k.(stage.GoldExporting); ok {
				continue
			}
		}
		why := fmt.Sprintf("tribunal calibrate reads calibration sets of %s only, and a verdict of kind %s has no known-answer form there", strings.Join(exporting, ", "), j.Spec.Kind)
		rep.skipped[j.Spec.Kind] = append(rep.skipped[j.Spec.Kind], stage.GoldSkip{AC: j.ACID, Why: why})
	}
	return rep, nil
}

// goldReport is what exportGold wrote and left out, by kind.
type goldReport struct {
	written map[events.Kind]int
	skipped map[events.Kind][]stage.GoldSkip
}

// total counts the ACs written.
func (r goldReport) total() int {
	n := 0
	for _, w := range r.written {
		n += w
	}
	return n
}

// write says, a line per kind, how many reviewed ACs were written and how many left
// out for each reason, naming the first few.
func (r goldReport) write(w io.Writer) {
	kinds := slices.Sorted(maps.Keys(r.written))
	for k := range r.skipped {
		if !slices.Contains(kinds, k) {
			kinds = append(kinds, k)
		}
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		sk := r.skipped[k]
		if r.written[k] == 0 && len(sk) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: %d written, %d skipped\n", k, r.written[k], len(sk))
		var whys []string
		acs := map[string][]string{}
		for _, s := range sk {
			if acs[s.Why] == nil {
				whys = append(whys, s.Why)
			}
			acs[s.Why] = append(acs[s.Why], s.AC)
		}
		for _, why := range whys {
			ids := acs[why]
			named := strings.Join(ids[:min(len(ids), 5)], ", ")
			if len(ids) > 5 {
				named += fmt.Sprintf(" and %d more", len(ids)-5)
			}
			fmt.Fprintf(w, "    %d skipped: %s (%s)\n", len(ids), why, named)
		}
	}
}

// ExternalFlags implements stage.CommandEnv: --data-dir, the state folder run keeps, opened
// locked for command with the external judge as this process's only judge.
func (commandEnv) ExternalFlags(fs *pflag.FlagSet, command string) stage.OpenExternal {
	var dataDir string
	fs.StringVar(&dataDir, "data-dir", "", "state folder (default "+localstate.DirName+" in the current folder, shared with tribunal run)")
	return func(ctx context.Context, fn func(stage.ExternalState) error) error {
		// Quiet: the note it would print offers run's --ephemeral; the command says where
		// its batch is kept instead.
		lock, err := lockState(ctx, cmp.Or(dataDir, localstate.DirName), command, true)
		if err != nil {
			return err
		}
		defer lock.Release()
		dir := lock.Dir()
		e := &embedded{}
		defer e.Close()
		nc, err := e.open(ctx, dir, false, "")
		if err != nil {
			return exitError{2, err}
		}
		js, err := jetstream.New(nc)
		if err != nil {
			return fmt.Errorf("jetstream: %w", err)
		}
		// The external judge is this process's only judge: a job of another batch in the
		// folder that a model is to judge is left for a run that has one. Its calls are
		// asked under tribunal run's default parameters (temperature 0), which it reports
		// as asked, as recorded answers are: nothing is sampled.
		zero := float32(0)
		opts := app.Options{
			Store: e.Store, Params: judge.Params{Temperature: &zero}, Instance: "all-in-one", Bus: localBus(),
			Concurrency: 64, CloseTimeout: 10 * time.Second, Logger: slog.Default(),
		}
		if opts.Published, err = e.published(ctx); err != nil {
			return err
		}
		// Its bucket is replicated as the services provision the rest: one replica on the
		// embedded server.
		x, err := external.Open(ctx, js, e.Store, opts.Bus.Replicas)
		if err != nil {
			return err
		}
		opts.Provider, opts.External = x.Provider(), x
		e.Running, err = app.Start(ctx, nc, opts)
		if err != nil {
			return exitError{2, err}
		}
		e.close = append(e.close, e.Running.Close)
		return fn(stage.ExternalState{Dir: dir, Exchange: x, Records: records.New(e.Running.Buckets),
			Batches: &cliBatches{running: e.Running, store: e.Store, sub: &client.Submitter{Pub: e.Running.Pub, Store: e.Store, AllowOutside: true}}})
	}
}

// cliBatches are the client's submission and results over the services of an open state
// folder (stage.Batches).
type cliBatches struct {
	running *app.Running
	store   blob.Store
	sub     *client.Submitter
}

func (c *cliBatches) Prepare(ctx context.Context, b *batch.Batch, tenant string) (stage.Prepared, error) {
	return c.sub.Prepare(ctx, b, tenant)
}

func (c *cliBatches) Resume(ctx context.Context, p stage.Prepared, tenant, id string) error {
	prep, ok := p.(*client.Prepared)
	if !ok {
		return fmt.Errorf("resume %s/%s: a batch these services did not prepare", tenant, id)
	}
	_, err := c.sub.ResumePrepared(ctx, c.running.Buckets, prep, tenant, id)
	return err
}

func (c *cliBatches) ResumeExternal(ctx context.Context, tenant, id string) error {
	_, err := c.running.ResumeExternal(ctx, tenant, id)
	return err
}

func (c *cliBatches) Wait(ctx context.Context, tenant, id string) error {
	_, err := client.Watch(ctx, c.running.Buckets, tenant, id, 100*time.Millisecond, func(client.Progress) {})
	return err
}

func (c *cliBatches) Results(ctx context.Context, tenant, id string) (stage.Results, error) {
	res, err := client.Load(ctx, c.running.Buckets, c.store, tenant, id)
	if err != nil {
		return nil, err
	}
	return cliResults{res}, nil
}

// cliResults are a completed batch's results (stage.Results).
type cliResults struct{ res *client.Results }

func (r cliResults) Rows() []kind.Row { return r.res.Rows }

func (r cliResults) ExitCode() int { return r.res.Summary.ExitCode }

func (r cliResults) WriteCFN(out string, now time.Time) (string, error) {
	if out != "" {
		_, err := r.res.WriteCFNTo(out, now)
		return out, err
	}
	root, err := client.CFNRoot(".")
	if err != nil {
		return "", err
	}
	return r.res.WriteCFN(root, now)
}
