// Command tribunal is the CLI and the all-in-one mode of tribunal: `run` judges a batch
// in one process with an embedded NATS server, `serve` runs one service (or all, or a
// NATS server) as a long-lived process, and submit/watch/results talk to running
// services.
package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/cli"
	_ "github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	_ "github.com/tribunal-dev/tribunal/pkg/blob/s3blob"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// exitError carries a process exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	telemetry.SetVersion(telemetry.ReadBuildVersion(version))
	root := newRoot()
	err := root.ExecuteContext(ctx)
	flushTraces()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintln(os.Stderr, "tribunal:", ee.err)
		}
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "tribunal:", err)
		os.Exit(2)
	}
}

func newRoot() *cobra.Command {
	var logLevel, logFormat string
	root := &cobra.Command{
		Use:   "tribunal",
		Short: "Shared judging infrastructure: blind LLM verdicts over batches of acceptance criteria",
		Long: `tribunal judges batches of acceptance criteria (ACs). Independent services render the
artifacts, run deterministic gates, ask LLM judges for blind verdicts and apply routing and
sign-off rules; they talk only through NATS JetStream events and keep artifacts in
S3-compatible storage.

Start with the all-in-one mode, which needs nothing installed and no API key:

  tribunal run examples/quickstart`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			warnUnknownEnv(cmd.Root(), os.Stderr)
			if err := applyEnv(cmd); err != nil {
				return exitError{2, err}
			}
			if err := setupLogging(logLevel, logFormat); err != nil {
				return err
			}
			return setupTracing(cmd, args)
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn, error")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text or json")
	// One command a line, so that adding one is a one-line change.
	root.AddCommand(
		newRunCmd(),
		newServeCmd(),
		newSubmitCmd(),
		newCancelCmd(),
		newWatchCmd(),
		newResultsCmd(),
		newDiffCmd(),
		newBenchCmd(),
		newVersionCmd(),
		newTenantsCmd(),
		newReviewCmd(),
		newAuditCmd(),
		newRedriveCmd(),
		newRejudgeCmd(),
		newValidateCmd(),
		newReportCmd(),
		newViewCmd(),
		newPruneCmd(),
	)
	// The kinds' own commands (stage.Commanding), before bindEnv names every flag's variables.
	root.AddCommand(kindCommands()...)
	bindEnv(root)
	root.SetFlagErrorFunc(flagError)
	return root
}

// kindCommands are the registered kinds' own commands (stage.Commanding), each exit
// status they return (cli.ExitError) carried as this command's exitError, so that main
// and the tests read one type.
func kindCommands() []*cobra.Command {
	cmds := registry.Commands(commandEnv{})
	for _, c := range cmds {
		carryExit(c)
	}
	return cmds
}

// carryExit makes c and its subcommands return a cli.ExitError as an exitError.
func carryExit(c *cobra.Command) {
	if run := c.RunE; run != nil {
		c.RunE = func(cmd *cobra.Command, args []string) error {
			err := run(cmd, args)
			var ke cli.ExitError
			if errors.As(err, &ke) {
				return exitError{ke.Code, ke.Err}
			}
			return err
		}
	}
	for _, sub := range c.Commands() {
		carryExit(sub)
	}
}

func setupLogging(level, format string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		return exitError{2, fmt.Errorf("--log-level %q: %w", level, err)}
	}
	opts := &slog.HandlerOptions{Level: l}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(os.Stderr, opts)
	case "text":
		h = slog.NewTextHandler(os.Stderr, opts)
	default:
		return exitError{2, fmt.Errorf("--log-format %q: want text or json", format)}
	}
	// Every line logged with a handler's context (the provider's retries included) names
	// its tenant, batch, job and trace.
	slog.SetDefault(telemetry.WithContext(slog.New(h)))
	return nil
}

// shutdownTracing flushes and stops the tracer provider SetupTracing installed.
var shutdownTracing = func(context.Context) error { return nil }

// setupTracing exports spans as the OTEL_* environment asks (telemetry.SetupTracing),
// named after the service a `serve` runs ("tribunal-judge"), else "tribunal".
func setupTracing(cmd *cobra.Command, args []string) error {
	service := "tribunal"
	if cmd.Name() == "serve" && len(args) == 1 && args[0] != "all" {
		service += "-" + args[0]
	}
	instance := os.Getenv("TRIBUNAL_INSTANCE")
	if instance == "" {
		instance, _ = os.Hostname()
	}
	shutdown, err := telemetry.SetupTracing(cmd.Context(), telemetry.TracingConfig{Service: service, Instance: instance})
	if err != nil {
		return exitError{2, err}
	}
	shutdownTracing = shutdown
	return nil
}

// flushTraces sends the spans still buffered before the process exits.
func flushTraces() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdownTracing(ctx); err != nil {
		slog.Warn("traces not flushed", "err", err)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// envList is a comma-separated environment variable as a list (nil when unset).
func envList(name string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

// version is set at build time with -ldflags "-X main.version=..." (the images' release);
// unset, the binary's build information says (telemetry.BuildVersion).
var version = ""

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print the version",
		Example: "  tribunal version",
		Args:    cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), "tribunal", telemetry.Version())
		},
	}
}
