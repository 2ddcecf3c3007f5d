package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/memlimit"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

func newAuditCmd() *cobra.Command {
	var conn connFlags
	var tenant, batchID, jobID, since, until string
	var asJSON, noState bool
	var cpuProfile, peakHeapProfile string
	cmd := &cobra.Command{
		Use:   "audit --batch <id> [--job <ac>] | --since <time> [--until <time>]",
		Short: "Replay the event stream, re-derive every decision and report each mismatch",
		Long: `audit reads the event stream (an ordered consumer: nothing is acked, no service is disturbed)
and re-derives every decision of a batch from its recorded events alone: the blind label
assignments and un-shuffles, the derived verdicts and their routing, blocked jobs, the rubric
loop decisions and sign-offs, the batch summary, the digest chains and every manifest, rebuilt
and compared with the stored blob. Each value that differs is reported with the job, the event
it concerns and the event it was derived from.

--job audits one AC of the batch: only its own events and its batch's inputs are decoded
(the rest of the stream is passed over unread), its decisions re-derived and its job record
compared; the batch's completion and manifests rest on every job and are left to --batch.
A decided job's record keeps where the stream holds each event its outcome rests on: those
messages are read by sequence, each checked to be the event its record links, and the
outcome after them; the stream is read instead when the record keeps no positions (written
before them), when one does not hold its event (a finding), or when the audit at them finds
anything. A job the stream holds no event of is no pass: a record of it is a mismatch
(nothing proves it), and without one it was never submitted to the batch (exit 2).

--since and --until select the batches that have an event in that range (each is audited
whole). A time is RFC 3339 or a duration before now ("24h").

Every blob an event records is read back and checked against its address, size and media
type: the artifacts a render or its gates recorded, every judge call's record (the exact
prompt and raw answer reviewers are shown; a verdict written before records were kept is
listed as not covered), every page of the batch's plan, and each manifest, whose media
type must be the one the aggregator wrote. Every event's digest chain is checked against
the events it names, so a deleted render.done or gates.done, or an edited artifact, call
record or plan page, is reported.

With the services' NATS user (it needs the JetStream API) each batch's key-value state is
compared too: the batch header (size, source, completion, redrive) and every job record,
field by field, which names an event whose bytes changed after the decision was taken and
a header that no longer says what the events decided. A batch named by --batch whose header
the state holds while the stream holds none of its events (every one deleted, or aged out
of the stream's retention) is a mismatch too: nothing is left to prove what its header
says. When the state cannot be read the report says so ("key-value state: not compared")
and the audit rests on the stream alone.

Inputs the aggregator's rules refuse (a dead letter of an event one team published in
another's name) decide nothing: they are listed with the subject they came from, and are
no mismatch of the batch they name; whatever was derived from one is.

The audit holds no event once it is read, and no job record once the job is final: those
wait in a temporary file in $TMPDIR (removed as soon as it is made, so nothing is left
behind) for the batch's completion and the key-value comparison, about 60 MB of disk for a
100,000-AC batch. --cpuprofile and --peak-heapprofile write profiles of a long audit.

Exit code 0: every decision re-derives; 1: mismatches; 2: the audit could not run (a batch,
or a --job, neither the stream nor the state knows included).`,
		Example: `  tribunal audit --batch quickstart-20261130T080000-a1b2c3 --tenant default
  tribunal audit --batch quickstart-20261130T080000-a1b2c3 --job AC-17
  tribunal audit --since 24h --json > audit.json
  tribunal audit --since 2026-11-30T08:00:00Z --until 2026-11-30T09:00:00Z --tenant team-a`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stop, err := startProfiles(cpuProfile, peakHeapProfile)
			if err != nil {
				return exitError{2, err}
			}
			defer stop()
			f := audit.Filter{Tenant: tenant, BatchID: batchID}
			if f.Since, err = parseAuditTime("--since", since); err != nil {
				return exitError{2, err}
			}
			if f.Until, err = parseAuditTime("--until", until); err != nil {
				return exitError{2, err}
			}
			if f.BatchID == "" && f.Since.IsZero() && f.Until.IsZero() {
				return exitError{2, errors.New("name a batch (--batch) or a time range (--since, --until)")}
			}
			if jobID != "" && (f.BatchID == "" || !f.Since.IsZero() || !f.Until.IsZero()) {
				return exitError{2, errors.New("--job audits one job of one batch: name its batch (--batch), and no time range")}
			}
			env, err := connectClient(cmd.Context(), &conn)
			if err != nil {
				return err
			}
			defer env.close()
			f.Stream = conn.stream
			memlimit.Follow(cmd.Context(), auditMemoryLimit, memlimit.Audit)
			if jobID != "" {
				return auditJob(cmd, env, f, jobID, asJSON, noState)
			}
			bar := newAuditProgress(os.Stderr, asJSON)
			rep, err := audit.RunWith(cmd.Context(), env.js, f, env.store, audit.Options{Progress: bar.report})
			bar.done()
			if err != nil {
				return exitError{2, fmt.Errorf("replay the stream (needs the services' NATS user): %w", err)}
			}
			// A named batch whose every event is gone is still known by its header, a
			// finding: looking for it needs the state, and a time range cannot tell (it
			// selects batches by when their events were stored).
			headers := f.BatchID != "" && f.Since.IsZero() && f.Until.IsZero() && !noState
			if rep.Events+rep.Rejudges == 0 && !headers {
				return exitError{2, fmt.Errorf("no events %s on stream %s", describeFilter(f), f.Stream)}
			}
			if noState {
				rep.State = "not compared (--no-state): the audit rests on the stream alone"
			} else {
				b, err := env.buckets(cmd.Context())
				checkAuditState(cmd.Context(), b, err, &rep)
				if err == nil && headers {
					checkUnreplayed(cmd.Context(), env, b, f, &rep)
				}
			}
			if rep.Events+rep.Rejudges == 0 && rep.OK() {
				why := ", and the key-value state holds no header of it"
				if rep.State != "compared" {
					why = " (key-value state " + rep.State + ")"
				}
				return exitError{2, fmt.Errorf("no events %s on stream %s%s", describeFilter(f), f.Stream, why)}
			}
			if err := printAudit(cmd.OutOrStdout(), &rep, f, asJSON); err != nil {
				return err
			}
			if !rep.OK() {
				return exitError{code: 1}
			}
			return nil
		},
	}
	conn.register(cmd.Flags())
	conn.registerLocal(cmd.Flags(), "audit")
	cmd.Flags().StringVar(&tenant, "tenant", "", "only this tenant's events; default every tenant")
	cmd.Flags().StringVar(&batchID, "batch", "", "the batch to audit")
	cmd.Flags().StringVar(&jobID, "job", "", "audit only this AC of the batch: its events and its record, without replaying the rest")
	cmd.Flags().StringVar(&since, "since", "", "audit the batches with an event stored at or after this time (RFC 3339, or a duration before now)")
	cmd.Flags().StringVar(&until, "until", "", "... and at or before this time")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	cmd.Flags().BoolVar(&noState, "no-state", false, "do not compare with the aggregator's key-value state")
	cmd.Flags().StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile here (go tool pprof)")
	cmd.Flags().StringVar(&peakHeapProfile, "peak-heapprofile", "", "write a heap profile here each time the in-use heap reaches a new high (go tool pprof)")
	return cmd
}

// startProfiles starts the CPU profile and the peak heap watch a command was asked for;
// stop ends both.
func startProfiles(cpuPath, heapPath string) (stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return stop, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return stop, fmt.Errorf("--cpuprofile %s: %w", cpuPath, err)
		}
		stops = append(stops, func() { pprof.StopCPUProfile(); f.Close() })
	}
	if heapPath != "" {
		stops = append(stops, watchPeakHeap(heapPath, time.Second))
	}
	return stop, nil
}

// auditJob audits one AC of a batch (audit.RunJob) and its job record, and prints the
// report as the batch's audit does. A job the stream holds no event of is no pass: with
// a record, the record is a finding (exit 1); without one, the job was never submitted to
// the batch, and the audit could not run (exit 2), as for a batch nothing knows.
func auditJob(cmd *cobra.Command, env *clientEnv, f audit.Filter, job string, asJSON, noState bool) error {
	ctx := cmd.Context()
	rep, err := audit.RunJobIn(ctx, env.js, f, job, env.store, jobWindow(cmd, env, f, job, noState))
	if errors.Is(err, audit.ErrJobNotInStream) {
		return auditUnseenJob(cmd, env, f, job, &rep, err, asJSON, noState)
	}
	if err != nil {
		return exitError{2, fmt.Errorf("replay the stream for job %s (needs the services' NATS user): %w", job, err)}
	}
	if rep.Events+rep.Rejudges == 0 || len(rep.Batches) == 0 {
		return exitError{2, fmt.Errorf("no events of job %s %s on stream %s", job, describeFilter(f), f.Stream)}
	}
	tenant := rep.Batches[0].Tenant
	switch {
	case noState:
		rep.State = "not compared (--no-state): the audit rests on the stream alone"
	default:
		const what = "the aggregator's record of the job"
		b, err := env.buckets(ctx)
		if err == nil {
			err = audit.CheckJobState(ctx, &rep, records.New(b), tenant, f.BatchID, job)
		}
		if err != nil {
			rep.State = "not compared: " + err.Error() + "; the audit rests on the stream alone"
			rep.Unverified = append(rep.Unverified, audit.Unverified{Tenant: tenant, Batch: f.BatchID, Job: job, What: what, Why: err.Error()})
		} else {
			rep.State = "compared (the job's record)"
		}
	}
	if err := printAudit(cmd.OutOrStdout(), &rep, f, asJSON); err != nil {
		return err
	}
	if !rep.OK() {
		return exitError{code: 1}
	}
	return nil
}

// auditUnseenJob ends the audit of a job the stream holds no event of (notInStream,
// audit.ErrJobNotInStream): its record, when the aggregator holds one, is reported (exit
// 1); otherwise the audit fails with notInStream and what is known of the record (exit 2).
func auditUnseenJob(cmd *cobra.Command, env *clientEnv, f audit.Filter, job string, rep *audit.Report, notInStream error, asJSON, noState bool) error {
	ctx := cmd.Context()
	tenant := f.Tenant
	if tenant == "" && len(rep.Batches) > 0 {
		tenant = rep.Batches[0].Tenant
	}
	switch {
	case noState:
		return exitError{2, fmt.Errorf("%w; whether the aggregator holds a record of it was not looked up (--no-state)", notInStream)}
	case tenant == "":
		return exitError{2, fmt.Errorf("%w; whether the aggregator holds a record of it was not looked up: name its tenant (--tenant)", notInStream)}
	}
	b, err := env.buckets(ctx)
	if err == nil {
		err = audit.CheckJobState(ctx, rep, records.New(b), tenant, f.BatchID, job)
	}
	switch {
	case errors.Is(err, records.ErrNotRecorded):
		return exitError{2, fmt.Errorf("%w, and the aggregator holds no record of it: the job was never submitted to that batch", notInStream)}
	case err != nil:
		return exitError{2, fmt.Errorf("%w; the aggregator's record of it could not be read: %v", notInStream, err)}
	}
	// The record is the finding CheckJobState added.
	rep.State = "compared (the job's record)"
	if err := printAudit(cmd.OutOrStdout(), rep, f, asJSON); err != nil {
		return err
	}
	if rep.OK() {
		return exitError{2, fmt.Errorf("%w: its record was compared but reported nothing", notInStream)}
	}
	return exitError{code: 1}
}

// jobWindowSlack widens a job's window on each side, for the clocks of the publisher,
// the aggregator and the stream's server. It can be short: a window that starts too
// late finds no submission and the read starts over from the stream's first message,
// and one that ends too early ends only once the job's outcome was read
// (audit.Window).
const jobWindowSlack = 5 * time.Second

// jobWindow is where the job's record says its events are (audit.Window): at the
// positions it keeps, or from its submission to its decision, to the stream's end for a
// job that is not final or was redriven. Without the record (no state, another tenant's, --no-state) the whole
// stream is read.
func jobWindow(cmd *cobra.Command, env *clientEnv, f audit.Filter, job string, noState bool) audit.Window {
	if noState || f.Tenant == "" {
		return audit.Window{}
	}
	b, err := env.buckets(cmd.Context())
	if err != nil {
		return audit.Window{}
	}
	e, err := b.Jobs.Get(cmd.Context(), records.JobKey(f.Tenant, f.BatchID, job))
	if err != nil {
		return audit.Window{}
	}
	j, err := records.DecodeJob(e.Value())
	if err != nil || j.SubmittedAt.IsZero() {
		return audit.Window{}
	}
	w := audit.Window{From: j.SubmittedAt.Add(-jobWindowSlack)}
	if j.Final() && j.Attempt == 0 && !j.DecidedAt.IsZero() {
		w.To = j.DecidedAt.Add(jobWindowSlack)
		// Where its events are: read there, not over the window (audit.Window).
		w.Positions, w.Links, w.Stored = j.Positions, j.Inputs, e.Created()
	}
	return w
}

// auditMemoryLimit is the audit's soft memory limit: the Go runtime collects harder as
// the heap nears it, so the garbage of a 100,000-job batch's completion (its manifest is
// built again to be compared) is collected before the heap doubles. GOMEMLIMIT
// overrides it.
const auditMemoryLimit = 384 << 20

// parseAuditTime reads an RFC 3339 time or a duration before now; "" is no bound.
func parseAuditTime(flag, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(strings.TrimPrefix(s, "-")); err == nil && d > 0 {
		return time.Now().Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%s %q: want an RFC 3339 time (2026-11-30T08:00:00Z) or a duration before now (24h)", flag, s)
}

func describeFilter(f audit.Filter) string {
	var parts []string
	if f.BatchID != "" {
		parts = append(parts, "of batch "+f.BatchID)
	}
	if f.Tenant != "" {
		parts = append(parts, "of tenant "+f.Tenant)
	}
	if !f.Since.IsZero() {
		parts = append(parts, "since "+f.Since.UTC().Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		parts = append(parts, "until "+f.Until.UTC().Format(time.RFC3339))
	}
	return strings.Join(parts, " ")
}

// checkAuditState compares each audited batch with the aggregator's key-value state
// (buckets, or openErr when they cannot be opened). A team's NATS user cannot read it:
// the audit then rests on the stream alone, and the report says so (Report.State).
func checkAuditState(ctx context.Context, b bus.Buckets, openErr error, rep *audit.Report) {
	const what = "the aggregator's key-value state"
	if openErr != nil {
		rep.State = "not compared: " + openErr.Error() + "; the audit rests on the stream alone"
		rep.Unverified = append(rep.Unverified, audit.Unverified{What: what, Why: openErr.Error()})
		return
	}
	st := records.New(b)
	var failed []string
	for _, s := range rep.Batches {
		if err := audit.CheckBatchState(ctx, rep, st, s.Tenant, s.Batch); err != nil {
			failed = append(failed, s.Tenant+"/"+s.Batch)
			rep.Unverified = append(rep.Unverified, audit.Unverified{Tenant: s.Tenant, Batch: s.Batch, What: what, Why: err.Error()})
		}
	}
	switch {
	case len(failed) == 0:
		rep.State = "compared"
	case len(failed) == len(rep.Batches):
		rep.State = "not compared: it could not be read (see below); the audit rests on the stream alone"
	default:
		rep.State = fmt.Sprintf("compared, except for %s, whose state could not be read (see below)", strings.Join(failed, ", "))
	}
}

// checkUnreplayed reports the headers of f's batch the stream holds no event of
// (audit.CheckUnreplayed); when they cannot be looked up the report says so.
func checkUnreplayed(ctx context.Context, env *clientEnv, b bus.Buckets, f audit.Filter, rep *audit.Report) {
	if _, err := audit.CheckUnreplayed(ctx, rep, env.js, f, records.New(b)); err != nil {
		rep.Unverified = append(rep.Unverified, audit.Unverified{Tenant: f.Tenant, Batch: f.BatchID,
			What: "whether the key-value state holds a header of the batch the stream holds no event of", Why: err.Error()})
		if rep.Events+rep.Rejudges == 0 {
			rep.State = "not compared: " + err.Error()
		}
	}
}

// printAudit writes the summary and every mismatch, or the report as JSON.
func printAudit(w io.Writer, rep *audit.Report, f audit.Filter, asJSON bool) error {
	if asJSON {
		return writeJSON(w, rep)
	}
	for _, b := range rep.Batches {
		if rep.Job != "" {
			fmt.Fprintf(w, "job %s of batch %s/%s\n", rep.Job, b.Tenant, b.Batch)
			continue
		}
		state := "incomplete"
		if b.Complete {
			state = "complete, digest " + b.Digest
		}
		fmt.Fprintf(w, "batch %s/%s: %d jobs, %s\n", b.Tenant, b.Batch, b.Jobs, state)
	}
	history := ""
	if rep.History > 0 {
		history = fmt.Sprintf(" (+%d of earlier batches for rubric view history)", rep.History)
	}
	fmt.Fprintf(w, "events read: %d%s, jobs: %d, decisions re-derived: %d, mismatches: %d\n",
		rep.Events, history, rep.Jobs, rep.Decisions, len(rep.Mismatches))
	if rep.ReadAgain != "" {
		fmt.Fprintf(w, "stream read %d times, one read not deciding alone for %s: %s\n", rep.Reads, strings.Join(rep.ReadAgainBatches, ", "), rep.ReadAgain)
	}
	if rep.State != "" {
		fmt.Fprintf(w, "key-value state: %s\n", rep.State)
	}
	for _, m := range rep.Mismatches {
		fmt.Fprintln(w, "  "+m.String())
	}
	if len(rep.Unverified) > 0 {
		fmt.Fprintln(w, "not re-derivable from the events alone:")
		for _, u := range rep.Unverified {
			fmt.Fprintln(w, "  - "+u.String())
		}
	}
	if len(rep.People) > 0 {
		fmt.Fprintln(w, "inputs from people (replayed with the rest):")
		for _, p := range rep.People {
			fmt.Fprintln(w, "  "+p.String())
		}
	}
	if len(rep.Refused) > 0 {
		// Someone's attempt, refused: nothing in the batch rests on it.
		fmt.Fprintln(w, "inputs the aggregator refuses (they decide nothing; anything derived from one is a mismatch above):")
		for _, r := range rep.Refused {
			fmt.Fprintln(w, "  "+r.String())
		}
	}
	if rep.OK() {
		of := describeFilter(f)
		if rep.Job != "" {
			of = "of job " + rep.Job + " " + of
		}
		fmt.Fprintf(w, "ok: every decision %s re-derives from its events\n", of)
	}
	return nil
}

// auditProgress draws a long audit's progress, with its ETA, on a terminal: a bar per
// read of the stream. Off a terminal, and with --json, it stays quiet: what it prints
// is for a person waiting, never for a reader of the output.
type auditProgress struct {
	bar  *progressbar.ProgressBar
	w    io.Writer
	pass int
}

func newAuditProgress(w *os.File, quiet bool) *auditProgress {
	if quiet || !(isatty.IsTerminal(w.Fd()) || isatty.IsCygwinTerminal(w.Fd())) {
		return &auditProgress{}
	}
	return &auditProgress{w: w}
}

// report moves the bar (none off a terminal).
func (p *auditProgress) report(pr audit.Progress) {
	if p == nil || p.w == nil {
		return
	}
	if p.bar == nil || pr.Pass != p.pass {
		if p.bar != nil {
			_ = p.bar.Finish()
		}
		p.pass = pr.Pass
		what := "selecting"
		if pr.Pass == pr.Passes {
			what = "auditing"
		}
		p.bar = progressbar.NewOptions64(int64(pr.Total), progressbar.OptionSetWriter(p.w),
			progressbar.OptionSetDescription(fmt.Sprintf("%s (read %d of %d)", what, pr.Pass, pr.Passes)),
			progressbar.OptionShowCount(), progressbar.OptionSetItsString("events"), progressbar.OptionShowIts(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish())
	}
	_ = p.bar.Set64(int64(pr.Read))
}

// done clears the bar before the report is printed.
func (p *auditProgress) done() {
	if p != nil && p.bar != nil {
		_ = p.bar.Finish()
	}
}
