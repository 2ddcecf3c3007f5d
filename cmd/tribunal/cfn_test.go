package main

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// cfnProject is a project folder (a git repository's root) with two artifacts, and the
// subfolder the tests run in, so the project root is not the current folder.
func cfnProject(t *testing.T) (root, sub string) {
	t.Helper()
	root = t.TempDir()
	sub = filepath.Join(root, "work")
	for _, d := range []string{filepath.Join(root, ".git"), sub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range map[string]string{"ours.md": "# Sign-up error\nThe email field is required: add an address.\n",
		"reference.md": "# Sign-up error\nSomething went wrong.\n"} {
		if err := os.WriteFile(filepath.Join(sub, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, sub
}

// cfnManifest is the seed's manifest as the tests read it.
type cfnManifest struct {
	ReviewID    string `json:"review_id"`
	Source      string `json:"source"`
	Status      string `json:"status"`
	Comparisons []struct {
		ACID            string            `json:"ac_id"`
		Ours            string            `json:"ours_artifact"`
		Reference       string            `json:"reference_artifact"`
		LabelAssignment map[string]string `json:"label_assignment"`
		RawWinner       string            `json:"raw_winner"`
		Winner          string            `json:"winner"`
		Confidence      *float64          `json:"confidence"`
		Status          string            `json:"status"`
		BlockedReason   string            `json:"blocked_reason"`
	} `json:"comparisons"`
	Suggestions []struct {
		Tag    string `json:"tag"`
		Impact string `json:"impact"`
	} `json:"suggestions"`
}

// manifestsUnder lists every file at or below dir whose path names a manifest or the
// seed's cache folder.
func manifestsUnder(t *testing.T, dir string) []string {
	t.Helper()
	var found []string
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.Contains(p, "manifest") || strings.Contains(p, ".cfn-cache")) {
			found = append(found, p)
		}
		return nil
	})
	return found
}

// readCFN reads the one manifest under the project root's .cfn-cache/manifests.
func readCFN(t *testing.T, root string) (string, cfnManifest) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, ".cfn-cache", "manifests", "cfn-ab-critic-*.json"))
	if len(files) != 1 {
		t.Fatalf("manifests at the project root: %v; want one", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var m cfnManifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), "schema_violation") {
		t.Errorf("the seed's manifest carries a schema_violation status:\n%s", data)
	}
	return files[0], m
}

// cfnCmd is phase 1 of AC-7 over the project's two artifacts, with extra arguments.
func cfnCmd(extra ...string) []string {
	return append([]string{"cfn-ab-critic", "--ac", "AC-7", "--ours", "ours.md", "--reference", "reference.md"}, extra...)
}

// TestCFNPhaseOnePrintsTheBlindedPrompt: without verdicts, cfn-ab-critic prints the
// prompt seed 000's agent judges from, naming the artifacts only as artifact_A and
// artifact_B (blinded copies, placed by the seed's shuffle), with the criterion and the
// dispatch rules, and exits 0 with no manifest anywhere.
func TestCFNPhaseOnePrintsTheBlindedPrompt(t *testing.T) {
	root, sub := cfnProject(t)
	stdout, stderr, code := runEnv(t, sub, nil, cfnCmd()...)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"## AC-7", "artifact_A: ", "artifact_B: ", "-----BEGIN CRITERION", "acceptance criterion AC-7",
		"## Reading the artifacts", ".png .jpg .jpeg .webp .gif", "Process Adherence", "--winner-file"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("the prompt lacks %q:\n%s", want, stdout)
		}
	}
	// Nothing says which slot is the build's: no role word, no path given on the command
	// line, no other AC id.
	if m := regexp.MustCompile(`(?i)\b(ours|reference|theirs|mine)\b|ours\.md|reference\.md|\bAC-[0-9]+\b`).FindAllString(stdout, -1); len(m) > 0 {
		for _, w := range m {
			if w != "AC-7" {
				t.Errorf("the prompt names %q:\n%s", w, stdout)
				break
			}
		}
	}
	if got := manifestsUnder(t, root); len(got) > 0 {
		t.Fatalf("phase 1 wrote manifests: %v", got)
	}
	// The slots hold the artifacts as the seed's hash places them (AC-7, iteration 0:
	// A=ours), and only the slot names say which file is which.
	paths := regexp.MustCompile(`(?m)^artifact_([AB]): (\S+)$`).FindAllStringSubmatch(stdout, -1)
	if len(paths) != 2 {
		t.Fatalf("artifact lines %v", paths)
	}
	as := ab.Assign("AC-7", 0)
	for _, p := range paths {
		role := as.A
		if p[1] == "B" {
			role = as.B
		}
		got, err := os.ReadFile(p[2])
		want, _ := os.ReadFile(filepath.Join(sub, string(role)+".md"))
		if err != nil || string(got) != string(want) || filepath.Base(p[2]) != "artifact_"+p[1]+".md" {
			t.Errorf("artifact_%s at %s holds %q (%v); want the %s artifact", p[1], p[2], got, err, role)
		}
	}
}

// TestCFNPhaseTwoRoutesTheVerdicts: the seed's winner file, after phase 1, is un-shuffled
// by the seed's hash, routed and written as the seed's manifest at the project root; the
// state folder then audits clean, the audit having re-derived the shuffle and the routing.
func TestCFNPhaseTwoRoutesTheVerdicts(t *testing.T) {
	root, sub := cfnProject(t)
	prompt, stderr, code := runEnv(t, sub, nil, cfnCmd()...)
	if code != 0 {
		t.Fatalf("phase 1: exit %d\n%s", code, stderr)
	}
	published := regexp.MustCompile(`\(batch (\S+)\)`).FindStringSubmatch(prompt)
	cfnWrite(t, filepath.Join(sub, "verdicts.json"), `{"AC-7":{"raw_winner":"A","confidence":0.8,"biggest_gap":"Slot A names the missing field."}}`)
	stdout, stderr, code := runEnv(t, sub, nil, cfnCmd("--winner-file", "verdicts.json")...)
	as := ab.Assign("AC-7", 0)
	winner := ab.Unshuffle("A", as)
	if winner != ab.WinnerOurs {
		t.Fatalf("the seed's example assignment changed: %s", as)
	}
	// ours at 0.8 >= the 0.75 threshold: clean, no suggestion, exit 0.
	if code != 0 {
		t.Fatalf("phase 2: exit %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	_, m := readCFN(t, root)
	c := m.Comparisons
	if m.Source != "cfn-ab-critic" || !strings.HasPrefix(m.ReviewID, "ab-critic-") || m.Status != "pending_review" || len(c) != 1 ||
		c[0].ACID != "AC-7" || c[0].Winner != string(winner) || c[0].RawWinner != "A" || c[0].LabelAssignment["A"] != string(as.A) ||
		c[0].Status != "compared" || c[0].Confidence == nil || *c[0].Confidence != 0.8 || len(m.Suggestions) != 0 || c[0].Ours != "ours.md" {
		t.Fatalf("manifest %+v", m)
	}
	if _, err := os.Stat(filepath.Join(sub, ".cfn-cache")); err == nil {
		t.Error("a manifest folder under the current folder, not the project root")
	}
	batch := regexp.MustCompile(`batch: (\S+)`).FindStringSubmatch(stdout)
	if batch == nil || published == nil || batch[1] != published[1] {
		// Phase 2 goes on with the batch whose prompt phase 1 published.
		t.Fatalf("phase 1 published batch %v, phase 2 routed %v:\n%s", published, batch, stdout)
	}
	// The audit re-derives the label assignment (the gates run again over the recorded
	// render) and the routing, from the events of both phases.
	out, stderr, code := runEnv(t, sub, nil, "audit", "--batch", batch[1], "--json")
	var rep struct {
		Events     int   `json:"events"`
		Decisions  int   `json:"decisions"`
		Mismatches []any `json:"mismatches"`
		State      string
		Batches    []struct {
			Complete bool `json:"complete"`
			Summary  struct {
				Compared int `json:"compared"`
				ExitCode int `json:"exit_code"`
			} `json:"summary"`
		} `json:"batches"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil || len(rep.Mismatches) != 0 || rep.Decisions == 0 || rep.State != "compared" ||
		len(rep.Batches) != 1 || !rep.Batches[0].Complete || rep.Batches[0].Summary.Compared != 1 {
		t.Fatalf("audit: exit %d\n%s\n%s", code, out, stderr)
	}
	shuffle, _, _ := runEnv(t, sub, nil, "shuffle", "AC-7", "0")
	if strings.TrimSpace(shuffle) != as.String() {
		t.Fatalf("tribunal shuffle AC-7 0 = %q, the manifest says %s", shuffle, as)
	}
}

// TestCFNRouting: the seed's routing and exit codes through the command: a reference
// win (the slots the other way round at another iteration) is a fix, a raw_winner of C
// is a schema violation (exit 3, recorded blocked in the seed's manifest), the fixture
// tie is polish, and $CFN_AB_CRITIC_THRESHOLD moves the bar.
func TestCFNRouting(t *testing.T) {
	it := 0
	for ab.Assign("AC-7", it).A != ab.Reference {
		it++
	}
	for _, tc := range []struct {
		name    string
		answer  string // a winner file's AC-7 entry; "" for a fixture
		fixture string
		args    []string
		env     []string
		exit    int
		winner  string
		status  string
		tag     string
		impact  string
		reason  string
	}{
		{name: "reference win is a fix", answer: `{"raw_winner":"A","confidence":0.8,"biggest_gap":"g"}`, args: []string{"--iteration", strconv.Itoa(it)},
			exit: 1, winner: "reference", status: "compared", tag: "fix", impact: "medium"},
		{name: "confident reference win blocks", answer: `{"raw_winner":"A","confidence":0.95,"biggest_gap":"g"}`, args: []string{"--iteration", strconv.Itoa(it)},
			exit: 1, winner: "reference", status: "compared", tag: "block", impact: "high"},
		{name: "raw winner C", answer: `{"raw_winner":"C","confidence":0.8,"biggest_gap":"g"}`, exit: 3, status: "blocked",
			reason: `schema violation: ab verdict: field raw_winner = "C": must be "A", "B" or "tie"`},
		{name: "confidence out of range", answer: `{"raw_winner":"A","confidence":1.2,"biggest_gap":"g"}`, exit: 3, status: "blocked", reason: "schema violation: "},
		{name: "fixture tie", fixture: "tie", exit: 1, winner: "tie", status: "compared", tag: "polish", impact: "medium"},
		{name: "fixture A", fixture: "A", exit: 0, winner: "ours", status: "compared"},
		{name: "threshold from the seed's variable", answer: `{"raw_winner":"A","confidence":0.8,"biggest_gap":"g"}`,
			env: []string{"CFN_AB_CRITIC_THRESHOLD=0.85"}, exit: 1, winner: "ours", status: "compared", tag: "polish", impact: "low"},
		{name: "threshold flag", answer: `{"raw_winner":"A","confidence":0.8,"biggest_gap":"g"}`, args: []string{"--threshold", "0.8"},
			env: []string{"CFN_AB_CRITIC_THRESHOLD=0.85"}, exit: 0, winner: "ours", status: "compared"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, sub := cfnProject(t)
			args := cfnCmd(tc.args...)
			if tc.fixture != "" {
				args = append(args, "--emit-fixture-winner", tc.fixture)
			} else {
				cfnWrite(t, filepath.Join(sub, "v.json"), `{"AC-7":`+tc.answer+`}`)
				args = append(args, "--winner-file", "v.json")
			}
			stdout, stderr, code := runEnv(t, sub, tc.env, args...)
			if code != tc.exit {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.exit, stdout, stderr)
			}
			_, m := readCFN(t, root)
			c := m.Comparisons[0]
			if c.Winner != tc.winner || c.Status != tc.status || !strings.HasPrefix(c.BlockedReason, tc.reason) || (tc.reason == "") != (c.BlockedReason == "") {
				t.Fatalf("comparison %+v", c)
			}
			if (tc.tag == "") != (len(m.Suggestions) == 0) || tc.tag != "" && (m.Suggestions[0].Tag != tc.tag || m.Suggestions[0].Impact != tc.impact) {
				t.Fatalf("suggestions %+v, want %s/%s", m.Suggestions, tc.tag, tc.impact)
			}
		})
	}
}

// TestCFNBlockedAndOut: an AC without its artifact is blocked, never compared: phase 1
// says so, phase 2 records it (every comparison blocked: exit 4) at --out's file; the
// run never crashes on it.
func TestCFNBlockedAndOut(t *testing.T) {
	root, sub := cfnProject(t)
	args := []string{"cfn-ab-critic", "--ac", "AC-7,AC-8", "--ours", "ours.md,missing.md", "--reference", "reference.md,reference.md"}
	stdout, stderr, code := runEnv(t, sub, nil, args...)
	if code != 0 || !strings.Contains(stdout, "## AC-8\n\nNothing to compare: blocked") || !strings.Contains(stdout, "artifact_A: ") {
		t.Fatalf("phase 1: exit %d\n%s\n%s", code, stdout, stderr)
	}
	out := filepath.Join(sub, "reports", "ab.json")
	cfnWrite(t, filepath.Join(sub, "v.json"), `{"AC-7":{"raw_winner":"B","confidence":0.9,"biggest_gap":"g"}}`)
	stdout, stderr, code = runEnv(t, sub, nil, append(args, "--winner-file", "v.json", "--out", out)...)
	if code != 1 {
		t.Fatalf("phase 2: exit %d, want 1 (one finding, one blocked)\n%s\n%s", code, stdout, stderr)
	}
	data, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(data), `"status": "blocked"`) || !strings.Contains(string(data), "missing.md") {
		t.Fatalf("--out manifest: %v\n%s", err, data)
	}
	if got := manifestsUnder(t, filepath.Join(root, ".cfn-cache")); len(got) > 0 {
		t.Errorf("--out also wrote %v", got)
	}
	// Every comparison blocked: exit 4, the manifest still written.
	_, _, code = runEnv(t, sub, nil, "cfn-ab-critic", "--ac", "AC-9", "--ours", "gone.md", "--reference", "reference.md", "--emit-fixture-winner", "A")
	if code != 4 {
		t.Fatalf("every comparison blocked: exit %d, want 4", code)
	}
	if _, m := readCFN(t, root); m.Comparisons[0].Status != "blocked" || m.Comparisons[0].BlockedReason == "" {
		t.Fatalf("manifest %+v", m)
	}
}

// TestCFNUsageErrors: bad arguments are exit 2 (the seed's usage error), before anything
// is judged or written.
func TestCFNUsageErrors(t *testing.T) {
	_, sub := cfnProject(t)
	cfnWrite(t, filepath.Join(sub, "other.json"), `{"AC-9":{"raw_winner":"A","confidence":0.8,"biggest_gap":"g"}}`)
	cfnWrite(t, filepath.Join(sub, "notjson.json"), `A wins`)
	for _, tc := range []struct {
		args []string
		env  []string
		want string
	}{
		{args: []string{"cfn-ab-critic"}, want: "--ac is required"},
		{args: []string{"cfn-ab-critic", "--ac", "AC-7,AC-8", "--ours", "ours.md"}, want: "parallel to --ac"},
		{args: cfnCmd("--threshold", "1.5"), want: "--threshold"},
		{args: cfnCmd("--iteration", "-1"), want: "--iteration"},
		{args: cfnCmd("--emit-fixture-winner", "TIE"), want: "want A, B or tie"},
		{args: cfnCmd("--emit-fixture-winner", "A", "--winner-file", "other.json"), want: "exclude each other"},
		{args: cfnCmd("--winner-file", "other.json"), want: `"AC-9", which --ac does not name`},
		{args: cfnCmd("--winner-file", "notjson.json"), want: "want one JSON object"},
		{args: cfnCmd("--winner-file", "absent.json"), want: "--winner-file"},
		{args: cfnCmd("--verify", "absent.md"), want: "--verify"},
		{args: cfnCmd(), env: []string{"CFN_AB_CRITIC_THRESHOLD=high"}, want: "CFN_AB_CRITIC_THRESHOLD"},
	} {
		stdout, stderr, code := runEnv(t, sub, tc.env, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v %v: exit %d, want 2 naming %q\nstdout:\n%s\nstderr:\n%s", tc.args, tc.env, code, tc.want, stdout, stderr)
		}
	}
	if got := manifestsUnder(t, filepath.Dir(sub)); len(got) > 0 {
		t.Errorf("usage errors wrote %v", got)
	}
}

// TestRunCFNWritesAtTheProjectRoot: --cfn on run writes the seed's manifest where its vote
// step reads it, under the project root rather than the current folder, with the seed's
// statuses only.
func TestRunCFNWritesAtTheProjectRoot(t *testing.T) {
	root, sub := cfnProject(t)
	stdout, stderr, code := run(t, sub, "run", filepath.Join(repoRoot(t), "examples", "quickstart"), "--out", t.TempDir(), "--cfn")
	if code != 1 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	path, m := readCFN(t, root)
	if !strings.Contains(stderr, "cfn manifest: "+path) || m.Source != "cfn-ab-critic" {
		t.Fatalf("manifest %s: %+v\n%s", path, m, stderr)
	}
	for _, c := range m.Comparisons {
		if c.Status != "compared" && c.Status != "blocked" {
			t.Errorf("%s: status %s", c.ACID, c.Status)
		}
	}
	if _, err := os.Stat(filepath.Join(sub, ".cfn-cache")); err == nil {
		t.Error("a manifest folder under the current folder, not the project root")
	}
}

func cfnWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCFNVerifyAndRerun: artifacts come from --verify (the markdown line grammar) when the
// command line names none; the same verdicts again stand on the batch that routed them,
// while other verdicts for the same artifacts are judged as a new batch.
func TestCFNVerifyAndRerun(t *testing.T) {
	root, sub := cfnProject(t)
	cfnWrite(t, filepath.Join(sub, "VERIFY_x.md"), "# Verify\n\n- AC-7: reference=reference.md ours=ours.md\n")
	args := []string{"cfn-ab-critic", "--ac", "AC-7", "--verify", "VERIFY_x.md"}
	if stdout, stderr, code := runEnv(t, sub, nil, args...); code != 0 || !strings.Contains(stdout, "artifact_B: ") {
		t.Fatalf("phase 1: exit %d\n%s\n%s", code, stdout, stderr)
	}
	batchOf := func(stdout string) string {
		m := regexp.MustCompile(`batch: (\S+)`).FindStringSubmatch(stdout)
		if m == nil {
			t.Fatalf("no batch named:\n%s", stdout)
		}
		return m[1]
	}
	cfnWrite(t, filepath.Join(sub, "a.json"), `{"AC-7":{"raw_winner":"B","confidence":0.7,"biggest_gap":"g"}}`)
	stdout, stderr, code := runEnv(t, sub, nil, append(args, "--winner-file", "a.json")...)
	if code != 1 {
		t.Fatalf("phase 2: exit %d\n%s\n%s", code, stdout, stderr)
	}
	first := batchOf(stdout)
	files, _ := filepath.Glob(filepath.Join(root, ".cfn-cache", "manifests", "*.json"))
	data, _ := os.ReadFile(files[0])
	if !strings.Contains(string(data), `"ours_artifact": "ours.md"`) || !strings.Contains(string(data), `"winner": "reference"`) {
		t.Fatalf("manifest:\n%s", data)
	}
	stdout, stderr, code = runEnv(t, sub, nil, append(args, "--winner-file", "a.json")...)
	if code != 1 || batchOf(stdout) != first || !strings.Contains(stderr, "results stand") {
		t.Fatalf("the same verdicts again: exit %d\n%s\n%s", code, stdout, stderr)
	}
	cfnWrite(t, filepath.Join(sub, "b.json"), `{"AC-7":{"raw_winner":"A","confidence":0.9,"biggest_gap":"g"}}`)
	stdout, stderr, code = runEnv(t, sub, nil, append(args, "--winner-file", "b.json")...)
	if code != 0 || batchOf(stdout) != first+"-2" {
		t.Fatalf("other verdicts: exit %d, want 0 as batch %s-2\n%s\n%s", code, first, stdout, stderr)
	}
}
