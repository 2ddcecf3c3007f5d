package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// benchReport is what `tribunal bench` measures. The process figures cover what a user of
// `tribunal run` waits for: loading the batch, start-up, submission, the pipeline and
// clean-up; writing the generated batch files and reading latencies back are the bench's
// own work and count in neither.
type benchReport struct {
	ACs          int     `json:"acs"`
	Seconds      float64 `json:"seconds"`
	ACsPerSecond float64 `json:"acs_per_second"`
	SubmitSecs   float64 `json:"submit_seconds"`
	// ProcessSecs is the whole process; PipelineSecs (= Seconds) runs from the start of
	// the submission to the batch's completion.
	ProcessSecs  float64 `json:"process_seconds"`
	PipelineSecs float64 `json:"pipeline_seconds"`
	StartupSecs  float64 `json:"startup_seconds"`
	CleanupSecs  float64 `json:"cleanup_seconds"`
	// IdealSecs is the judge-bound ideal N x latency / calls in flight, and Efficiency
	// IdealSecs / ProcessSecs (PipelineEfficiency the same over the pipeline alone); all
	// zero when the judge's latency is not known (an instant scripted judge, or
	// --judge openai without --model-latency).
	IdealSecs          float64 `json:"ideal_seconds"`
	Efficiency         float64 `json:"efficiency"`
	PipelineEfficiency float64 `json:"pipeline_efficiency"`
	CallsInFlight      int     `json:"calls_in_flight"`
	ModelLatencyMillis float64 `json:"model_latency_ms"`
	// CPUSecs is the CPU time (user and system) the process spent over ProcessSecs, a
	// figure that a loaded machine changes much less than wall time.
	CPUSecs        float64 `json:"cpu_seconds"`
	CPUMillisPerAC float64 `json:"cpu_ms_per_ac"`
	P50Millis      float64 `json:"p50_ms"`
	P99Millis      float64 `json:"p99_ms"`
	// PeakRSSMiB is the process's resident-set high-water mark at the pipeline's end:
	// start-up, submission and the pipeline. ReadBackPeakRSSMiB is the mark at the
	// process's end, past the bench's own read of every record for the latencies and
	// costs (ReadBackSecs, left out of ProcessSecs and CPUSecs): in one 1,000,000-AC run
	// the in-use heap's highest point came during that read, 217 s of it (the server's
	// block caches of the jobs bucket); in the next the read took 29 s and added nothing.
	PeakRSSMiB         float64 `json:"peak_rss_mib"`
	ReadBackPeakRSSMiB float64 `json:"read_back_peak_rss_mib"`
	ReadBackSecs       float64 `json:"read_back_seconds"`
	// JudgeCalls counts the calls made to the provider; CacheHits the answers served
	// from the judge-call cache instead (an unchanged rerun: all of them).
	JudgeCalls  int    `json:"judge_calls"`
	CacheHits   int    `json:"judge_cache_hits"`
	Judge       string `json:"judge"`
	Concurrency int    `json:"concurrency"`
	CPUs        int    `json:"cpus"`
	GoVersion   string `json:"go"`
	ExitCode    int    `json:"exit_code"`
	// StandingBatch names the earlier batch whose results stand for an unchanged rerun
	// on a kept --data-dir: nothing was judged, and p50/p99 are 0.
	StandingBatch string `json:"standing_batch,omitempty"`
	// Cost is what the batch's judge calls cost at the run's price table, and
	// CostPer1000ACs the same scaled to 1,000 ACs ("unpriced" for a model the table has
	// no price for): the figure docs/benchmarks.md gives per model.
	Cost           records.Costs `json:"cost"`
	CostPer1000ACs string        `json:"cost_per_1000_acs,omitempty"`
}

func newBenchCmd() *cobra.Command {
	var n, concurrency int
	var asJSON, force bool
	var dataDir, cpuProfile, peakHeapProfile string
	var modelLatency time.Duration
	var jf judgeFlags
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Push a generated batch of ab ACs through the all-in-one mode and report throughput, latency, CPU and memory",
		Long: `bench generates N ab ACs over small distinct text artifacts, runs them through the all-in-one
mode (embedded NATS with file storage, the all-in-one blob store, all four services, an
instant scripted judge unless told otherwise) and reports ACs per second, p50/p99 end-to-end
latency (from an AC's submission to its decision), the CPU time and the process's peak
resident memory.

It times the whole process a user of ` + "`tribunal run`" + ` waits for (loading the batch,
start-up, submission, the pipeline, clean-up) as well as the pipeline alone, and compares
the whole process with the judge-bound ideal, N x model latency / calls in flight, as one
efficiency figure. The latency is --scripted-latency for the scripted judge and
--model-latency for --judge openai (the model server's, e.g. cmd/fake-llm --latency);
calls in flight are --concurrency, and for openai at most --judge-concurrency.`,
		Example: `  tribunal bench --acs 10000
  tribunal bench --acs 100000 --json
  tribunal bench --acs 1000 --scripted-latency 200ms
  go run ./cmd/fake-llm --listen 127.0.0.1:18080 --latency 200ms &
  tribunal bench --acs 1000 --judge openai --judge-model fake --openai-base-url http://127.0.0.1:18080/v1 \
      --judge-concurrency 64 --model-latency 200ms --json`,
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
			if modelLatency < 0 {
				return exitError{2, fmt.Errorf("--model-latency must not be negative")}
			}
			r, err := runBench(cmd.Context(), n, concurrency, dataDir, modelLatency, &jf, force)
			if err != nil {
				return err
			}
			if asJSON {
				return writeJSON(os.Stdout, r)
			}
			fmt.Printf("ACs:            %d\nwhole process:  %.2f s (start-up %.2f s, clean-up %.2f s)\npipeline:       %.2f s (submit %.2f s)\nthroughput:     %.0f ACs/s\n",
				r.ACs, r.ProcessSecs, r.StartupSecs, r.CleanupSecs, r.PipelineSecs, r.SubmitSecs, r.ACsPerSecond)
			if r.IdealSecs > 0 {
				fmt.Printf("ideal:          %.2f s (%d x %.0f ms / %d in flight)\nefficiency:     %.0f %% (pipeline alone %.0f %%)\n",
					r.IdealSecs, r.ACs, r.ModelLatencyMillis, r.CallsInFlight, 100*r.Efficiency, 100*r.PipelineEfficiency)
			}
			fmt.Printf("CPU:            %.2f s (%.2f ms per AC)\nlatency p50:    %.0f ms\nlatency p99:    %.0f ms\npeak RSS:       %.0f MiB (%.0f MiB with the read-back of the records, %.1f s)\njudge:          %s (%d calls, %d cached)\nconcurrency:    %d per service, %d CPUs, %s\n",
				r.CPUSecs, r.CPUMillisPerAC, r.P50Millis, r.P99Millis, r.PeakRSSMiB, r.ReadBackPeakRSSMiB, r.ReadBackSecs, r.Judge, r.JudgeCalls, r.CacheHits, r.Concurrency, r.CPUs, r.GoVersion)
			if t := r.Cost.Total; !t.Zero() {
				fmt.Printf("cost:           %s (tokens %d prompt / %d completion), per 1,000 ACs %s\n", t, t.PromptTokens, t.CompletionTokens, r.CostPer1000ACs)
			}
			return nil
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&n, "acs", 10000, "number of ACs")
	fs.IntVar(&concurrency, "concurrency", 64, "messages in flight per service")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON")
	fs.StringVar(&dataDir, "data-dir", "", "work folder (default: a temporary folder, removed afterwards)")
	fs.BoolVar(&force, "rerun", false, rerunFlagHelp)
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile here (go tool pprof)")
	fs.StringVar(&peakHeapProfile, "peak-heapprofile", "", "write a heap profile here each time the in-use heap reaches a new high (go tool pprof)")
	fs.DurationVar(&modelLatency, "model-latency", 0, "openai: the model server's response time, for the judge-bound ideal (the scripted judge uses --scripted-latency)")
	jf.register(fs)
	return cmd
}

func runBench(ctx context.Context, n, concurrency int, dataDir string, modelLatency time.Duration, jf *judgeFlags, force bool) (*benchReport, error) {
	if n <= 0 {
		return nil, exitError{2, fmt.Errorf("--acs must be positive")}
	}
	if n > batch.MaxACs {
		// Refused before a file is written: the batch would be refused once loaded.
		return nil, exitError{2, fmt.Errorf("--acs %d: a batch has at most %d ACs (events.MaxBatchSize)", n, batch.MaxACs)}
	}
	// The generated batch lives apart from the data folder, as a user's batch would: the
	// clean-up timed below removes only what tribunal itself wrote.
	batchDir := ""
	ephemeral := dataDir == ""
	if ephemeral {
		d, err := os.MkdirTemp("", "tribunal-bench-batch-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		batchDir = d
	} else {
		batchDir = filepath.Join(dataDir, "batch")
	}
	if err := writeBenchFiles(batchDir, n); err != nil {
		return nil, err
	}
	telemetry.Reset()

	cpu0, start := cpuTime(), time.Now()
	b, err := batch.Load(batchDir)
	if err != nil {
		return nil, err
	}
	work := dataDir
	if ephemeral {
		if work, err = os.MkdirTemp("", "tribunal-bench-"); err != nil {
			return nil, err
		}
		defer os.RemoveAll(work)
	}
	// The path `tribunal run` takes: an unchanged rerun on a kept folder is answered by
	// the batch whose results stand, judged anew only with --rerun.
	a := &allInOne{batch: b, tenant: "bench", dataDir: work, ephemeral: ephemeral, concurrency: concurrency, jf: jf, force: force,
		notes: os.Stderr, options: map[string]string{"command": "bench"}}
	closed := false
	defer func() {
		if !closed {
			a.Close()
		}
	}()
	pipelineStart := time.Now()
	if err := a.open(ctx); err != nil {
		return nil, err
	}
	applyMemoryLimit(memoryLimitFor(n))
	res, standing := a.standing(ctx)
	var submitted time.Duration
	if standing != nil {
		a.standsNote(standing)
		submitted = time.Since(pipelineStart)
	} else {
		if err := a.start(ctx); err != nil {
			return nil, err
		}
		s, err := a.submit(ctx, client.NewBatchID(b))
		if err != nil {
			return nil, err
		}
		submitted = time.Since(pipelineStart)
		comp, err := client.Watch(ctx, a.env.Running.Buckets, s.Tenant, s.BatchID, 20*time.Millisecond, func(client.Progress) {})
		if err != nil {
			return nil, err
		}
		a.remember(s.BatchID, comp)
		// The bench reads no results back (run does, to print them): what it measures
		// is the pipeline and the process around it, as before.
		res = &client.Results{Tenant: s.Tenant, BatchID: s.BatchID, Summary: comp.Summary, Judges: comp.Judges}
	}
	pipelineEnd := time.Now()
	pipelinePeak, cpuReadBack := peakRSSMiB(), cpuTime()
	// Stream the records: holding 100,000 full job records here would make the bench
	// measure its own bookkeeping instead of tribunal's peak memory. A batch whose
	// results stand was decided by an earlier process: its latencies are not this one's.
	lat := make([]float64, 0, n)
	judgeName := ""
	if len(res.Judges) > 0 {
		judgeName = res.Judges[0]
	}
	var costs records.Costs
	if standing == nil {
		err = records.New(a.env.Running.Buckets).EachJob(ctx, res.Tenant, res.BatchID, func(r *records.Job) error {
			lat = append(lat, float64(r.DecidedAt.Sub(r.SubmittedAt).Microseconds())/1000)
			costs.Add(r)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("bench latencies: %w", err)
		}
	}
	readBack := time.Since(pipelineEnd)
	cpuReadBack = cpuTime() - cpuReadBack
	cleanupStart := time.Now()
	closed = true
	a.Close()
	if ephemeral {
		if err := os.RemoveAll(work); err != nil {
			return nil, err
		}
	}
	end := time.Now()
	cpu := cpuTime() - cpu0 - cpuReadBack

	sort.Float64s(lat)
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return lat[min(len(lat)-1, int(p*float64(len(lat))))]
	}
	pipeline := pipelineEnd.Sub(pipelineStart)
	process := end.Sub(start) - readBack
	m := telemetry.Default()
	r := &benchReport{
		ACs: n, Seconds: pipeline.Seconds(), ACsPerSecond: float64(n) / pipeline.Seconds(), SubmitSecs: submitted.Seconds(),
		ProcessSecs: process.Seconds(), PipelineSecs: pipeline.Seconds(), StartupSecs: pipelineStart.Sub(start).Seconds(),
		CleanupSecs: end.Sub(cleanupStart).Seconds(), CPUSecs: cpu.Seconds(), CPUMillisPerAC: float64(cpu.Microseconds()) / 1000 / float64(n),
		P50Millis: pct(0.50), P99Millis: pct(0.99), PeakRSSMiB: pipelinePeak, Judge: judgeName,
		ReadBackPeakRSSMiB: peakRSSMiB(), ReadBackSecs: readBack.Seconds(),
		JudgeCalls: int(m.Value("tribunal_judge_calls_total")), CacheHits: int(m.Value("tribunal_judge_cache_hits_total")),
		Concurrency: concurrency, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), ExitCode: res.Summary.ExitCode,
	}
	if standing != nil {
		r.StandingBatch = standing.Batch
	}
	r.Cost = costs
	switch t := costs.Total; {
	case t.Priced > 0:
		r.CostPer1000ACs = (t.Cost * 1000 / price.Money(n)).String()
		if t.Unpriced > 0 {
			r.CostPer1000ACs += " + unpriced calls"
		}
	case t.Unpriced > 0:
		r.CostPer1000ACs = "unpriced"
	}
	latency, inFlight := judgeBound(jf, concurrency, modelLatency)
	if latency > 0 {
		r.CallsInFlight, r.ModelLatencyMillis = inFlight, float64(latency.Microseconds())/1000
		r.IdealSecs = float64(n) * latency.Seconds() / float64(inFlight)
		r.Efficiency, r.PipelineEfficiency = r.IdealSecs/r.ProcessSecs, r.IdealSecs/r.PipelineSecs
	}
	return r, nil
}

// judgeBound is the judge's latency and how many calls the all-in-one mode keeps in
// flight: the judge service's --concurrency, which the openai provider caps at its own
// --judge-concurrency. The latency is zero when unknown.
func judgeBound(jf *judgeFlags, concurrency int, modelLatency time.Duration) (time.Duration, int) {
	if jf.provider == "openai" {
		return modelLatency, max(1, min(concurrency, jf.concurrency))
	}
	return jf.scriptedLatency, max(1, concurrency)
}

// cpuTime is the CPU time (user and system) this process has used so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// writeBenchFiles writes the generated batch: n ab ACs over 2n small distinct files.
func writeBenchFiles(dir string, n int) error {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: bench\nacs:\n")
	for i := 0; i < n; i++ {
		// Spread over folders: one folder of 20,000 files makes every lookup slow on
		// some file systems, which would measure the disk instead of tribunal.
		sub := filepath.Join(dir, strconv.Itoa(i%100))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		for _, side := range []string{"ours", "ref"} {
			p := filepath.Join(sub, side+"-"+strconv.Itoa(i)+".md")
			if err := os.WriteFile(p, []byte(fmt.Sprintf("# %s %d\nGenerated artifact %d for the load test.\n", side, i, i)), 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: generated\n    ours: %d/ours-%d.md\n    reference: %d/ref-%d.md\n", i, i%100, i, i%100, i)
	}
	return os.WriteFile(filepath.Join(dir, "batch.yaml"), []byte(sb.String()), 0o644)
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
