// Command fake-llm serves a fake OpenAI-compatible chat-completions API that answers every
// request with a valid verdict after a fixed latency, so judge throughput can be measured
// without a model (docs/benchmarks.md). It is a load-test tool, kept out of the tribunal
// binary so that no production build carries a fake model.
//
//	go run ./cmd/fake-llm --listen 127.0.0.1:18080 --latency 200ms
package main

import (
	"bufio"
	"context"
	"encoding/json"
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
	timeline := flag.String("timeline", "", "on exit, write each chat request's arrival and end (Unix nanoseconds) here as JSON lines, to see how many calls a client kept in flight over time")
	slotA := flag.Float64("slot-a", -1, "answer slot A on this share of the calls and B on the rest, whatever the artifacts say: a judge with a fixed position bias, for trying tribunal report and calibrate (default: off)")
	batchLatency := flag.Duration("batch-latency", 0, "how long a provider batch (POST /v1/batches) takes from creation to completed")
	batchExpire := flag.Bool("batch-expire", false, "end every provider batch expired, its requests unanswered")
	flag.Parse()
	opts := fakellm.Options{Latency: *latency, MaxConcurrent: *maxConcurrent, BatchLatency: *batchLatency, BatchExpire: *batchExpire}
	if *slotA >= 0 {
		if *slotA > 1 {
			fmt.Fprintf(os.Stderr, "fake-llm: --slot-a %v: want a share in [0, 1]\n", *slotA)
			os.Exit(2)
		}
		opts.Respond = fakellm.SlotA(*slotA)
	}
	if err := serve(*listen, opts, *timeline); err != nil {
		fmt.Fprintln(os.Stderr, "fake-llm:", err)
		os.Exit(1)
	}
}

func serve(listen string, opts fakellm.Options, timeline string) error {
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
	if timeline == "" {
		return nil
	}
	return writeTimeline(timeline, s.Records())
}

// timelineEntry is one chat request in the --timeline file.
type timelineEntry struct {
	N     int   `json:"n"`
	Start int64 `json:"start_unix_ns"`
	End   int64 `json:"end_unix_ns"`
}

func writeTimeline(path string, records []fakellm.Record) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("timeline: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	for _, r := range records {
		e := timelineEntry{N: r.N, Start: r.Start.UnixNano()}
		if !r.End.IsZero() {
			e.End = r.End.UnixNano()
		}
		if err := enc.Encode(e); err != nil {
			f.Close()
			return fmt.Errorf("timeline %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("timeline %s: %w", path, err)
	}
	return f.Close()
}
