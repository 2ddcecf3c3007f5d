package deploy

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// startedRatios are the gauges measured over a completed batch: before one they exist
// as NaN, since a 0 would claim a judge that always picks slot B, never flips or never
// agrees (pkg/telemetry, baseline.go).
var startedRatios = []string{"tribunal_judge_slot_a_ratio", "tribunal_judge_flip_ratio", "tribunal_judge_panel_agreement_ratio", "tribunal_panel_alpha"}

// TestDashboardMetricsExistAtStart: a fresh `tribunal serve all` (with `serve nats`, and
// the ingress every deployment runs beside it) exposes every metric the Grafana
// dashboard queries before any batch, each at zero (build_info 1; the batch ratios NaN),
// so no panel of a fresh deployment says "No data". `serve all` alone exposes all of
// them but the ingress's own answer count.
func TestDashboardMetricsExistAtStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tribunal and runs serve all")
	}
	const file = "deploy/grafana/tribunal.json"
	ps, used := CheckDashboard(file, read(t, file), telemetry.MetricLabels())
	if len(ps) > 0 {
		t.Fatalf("%s:\n%s", file, Report(ps))
	}
	bin, remove, err := tribunalbin.Build("../cmd/tribunal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	dir := t.TempDir()
	natsAddr := freeport.Addr(t)
	blob := "file://" + filepath.Join(dir, "blobs")
	startProc(t, bin, "serve", "nats", "--listen", natsAddr, "--store", filepath.Join(dir, "nats"))
	allHealth, ingressHealth := freeport.Addr(t), freeport.Addr(t)
	startProc(t, bin, "serve", "all", "--nats", "nats://"+natsAddr, "--blob", blob, "--health", allHealth)
	tok, err := tokens.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tokensFile := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(tokensFile, []byte(`{"`+tok+`": "default"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	startProc(t, bin, "serve", "ingress", "--nats", "nats://"+natsAddr, "--blob", blob, "--health", ingressHealth,
		"--ingress-addr", freeport.Addr(t), "--tokens", tokensFile)

	var all, ingress map[string]*dto.MetricFamily
	poll.Until(t, 90*time.Second, "both processes ready, the backlog reported", func() (bool, string) {
		var err error
		if all, err = scrape(allHealth); err != nil {
			return false, err.Error()
		}
		if ingress, err = scrape(ingressHealth); err != nil {
			return false, err.Error()
		}
		// The backlog is reported once the service's reporter is elected.
		return len(all["tribunal_consumer_pending"].GetMetric()) == 4, fmt.Sprintf("%d backlog series", len(all["tribunal_consumer_pending"].GetMetric()))
	})
	for name := range used {
		fam := all[name]
		if fam == nil && name == "tribunal_ingress_requests_total" {
			fam = ingress[name]
		}
		if fam == nil || len(fam.GetMetric()) == 0 {
			t.Errorf("%s: on the dashboard, not exported by a fresh serve all", name)
			continue
		}
		for _, m := range fam.GetMetric() {
			v, want := value(m), 0.0
			switch {
			case name == "tribunal_build_info":
				want = 1
			case slices.Contains(startedRatios, name):
				if !math.IsNaN(v) {
					t.Errorf("%s%s = %v before any batch, want NaN", name, seriesLabels(m), v)
				}
				continue
			}
			if v != want {
				t.Errorf("%s%s = %v at start, want %v", name, seriesLabels(m), v, want)
			}
		}
	}
	if len(used) != len(telemetry.MetricLabels()) {
		t.Errorf("the dashboard uses %d of the %d metrics", len(used), len(telemetry.MetricLabels()))
	}
}

// startProc runs the tribunal binary with args until the test ends (SIGTERM, as an
// orchestrator stops it).
func startProc(t *testing.T, bin string, args ...string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "TRIBUNAL_EPHEMERAL=true")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(45 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("%v:\n%s", args, out.String())
		}
	})
}

// scrape reads the Prometheus text a process serves on its health address, once it is
// ready.
func scrape(addr string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/readyz: %s", addr, resp.Status)
	}
	resp, err = http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// value is a series' counter or gauge value, or its histogram's sample count.
func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return math.NaN()
}

func seriesLabels(m *dto.Metric) string {
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, l.GetName()+"="+l.GetValue())
	}
	return "{" + strings.Join(ls, ",") + "}"
}
