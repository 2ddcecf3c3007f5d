package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab/calibration"
)

// TestCalibrateScripted: the shipped set with the scripted judge's recorded answers
// passes offline, and says so.
func TestCalibrateScripted(t *testing.T) {
	set := filepath.Join(repoRoot(t), "examples", "calibration")
	out, errOut, code := execArgusCmd(t, newCalibrateCmd(), set, "--quiet")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"calibration of judge scripted/recorded-answers.json", "): PASS", "accuracy              29/29 = 1.000",
		"passed: every judge meets every threshold"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = execArgusCmd(t, newCalibrateCmd(), set, "--json")
	var res calibration.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 0 || !res.Pass || len(res.Judges) != 1 || len(res.Judges[0].Misses) != 0 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
}

// TestCalibrateOutsideTheCheckout: from a folder with no examples/, the shipped set comes
// from the binary, and its recorded answers pass.
func TestCalibrateOutsideTheCheckout(t *testing.T) {
	out, errOut, code := run(t, t.TempDir(), "calibrate")
	if code != 0 || !strings.Contains(errOut, "calibration set: the shipped one (examples/calibration, from the binary)") ||
		!strings.Contains(out, "passed: every judge meets every threshold") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}

// TestCalibrateBiasedJudge: against a local OpenAI-compatible server that answers slot A
// on 70% of its calls whatever the pair, calibrate exits 1 and its report says why: the
// figures below their thresholds, and the slot-A preference it measured.
func TestCalibrateBiasedJudge(t *testing.T) {
	fake := fakellm.New(fakellm.Options{Respond: fakellm.SlotA(0.7)})
	t.Cleanup(fake.Close)
	set := filepath.Join(repoRoot(t), "examples", "calibration")
	judge := []string{"--judge", "openai", "--openai-base-url", fake.BaseURL(), "--judge-model", "fake-biased", "--judge-attempts", "1"}
	out, errOut, code := execArgusCmd(t, newCalibrateCmd(), append([]string{set, "--quiet"}, judge...)...)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{
		"calibration of judge openai/fake-biased", "): FAIL", "why it failed:",
		"accuracy", "below the minimum 0.85", "tie discipline 0.000 (0/7) has its interval's lower bound 0.000 below the minimum 0.6", "min 0.6 on the lower bound: fail",
		"failed: judge openai/fake-biased failed calibration",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	fake.Reset()
	out, _, code = execArgusCmd(t, newCalibrateCmd(), append([]string{set, "--json"}, judge...)...)
	var res calibration.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil || code != 1 || res.Pass || len(res.Judges) != 1 {
		t.Fatalf("--json: exit %d, %v\n%s", code, err, out)
	}
	j := res.Judges[0]
	// The fake answered A on exactly 70 of every 100 calls; the set's 29 calls are the
	// first of its sequence since the reset, so the report must measure their share.
	a := 0
	for n := 1; n <= 29; n++ {
		if (n*37)%100 < 70 {
			a++
		}
	}
	if j.PositionBias.SlotA.K != a || j.PositionBias.SlotA.N != 29 || j.PositionBias.Ties != 0 {
		t.Errorf("slot A %s, want %d/29 from the fake", j.PositionBias.SlotA, a)
	}
	failed := map[string]bool{}
	for _, c := range j.Checks {
		failed[c.Name] = c.Status == calibration.StatusFail
	}
	for _, name := range []string{calibration.FigureAccuracy, calibration.FigureTieDiscipline} {
		if !failed[name] {
			t.Errorf("%s did not fail: %+v", name, j.Checks)
		}
	}
}
