package stage

import (
	"context"
	"io"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// CommandEnv is what the CLI (cmd/tribunal, which implements it) gives a kind's
// commands that work on a batch's recorded state: the flags that name that state and the
// way to open it, the same as every other command that reads it has, so a kind's command
// takes --nats, --blob and --data-dir (and their TRIBUNAL_* variables) as they do.
type CommandEnv interface {
	// StateFlags registers on fs the flags that name the state command works on and
	// returns what opens it once they are parsed: the state folder `tribunal run` keeps,
	// with its aggregator, or running services.
	StateFlags(fs *pflag.FlagSet, command string) OpenState
	// JudgeFlags registers on fs the judge's flags, the ones `tribunal run` takes
	// (--judge, --judge-model, the scripted judge's fixtures and answers, the provider's
	// settings), and returns the judge they configure once parsed.
	JudgeFlags(fs *pflag.FlagSet) Judge
	// ExternalFlags registers on fs the flag that names `tribunal run`'s state folder
	// (--data-dir) and returns what opens it, locked for command, with the external judge
	// (pkg/judge/external) as the process's only judge: a person or an agent answers the
	// calls (ab's `cfn-ab-critic`).
	ExternalFlags(fs *pflag.FlagSet, command string) OpenExternal
}

// OpenExternal opens the state folder its flags name with the external judge, calls fn
// with it and closes it.
type OpenExternal func(ctx context.Context, fn func(ExternalState) error) error

// ExternalState is `tribunal run`'s state folder opened with the external judge as the
// only judge and the services running over it.
type ExternalState struct {
	// Dir is the state folder.
	Dir string
	// Exchange is the external judge's calls: their prompts, and the answers given.
	Exchange *external.Exchange
	Records  records.Store
	Batches  Batches
}

// Batches submits a command's own batch and reads what it came to, as the client does
// (pkg/client, which a kind's command cannot import: the client imports the registry).
type Batches interface {
	// Prepare checks b and builds every job's events for tenant, publishing nothing.
	Prepare(ctx context.Context, b *batch.Batch, tenant string) (Prepared, error)
	// Resume submits the prepared batch as id, or goes on with the batch id when it holds
	// it already, publishing only what it lacks.
	Resume(ctx context.Context, p Prepared, tenant, id string) error
	// ResumeExternal hands the external judge's answered calls of the batch to the judge.
	ResumeExternal(ctx context.Context, tenant, id string) error
	// Wait waits until the batch is complete.
	Wait(ctx context.Context, tenant, id string) error
	// Results are the completed batch's results.
	Results(ctx context.Context, tenant, id string) (Results, error)
}

// Prepared is a batch checked and built (Batches.Prepare).
type Prepared interface {
	// Digest is the digest of the batch's inputs.
	Digest() string
	// Len is how many jobs it has.
	Len() int
}

// Results is a completed batch as a command reads it.
type Results interface {
	Rows() []kind.Row
	ExitCode() int
	// WriteCFN writes the batch's ab manifest where seed 000's vote step reads it: to the
	// file out, or, when out is "", under the project root of the current folder
	// (<root>/.cfn-cache/manifests/); it returns the file written.
	WriteCFN(out string, now time.Time) (string, error)
}

// Judge is the judge a command's flags configure (CommandEnv.JudgeFlags), and the
// all-in-one mode that judges a batch with it.
type Judge interface {
	// ScriptedByFixtures reports whether the judge is the offline one (--judge scripted)
	// with no file of recorded answers (--scripted-answers): it answers from its fixtures.
	ScriptedByFixtures() bool
	// UseAnswers makes the offline judge answer from the recorded answers in the file p,
	// as --scripted-answers p does.
	UseAnswers(p string)
	// SetFixture sets the offline judge's fixture of the flag named flag
	// (kind.Fixture.Flag) as the flag would; "" leaves it with none.
	SetFixture(flag, setting string)
	// JudgeBatch judges b in the all-in-one mode (an embedded NATS server and file storage
	// in a temporary folder, concurrency messages in flight per service, progress on
	// standard error unless quiet) and returns its final job records. Its exit status, when
	// the judge or the services cannot start, is the CLI's.
	JudgeBatch(ctx context.Context, b *batch.Batch, concurrency int, quiet bool) ([]*records.Job, error)
}

// OpenState opens the state its flags name, calls fn with it and closes it.
type OpenState func(ctx context.Context, fn func(CommandState) error) error

// CommandState is a batch's recorded state as a kind's command reads and changes it.
type CommandState struct {
	Buckets kv.Buckets
	Store   blob.Store
	// Pub publishes what the command records (a spot-check, a reset).
	Pub Publisher
	// Applied, for a state folder opened with its aggregator, waits until the
	// aggregator has applied what was published; nil when services elsewhere apply it
	// in their own time.
	Applied func(context.Context) error
}

// Publisher publishes events' messages (bus.Messages) on their subjects.
type Publisher interface {
	Publish(topic string, msgs ...*message.Message) error
}

// StateCommanding is a kind with CLI subcommands over the CLI's env: ones that read or
// change a batch's recorded state (rubric's `spotcheck`, `view-reset`) or judge a batch
// of their own with the CLI's judge flags (ab's `calibrate`); cmd/tribunal adds them
// beside Commanding's, through registry.Commands. Their exit status is a cli.ExitError.
type StateCommanding interface {
	StateCommands(env CommandEnv) []*cobra.Command
}

// Prompting is a kind whose jobs may wait for a person at the terminal of `tribunal run`
// (rubric's HE-2 spot-check of an interactive run). The run opens each such kind's prompt
// over the batch's state once it is submitted and steps it from its progress report;
// lines are standard input's, read by the run and closed when it ends. The run has one
// terminal: a prompt takes a line only while its question is open, and drops what was
// typed while none was.
type Prompting interface {
	Prompt(lines <-chan string, out io.Writer, st CommandState, tenant, batch string) Prompt
}

// Prompt is a kind's question on the run's terminal. Step asks what waits for a person,
// records an answer that has come in, and returns without waiting for one.
type Prompt interface {
	Step(ctx context.Context)
}

// GoldExporting is a kind whose reviewed jobs make a calibration set of known answers
// (ab's, which `tribunal calibrate` reads): `tribunal review --export-gold` writes it into
// dir from the batch's jobs (each kind takes its own) and says what it wrote and which of
// its reviewed jobs it left out, and why. A kind that is not GoldExporting has no set
// calibrate reads; its reviewed jobs are reported as skipped for that.
type GoldExporting interface {
	ExportGold(ctx context.Context, store blob.Store, jobs []*records.Job, dir string) (GoldExport, error)
}

// GoldExport is what a kind's ExportGold wrote and left out of a gold set.
type GoldExport struct {
	// Written counts the ACs written.
	Written int
	// Skipped are the kind's reviewed ACs left out, each with why.
	Skipped []GoldSkip
}

// GoldSkip is a reviewed AC a gold set leaves out. Why is the same words for every AC
// left out for one reason, so a report counts them by it.
type GoldSkip struct {
	AC  string
	Why string
}
