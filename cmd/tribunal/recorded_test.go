package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// TestScriptedCostsNothingWithReason: the scripted judge's calls cost 0 and every output
// says why (recorded answers, no provider asked), never unpriced and never silently
// free; a real model without a price still shows unpriced.
func TestScriptedCostsNothingWithReason(t *testing.T) {
	dir := t.TempDir()
	batchFile := writeCriticBatch(t, dir, 2, "")
	out := filepath.Join(dir, "out")
	stdout, stderr, code := runState(t, dir, "run", batchFile, "--out", out)
	if code != 0 {
		t.Fatalf("scripted run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "cost: 0.00 USD (2 calls at 0: recorded answers, no provider asked)") ||
		!strings.Contains(stdout, "0 (recorded answers)") || strings.Contains(stdout, "unpriced") {
		t.Errorf("the scripted run's costs:\n%s", stdout)
	}
	data, err := os.ReadFile(scriptedResultsPath(t, out))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"recorded_reason": "recorded answers"`) || strings.Contains(string(data), `"usd": "unpriced"`) {
		t.Errorf("the scripted run's results.json:\n%s", data)
	}

	stdout, stderr, code = run(t, dir, "validate", batchFile)
	if code != 0 || !strings.Contains(stdout, "about 0.00 USD (2 calls at 0: recorded answers, no provider asked) at prices") {
		t.Errorf("the scripted estimate: exit %d\n%s\n%s", code, stdout, stderr)
	}

	llm := fakellm.New(fakellm.Options{Respond: answerByKind})
	defer llm.Close()
	t.Setenv("OPENAI_API_KEY", "sk-local")
	out2 := filepath.Join(dir, "out2")
	stdout, stderr, code = runState(t, dir, "run", batchFile, "--judge", "openai", "--judge-model", "my-local-model",
		"--openai-base-url", llm.BaseURL(), "--out", out2)
	if code != 0 {
		t.Fatalf("unpriced run: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stdout, "cost: unpriced") || strings.Contains(stdout, "recorded answers") {
		t.Errorf("an unpriced model's run: want unpriced, never free:\n%s", stdout)
	}
}

// scriptedResultsPath is the one results.json under out.
func scriptedResultsPath(t *testing.T, out string) string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, "*", "results.json"))
	if len(files) != 1 {
		t.Fatalf("results files %v", files)
	}
	return files[0]
}
