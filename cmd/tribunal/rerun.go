package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/localstate"
	"github.com/tribunal-dev/tribunal/internal/rerun"
	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

// rerunFlagHelp is --rerun's help, the same on run and bench.
const rerunFlagHelp = "judge the batch anew even when every input is unchanged since a batch that completed in this state folder (whose results otherwise stand)"

// allInOne is one batch through the all-in-one mode, from a loaded batch to its results.
// `tribunal run` and `tribunal bench` both go through it, so the bench's rerun measures
// what a user's rerun does. open prepares the batch (every artifact hashed) on the state
// folder's server and store; standing finds the earlier batch whose results stand for an
// unchanged one; only when there is none do start and submit run the services.
type allInOne struct {
	batch       *batch.Batch
	tenant      string
	dataDir     string
	ephemeral   bool
	blobURL     string
	concurrency int
	jf          *judgeFlags
	fetch       artifact.FetchOptions
	sensors     *renderer.Sensors
	gates       *command.Gates
	// submitter carries the submission's choices (AllowOutside, ServeFeature, DefaultMode).
	submitter client.Submitter
	// force judges anew whatever the state folder holds (--rerun).
	force bool
	// options are the run's settings that can reach a decision, for the key.
	options map[string]string
	// notes is where it says whether an earlier batch's results stand; nil says nothing.
	notes io.Writer
	// guard watches the state folder's space (run); nil leaves it unwatched (bench).
	guard *diskspace.Guard
	// resume is the batch of the same key that an earlier run stopped before it
	// completed: this run continues it instead of judging the batch as a new one.
	resume *rerun.Entry

	env      *embedded
	js       jetstream.JetStream
	sub      *client.Submitter
	prep     *client.Prepared
	provider judge.Provider
	params   judge.Params
	key      string
	plan     string
	jobs     int
	// unkeyable is why a job of the batch cannot be keyed (rerun.Unkeyable), the first
	// Prepare met; "" when every job can.
	unkeyable string
}

// open builds the judge provider (not probed yet: an unchanged rerun asks it nothing),
// opens the state folder's NATS server and blob store and prepares the batch. Close
// undoes it.
func (a *allInOne) open(ctx context.Context) error {
	applyMemoryLimit(defaultMemoryLimit)
	var err error
	if a.provider, a.params, err = a.jf.build("all-in-one"); err != nil {
		return exitError{2, err}
	}
	if !a.ephemeral {
		// The rerun key needs the build's identity, which may mean hashing the whole
		// executable: begun now, it overlaps the server's start and the batch's hashing.
		go func() { _, _ = rerun.Build() }()
	}
	a.env = &embedded{guard: a.guard}
	nc, err := a.env.open(ctx, a.dataDir, a.ephemeral, a.blobURL)
	if err != nil {
		return exitError{2, err}
	}
	if a.sensors != nil {
		// Closed after the services (which use them), or alone when none started.
		a.env.close = append(a.env.close, a.sensors.Close)
	}
	if a.js, err = jetstream.New(nc); err != nil {
		return fmt.Errorf("jetstream: %w", err)
	}
	sub := a.submitter
	sub.Pub, sub.Store = bus.NewPublisher(a.js), a.env.Store
	// What the rerun key needs of each job, seen as Prepare builds it: a batch of several
	// windows is not held planned, and planning it again would hash its files again.
	a.unkeyable = ""
	sub.Inspect = func(j client.Job) {
		if why := rerun.Unkeyable(j.Spec); why != "" && a.unkeyable == "" {
			a.unkeyable = why
		}
	}
	a.sub = &sub
	a.prep, err = a.sub.Prepare(ctx, a.batch, a.tenant)
	if err != nil {
		return err
	}
	a.plan, a.jobs = a.prep.Digest(), a.prep.Len()
	return nil
}

// Close stops whatever open and start started.
func (a *allInOne) Close() {
	if a.env != nil {
		a.env.Close()
	}
}

// standing returns the results of the earlier batch that stand for this one, with its
// index entry, or nil when the batch is to be judged: it is forced, its key cannot be
// computed, no batch completed with the same key, or the one that did cannot be read
// back intact. It computes the key either way, for remember.
func (a *allInOne) standing(ctx context.Context) (*client.Results, *rerun.Entry) {
	if a.ephemeral {
		// A fresh temporary folder holds no earlier batch.
		return nil, nil
	}
	key, err := a.computeKey()
	if err != nil {
		slog.Debug("rerun: judging the batch, its inputs' key is unknown", "err", err)
		return nil, nil
	}
	a.key = key
	if a.force {
		return nil, nil
	}
	idx := rerun.OpenIndex(a.dataDir)
	e, err := idx.Lookup(key)
	if err != nil {
		a.note("rerun index unreadable (%v): judging the batch\n", err)
		return nil, nil
	}
	if e == nil {
		return nil, nil
	}
	if e.Stopped != nil {
		// An earlier run of the same inputs stopped before its batch completed: continue
		// that batch, whose answers so far are recorded.
		a.resume = e
		return nil, nil
	}
	buckets, err := bus.OpenBuckets(ctx, a.js)
	if err == nil {
		var res *client.Results
		res, err = client.LoadChecked(ctx, buckets, a.env.Store, e.Tenant, e.Batch, func(h *records.Batch, jobs []*records.Job) error {
			return rerun.Stands(*e, h, jobs)
		})
		if err == nil {
			return res, e
		}
	}
	a.note("unchanged since batch %s, but its results do not stand (%v): judging the batch again\n", e.Batch, err)
	if err := idx.Forget(key); err != nil {
		slog.Warn("rerun index", "err", err)
	}
	return nil, nil
}

// computeKey is the key of everything that can change this batch's decisions
// (rerun.Inputs); an error when any part is unknown or a job rests on state outside it.
func (a *allInOne) computeKey() (string, error) {
	build, err := rerun.Build()
	if err != nil {
		return "", err
	}
	file, err := rerun.FileDigest(a.batch.Path)
	if err != nil {
		return "", fmt.Errorf("%w: batch file: %w", rerun.ErrUnknown, err)
	}
	if a.unkeyable != "" {
		return "", fmt.Errorf("%w: %s", rerun.ErrUnknown, a.unkeyable)
	}
	jid, err := judgeIdentity(a.jf, a.provider, a.params)
	if err != nil {
		return "", err
	}
	return rerun.Inputs{Tribunal: build, Tenant: a.tenant, Source: a.batch.Path, BatchFile: file, Plan: a.plan,
		Jobs: a.jobs, Judge: jid, Options: a.options}.Key()
}

// judgeIdentity is what the key holds of the judge: who answers, and every setting of
// what it is asked. Timeouts, attempts, concurrency and rate limits are left out: they
// change when an answer comes, not what it says (a call that failed for them blocks its
// AC, and such a batch is never reused, rerun.Stands).
func judgeIdentity(jf *judgeFlags, p judge.Provider, params judge.Params) (map[string]string, error) {
	id := map[string]string{
		"provider": p.Name(), "model": p.DefaultModel(), "flag_model": jf.model,
		"max_tokens": strconv.Itoa(jf.maxTokens), "temperature": strconv.FormatFloat(jf.temperature, 'g', -1, 64), "seed": strconv.Itoa(jf.seed),
		"params": stage.ParamsKey(params),
	}
	switch jf.provider {
	case "scripted":
		// Each kind's fixture flag under its own name (scripted_winner, scripted_critic, ...).
		for _, f := range jf.fixtures {
			if f.Flag != "" {
				id[strings.ReplaceAll(f.Flag, "-", "_")] = f.setting
			}
		}
		if jf.scriptedAnswers != "" {
			d, err := rerun.FileDigest(jf.scriptedAnswers)
			if err != nil {
				return nil, fmt.Errorf("%w: --scripted-answers: %w", rerun.ErrUnknown, err)
			}
			id["scripted_answers"] = d
		}
	case "openai":
		id["base_url"], id["azure"], id["api_version"], id["response_format"] = jf.baseURL, strconv.FormatBool(jf.azure), jf.apiVersion, jf.responseFormat
	}
	return id, nil
}

// start probes the provider (one that cannot work stops the run here, with the cause)
// and runs the four services.
func (a *allInOne) start(ctx context.Context) error {
	if err := a.jf.check(ctx, a.provider, 3); err != nil {
		return exitError{2, err}
	}
	if err := a.env.start(ctx, services{provider: a.provider, params: a.params, concurrency: a.concurrency, jf: a.jf,
		fetch: a.fetch, sensors: a.sensors, gates: a.gates}); err != nil {
		return exitError{2, err}
	}
	return nil
}

// submit publishes the prepared batch as batchID, then lets it and the loaded batch go:
// they hold every job's plan and entry and the small artifacts' bytes, which a
// 100,000-AC batch would otherwise keep live (and the collector busy) until it completes
// (measured: 2.89 ms of CPU per AC and an 1,107 MiB peak, against main's 2.30 and 822).
//
// When an earlier run of the same inputs stopped before its batch completed, it continues
// that batch instead (client.ResumePrepared): the jobs it recorded go on where they
// stopped, their answers kept, and only the rest are published. A batch that cannot be
// continued (cancelled, changed, pruned) is said so and judged as batchID.
func (a *allInOne) submit(ctx context.Context, batchID string) (client.Submission, error) {
	a.sub.Pub = a.env.Running.Pub
	defer func() { a.prep, a.batch = nil, nil }()
	if e := a.resume; e != nil {
		s, err := a.sub.ResumePrepared(ctx, a.env.Running.Buckets, a.prep, e.Tenant, e.Batch)
		var refused *client.RefusedError
		switch {
		case err == nil:
			a.note("continuing batch %s, which a run stopped before it completed (%s at %s): its %d ACs already recorded go on where they were\n",
				e.Batch, e.Stopped.Why, e.Stopped.At.Local().Format("2006-01-02 15:04:05"), s.Recorded)
			return s, nil
		case errors.As(err, &refused):
			a.note("batch %s, which a run stopped before it completed, cannot be continued (%v): judging the batch as %s\n", e.Batch, err, batchID)
		default:
			return s, err
		}
	}
	return a.sub.SubmitPrepared(ctx, a.prep, a.tenant, batchID)
}

// stopped ends a run whose batch was submitted (or partly) but did not complete: err is
// why. When the run's context ended (the disk's reserve was reached, Ctrl-C, --timeout)
// the batch is recorded as stopped under its key, so the next run of the same inputs
// continues it; a full disk says so with what to do.
func (a *allInOne) stopped(ctx context.Context, s client.Submission, last client.Progress, err error) error {
	cause := context.Cause(ctx)
	if ctx.Err() == nil || s.BatchID == "" {
		return err
	}
	why := "interrupted"
	switch {
	case diskspace.Is(cause):
		why = "no space left"
	case errors.Is(cause, context.DeadlineExceeded):
		why = "timed out"
	}
	if a.key != "" {
		e := rerun.Entry{Key: a.key, Tenant: s.Tenant, Batch: s.BatchID, Plan: a.plan, Jobs: a.jobs,
			Stopped: &rerun.Stop{At: time.Now().UTC().Truncate(time.Second), Why: why}}
		if rerr := rerun.OpenIndex(a.dataDir).Record(e); rerr != nil {
			slog.Warn("rerun index: the stopped batch is not remembered; the next run judges the batch as a new one (its cached answers are not paid for again)", "err", rerr)
		}
	}
	if diskspace.Is(cause) {
		return noSpaceError(cause, s.BatchID, last.Done, max(last.Total, s.Jobs))
	}
	return err
}

// remember makes batchID, which completed here just now, the batch whose results stand
// for its key.
func (a *allInOne) remember(batchID string, comp *records.Completion) {
	if a.key == "" {
		return
	}
	e := rerun.Entry{Key: a.key, Tenant: a.tenant, Batch: batchID, Plan: a.plan, Jobs: a.jobs, Judges: comp.Judges,
		CompletedAt: comp.At.UTC().Truncate(time.Second), ExitCode: comp.Summary.ExitCode}
	if err := rerun.OpenIndex(a.dataDir).Record(e); err != nil {
		slog.Warn("rerun index: the batch is not remembered; an unchanged rerun will judge it again", "err", err)
	}
}

// standsNote says that an earlier batch's results stand, and why.
func (a *allInOne) standsNote(e *rerun.Entry) {
	where := ""
	if filepath.Clean(a.dataDir) != localstate.DirName {
		where = " --data-dir " + a.dataDir
	}
	a.note("unchanged since %s: every input (the batch file, its artifacts, the judge and its settings, tribunal's build) is the same, "+
		"so its results stand and nothing was judged again (--rerun judges the batch anew; `tribunal audit --batch %s%s` audits it)\n", rerun.Describe(e), e.Batch, where)
}

func (a *allInOne) note(format string, args ...any) {
	if a.notes != nil {
		fmt.Fprintf(a.notes, format, args...)
	}
}
