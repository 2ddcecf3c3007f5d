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
	flag.Parse()
	if err := serve(*listen, *latency, *maxConcurrent); err != nil {
		fmt.Fprintln(os.Stderr, "fake-llm:", err)
		os.Exit(1)
	}
}

func serve(listen string, latency time.Duration, maxConcurrent int) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := fakellm.NewUnstarted(fakellm.Options{Latency: latency, MaxConcurrent: maxConcurrent})
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(os.Stderr, "fake OpenAI-compatible API on http://%s/v1 (latency %s); it keeps every request in memory: bounded load runs only\n", ln.Addr(), latency)
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
