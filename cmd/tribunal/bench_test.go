package main

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
)

// TestBenchReportsWholeProcess: bench reports the whole process beside the pipeline, the
// CPU it used, the provider calls, and the judge-bound ideal and efficiency for a judge
// of known latency.
func TestBenchReportsWholeProcess(t *testing.T) {
	out, errOut, code := run(t, t.TempDir(), "bench", "--acs", "40", "--concurrency", "8", "--scripted-latency", "20ms", "--json")
	if code != 0 {
		t.Fatalf("bench exit %d: %s", code, errOut)
	}
	var r benchReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench output %q: %v", out, err)
	}
	if r.ACs != 40 || r.JudgeCalls != 40 || r.CacheHits != 0 {
		t.Errorf("acs %d, judge calls %d, cache hits %d; want 40, 40, 0", r.ACs, r.JudgeCalls, r.CacheHits)
	}
	if r.PipelineSecs <= 0 || r.ProcessSecs < r.PipelineSecs+r.StartupSecs || r.Seconds != r.PipelineSecs {
		t.Errorf("process %.3f s, start-up %.3f s, pipeline %.3f s (seconds %.3f): the process holds start-up and pipeline", r.ProcessSecs, r.StartupSecs, r.PipelineSecs, r.Seconds)
	}
	if r.CPUSecs <= 0 || math.Abs(r.CPUMillisPerAC-r.CPUSecs*1000/40) > 1e-6 {
		t.Errorf("cpu %.3f s, %.3f ms per AC", r.CPUSecs, r.CPUMillisPerAC)
	}
	// The pipeline's peak is taken before the bench reads the records back; the mark
	// at the end holds both.
	if r.PeakRSSMiB <= 0 || r.ReadBackPeakRSSMiB < r.PeakRSSMiB || r.ReadBackSecs <= 0 {
		t.Errorf("peak RSS %.1f MiB, %.1f MiB with the read-back of %.3f s", r.PeakRSSMiB, r.ReadBackPeakRSSMiB, r.ReadBackSecs)
	}
	// 40 ACs x 20 ms / 8 calls in flight.
	if r.CallsInFlight != 8 || r.ModelLatencyMillis != 20 || math.Abs(r.IdealSecs-0.1) > 1e-9 {
		t.Errorf("ideal %.3f s from %d in flight at %.0f ms, want 0.1 s from 8 at 20 ms", r.IdealSecs, r.CallsInFlight, r.ModelLatencyMillis)
	}
	if math.Abs(r.Efficiency-r.IdealSecs/r.ProcessSecs) > 1e-9 || r.Efficiency <= 0 || r.Efficiency > 1 {
		t.Errorf("efficiency %.3f, want ideal / process = %.3f", r.Efficiency, r.IdealSecs/r.ProcessSecs)
	}
}

// The ideal's calls in flight: the judge service's concurrency, capped by the openai
// provider's own; the latency is the scripted judge's, or --model-latency for openai.
func TestJudgeBound(t *testing.T) {
	scripted := &judgeFlags{provider: "scripted", scriptedLatency: 30e6, concurrency: 8}
	if l, c := judgeBound(scripted, 64, 200e6); l != 30e6 || c != 64 {
		t.Errorf("scripted: %v, %d; want 30ms, 64", l, c)
	}
	openai := &judgeFlags{provider: "openai", concurrency: 16}
	if l, c := judgeBound(openai, 64, 200e6); l != 200e6 || c != 16 {
		t.Errorf("openai: %v, %d; want 200ms, 16", l, c)
	}
	if _, c := judgeBound(openai, 4, 200e6); c != 4 {
		t.Errorf("openai under --concurrency 4: %d in flight, want 4", c)
	}
}

// TestBenchRefusesTooLargeABatch: a bench of more ACs than a batch may have is refused
// at once, naming the limit and the count, before a file of it is written.
func TestBenchRefusesTooLargeABatch(t *testing.T) {
	dir := t.TempDir()
	_, errOut, code := run(t, dir, "bench", "--acs", "1000001", "--data-dir", dir+"/st")
	if code != 2 || !strings.Contains(errOut, "--acs 1000001: a batch has at most 1000000 ACs") {
		t.Fatalf("bench exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(dir + "/st"); !os.IsNotExist(err) {
		t.Fatalf("bench wrote its folder before refusing: %v", err)
	}
}
