package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingest"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// benchReport is what `tribunal bench` measures.
type benchReport struct {
	ACs          int     `json:"acs"`
	Seconds      float64 `json:"seconds"`
	ACsPerSecond float64 `json:"acs_per_second"`
	SubmitSecs   float64 `json:"submit_seconds"`
	P50Millis    float64 `json:"p50_ms"`
	P99Millis    float64 `json:"p99_ms"`
	PeakRSSMiB   float64 `json:"peak_rss_mib"`
	Judge        string  `json:"judge"`
	Concurrency  int     `json:"concurrency"`
	CPUs         int     `json:"cpus"`
	GoVersion    string  `json:"go"`
	ExitCode     int     `json:"exit_code"`
}

func newBenchCmd() *cobra.Command {
	var n, concurrency int
	var asJSON bool
	var dataDir, cpuProfile, peakHeapProfile string
	var jf judgeFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Push a generated batch of ab ACs through the all-in-one mode and report throughput, latency and memory",
		Long: `bench generates N ab ACs over small distinct text artifacts, runs them through the all-in-one
mode (embedded NATS with file storage, file blob store, all four services, an instant scripted
judge unless told otherwise) and reports ACs per second, p50/p99 end-to-end latency (from an
AC's submission to its decision) and the process's peak resident memory.`,
		Example: `  tribunal bench --acs 10000
  tribunal bench --acs 100000 --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return err
				}
				defer pprof.StopCPUProfile()
			}
			if peakHeapProfile != "" {
				stop := watchPeakHeap(peakHeapProfile, time.Second)
				defer stop()
			}
			r, err := runBench(cmd.Context(), n, concurrency, dataDir, &jf)
			if err != nil {
				return err
			}
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				return enc.Encode(r)
			}
			fmt.Printf("ACs:            %d\nwall time:      %.2f s (submit %.2f s)\nthroughput:     %.0f ACs/s\nlatency p50:    %.0f ms\nlatency p99:    %.0f ms\npeak RSS:       %.0f MiB\njudge:          %s\nconcurrency:    %d per service, %d CPUs, %s\n",
				r.ACs, r.Seconds, r.SubmitSecs, r.ACsPerSecond, r.P50Millis, r.P99Millis, r.PeakRSSMiB, r.Judge, r.Concurrency, r.CPUs, r.GoVersion)
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&n, "acs", 10000, "number of ACs")
	fs.IntVar(&concurrency, "concurrency", 64, "messages in flight per service")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&dataDir, "data-dir", "", "work folder (default: a temporary folder, removed afterwards)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile here (go tool pprof)")
	fs.StringVar(&peakHeapProfile, "peak-heapprofile", "", "write a heap profile here each time the in-use heap reaches a new high (go tool pprof)")
	jf.register(fs)
	return cmd
}

func runBench(ctx context.Context, n, concurrency int, dataDir string, jf *judgeFlags) (*benchReport, error) {
	if n <= 0 {
		return nil, exitError{2, fmt.Errorf("--acs must be positive")}
	}
	ephemeral := dataDir == ""
	if ephemeral {
		d, err := os.MkdirTemp("", "tribunal-bench-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dataDir = d
	}
	b, err := writeBenchBatch(filepath.Join(dataDir, "batch"), n)
	if err != nil {
		return nil, err
	}
	env, err := startEmbedded(ctx, dataDir, ephemeral, "", concurrency, jf, ingest.FetchOptions{}, nil, nil)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	start := time.Now()
	sub := &client.Submitter{Pub: env.Running.Pub, Store: env.Store}
	s, err := sub.Submit(ctx, b, "bench", client.NewBatchID(b))
	if err != nil {
		return nil, err
	}
	submitted := time.Since(start)
	comp, err := client.Watch(ctx, env.Running.Buckets, s.Tenant, s.BatchID, 20*time.Millisecond, func(client.Progress) {})
	if err != nil {
		return nil, err
	}
	wall := time.Since(start)
	// Stream the records: holding 100,000 full job records here would make the bench
	// measure its own bookkeeping instead of tribunal's peak memory.
	lat := make([]float64, 0, n)
	judgeName := ""
	err = records.New(env.Running.Buckets).EachJob(ctx, s.Tenant, s.BatchID, func(r *records.Job) error {
		lat = append(lat, float64(r.DecidedAt.Sub(r.SubmittedAt).Microseconds())/1000)
		if judgeName == "" && len(r.Judges) > 0 {
			judgeName = r.Judges[0]
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench latencies: %w", err)
	}
	sort.Float64s(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	return &benchReport{
		ACs: n, Seconds: wall.Seconds(), ACsPerSecond: float64(n) / wall.Seconds(), SubmitSecs: submitted.Seconds(),
		P50Millis: pct(0.50), P99Millis: pct(0.99), PeakRSSMiB: peakRSSMiB(), Judge: judgeName,
		Concurrency: concurrency, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), ExitCode: comp.Summary.ExitCode,
	}, nil
}

func writeBenchBatch(dir string, n int) (*batch.Batch, error) {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: bench\nacs:\n")
	for i := 0; i < n; i++ {
		// Spread over folders: one folder of 20,000 files makes every lookup slow on
		// some file systems, which would measure the disk instead of tribunal.
		sub := filepath.Join(dir, strconv.Itoa(i%100))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return nil, err
		}
		for _, side := range []string{"ours", "ref"} {
			p := filepath.Join(sub, side+"-"+strconv.Itoa(i)+".md")
			if err := os.WriteFile(p, []byte(fmt.Sprintf("# %s %d\nGenerated artifact %d for the load test.\n", side, i, i)), 0o644); err != nil {
				return nil, err
			}
		}
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: generated\n    ours: %d/ours-%d.md\n    reference: %d/ref-%d.md\n", i, i%100, i, i%100, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(sb.String()), 0o644); err != nil {
		return nil, err
	}
	return batch.Load(dir)
}

// peakRSSMiB reads the process's resident-set high-water mark (Linux).
func peakRSSMiB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseFloat(f[1], 64)
				return kb / 1024
			}
		}
	}
	return 0
}

// watchPeakHeap samples the in-use heap and rewrites a heap profile whenever it reaches a new
// high. A profile taken at exit shows what is live at the end, not what made the peak, and
// the 100,000-AC peak is a transient early in the run.
func watchPeakHeap(path string, every time.Duration) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var peak uint64
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapInuse <= peak {
				continue
			}
			peak = ms.HeapInuse
			f, err := os.Create(path)
			if err != nil {
				slog.Warn("peak heap profile", "path", path, "err", err)
				return
			}
			if err := pprof.WriteHeapProfile(f); err != nil {
				slog.Warn("peak heap profile", "path", path, "err", err)
			}
			f.Close()
			slog.Info("peak heap profile written", "path", path, "heap_inuse_mib", peak>>20)
		}
	}()
	return func() { close(done); <-finished }
}
