// Command fake-llm serves a fake OpenAI-compatible chat-completions API that answers every
// request with a valid verdict after a fixed latency, so judge throughput can be measured
// without a model (docs/benchmarks.md). It is a load-test tool, kept out of the tribunal
// binary so that no production build carries a fake model.
//
//	go run ./cmd/fake-llm --listen 127.0.0.1:18080 --latency 200ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:18080", "address to listen on")
	latency := flag.Duration("latency", 200*time.Millisecond, "time before each answer")
	maxConcurrent := flag.Int("max-concurrent", 0, "the server's own capacity (0: unlimited)")
	slotA := flag.Float64("slot-a", -1, "answer slot A on this share of the calls and B on the rest, whatever the artifacts say: a judge with a fixed position bias, for trying tribunal report and calibrate (default: off)")
	flag.Parse()
	opts := fakellm.Options{Latency: *latency, MaxConcurrent: *maxConcurrent}
	if *slotA >= 0 {
		if *slotA > 1 {
			fmt.Fprintf(os.Stderr, "fake-llm: --slot-a %v: want a share in [0, 1]\n", *slotA)
			os.Exit(2)
		}
		opts.Respond = fakellm.SlotA(*slotA)
	}
	if err := serve(*listen, opts); err != nil {
		fmt.Fprintln(os.Stderr, "fake-llm:", err)
		os.Exit(1)
	}
}

func serve(listen string, opts fakellm.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := fakellm.NewUnstarted(opts)
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "fake OpenAI-compatible API on http://%s/v1 (latency %s); it keeps every request in memory: bounded load runs only\n", ln.Addr(), opts.Latency)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
