package main

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

func newDevCmd() *cobra.Command {
	dev := &cobra.Command{
		Use:     "dev",
		Short:   "Tools for load tests and development",
		Example: "  tribunal dev fake-llm --latency 500ms",
		Hidden:  true,
	}
	var listen string
	var latency time.Duration
	var maxConcurrent int
	var slotA float64
	fake := &cobra.Command{
		Use:   "fake-llm",
		Short: "Serve a fake OpenAI-compatible chat-completions API with a fixed latency (load tests only)",
		Long: `fake-llm answers every chat completion with a valid ab verdict after --latency, so judge
throughput can be measured without a model; with --slot-a it is a judge with a fixed
position bias, for trying tribunal report and tribunal calibrate. It keeps every request
in memory for tests: use it for bounded runs only.`,
		Example: `  tribunal dev fake-llm --listen 127.0.0.1:18080 --latency 200ms &
  tribunal bench --acs 2000 --judge openai --judge-model fake --openai-base-url http://127.0.0.1:18080/v1 --judge-concurrency 8`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if slotA < 0 || slotA > 1 {
				return exitError{2, fmt.Errorf("--slot-a %v: want a share in [0, 1]", slotA)}
			}
			opts := fakellm.Options{Latency: latency, MaxConcurrent: maxConcurrent}
			if cmd.Flags().Changed("slot-a") {
				opts.Respond = fakellm.SlotA(slotA)
			}
			s := fakellm.NewUnstarted(opts)
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return err
			}
			srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
			fmt.Fprintf(os.Stderr, "fake OpenAI-compatible API on http://%s/v1 (latency %s)\n", ln.Addr(), latency)
			go func() {
				<-cmd.Context().Done()
				_ = srv.Close()
			}()
			if err := srv.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		},
	}
	fake.Flags().StringVar(&listen, "listen", "127.0.0.1:18080", "address to listen on")
	fake.Flags().DurationVar(&latency, "latency", 200*time.Millisecond, "time before each answer")
	fake.Flags().IntVar(&maxConcurrent, "max-concurrent", 0, "the server's own capacity (0: unlimited)")
	fake.Flags().Float64Var(&slotA, "slot-a", 1, "answer slot A on this share of the calls and B on the rest, whatever the artifacts say: a judge with a fixed position bias (tribunal calibrate and report show it)")
	dev.AddCommand(fake)
	return dev
}
