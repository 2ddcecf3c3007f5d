package main

import (
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// TestTeamThroughIngress is the shared deployment as an operator sets it up and a team
// uses it, every part a process: `tribunal tenants` writes the authorization and the
// tokens, NATS runs it, the services and the ingress each connect as their own user, and
// the team submits, watches and reads results holding nothing but its token (from a
// file, then from the environment).
func TestTeamThroughIngress(t *testing.T) {
	dir := t.TempDir()
	conf, creds, toks := filepath.Join(dir, "auth.conf"), filepath.Join(dir, "credentials.json"), filepath.Join(dir, "tokens.json")
	reviewerFile := filepath.Join(dir, "alice.token")
	if _, stderr, code := run(t, dir, "tenants", "team-a", "team-b", "--out", conf, "--credentials", creds, "--tokens", toks, "--reviewer", "team-a="+reviewerFile); code != 0 {
		t.Fatalf("tenants exit %d: %s", code, stderr)
	}
	var list []tenants.Credential
	data, _ := os.ReadFile(creds)
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	pw := map[string]string{}
	for _, c := range list {
		pw[c.User] = c.Password
	}
	teamTokens, err := tokens.Load(toks)
	if err != nil {
		t.Fatal(err)
	}
	var tokenA, tokenB string
	for tok, team := range teamTokens {
		switch team {
		case "team-a":
			tokenA = tok
		case "team-b":
			tokenB = tok
		}
	}
	tokenFile := filepath.Join(dir, "team-a.token")
	if err := os.WriteFile(tokenFile, []byte(tokenA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	natsAddr, svcHealth, ingHealth, ingAddr := freeport.Addr(t), freeport.Addr(t), freeport.Addr(t), freeport.Addr(t)
	natsURL := "nats://" + natsAddr
	blobURL := "file://" + filepath.Join(dir, "blobs")
	start(t, "serve", "nats", "--listen", natsAddr, "--store", filepath.Join(dir, "nats"), "--config", conf)
	startWithEnv(t, []string{"TRIBUNAL_NATS_PASSWORD=" + pw[tenants.ServicesUser]},
		"serve", "all", "--nats", natsURL, "--nats-user", tenants.ServicesUser, "--blob", blobURL, "--health", svcHealth, "--tenants", "team-a,team-b")
	startWithEnv(t, []string{"TRIBUNAL_NATS_PASSWORD=" + pw[tenants.IngressUser]},
		"serve", "ingress", "--nats", natsURL, "--nats-user", tenants.IngressUser, "--blob", blobURL, "--health", ingHealth,
		"--tokens", toks, "--ingress-addr", ingAddr)
	waitHTTP(t, "http://"+svcHealth+"/readyz")
	waitHTTP(t, "http://"+ingHealth+"/readyz")
	ingressURL := "http://" + ingAddr

	// The quickstart names tenant "default"; through the ingress it is the token's. Every
	// judged AC of it goes to people (review: {share: 1}).
	quick := filepath.Join(dir, "quickstart")
	if err := os.CopyFS(quick, os.DirFS(filepath.Join(repoRoot(t), "examples", "quickstart"))); err != nil {
		t.Fatal(err)
	}
	by, _ := os.ReadFile(filepath.Join(quick, "batch.yaml"))
	if err := os.WriteFile(filepath.Join(quick, "batch.yaml"), []byte(strings.Replace(string(by), "\nacs:\n", "\nreview: {share: 1}\nacs:\n", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := run(t, dir, "submit", "quickstart", "--ingress", ingressURL, "--token-file", tokenFile)
	if code != 0 {
		t.Fatalf("submit exit %d: %s", code, stderr)
	}
	batchID := strings.TrimSpace(stdout)
	watch := exec.Command(binary, "watch", "--batch", batchID, "--ingress", ingressURL)
	watch.Env = append(os.Environ(), "TRIBUNAL_TOKEN="+tokenA)
	out, err := watch.Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 || !strings.Contains(string(out), "8 ACs, 6 compared, 2 blocked") {
		t.Fatalf("watch: %v\n%s", err, out)
	}
	resDir := t.TempDir()
	stdout, stderr, code = run(t, "", "results", "--batch", batchID, "--ingress", ingressURL, "--token-file", tokenFile, "--json", "--out", resDir)
	var res struct {
		Tenant  string `json:"tenant"`
		BatchID string `json:"batch_id"`
	}
	if code != 1 || json.Unmarshal([]byte(stdout), &res) != nil || res.BatchID != batchID || res.Tenant != "team-a" {
		t.Fatalf("results exit %d: %s %s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(resDir, batchID, "manifest.json")); err != nil {
		t.Fatal(err)
	}
	// Asking for another tenant, or with another team's token, gets nothing.
	if _, stderr, code := run(t, "", "results", "--batch", batchID, "--ingress", ingressURL, "--token-file", tokenFile, "--tenant", "team-b"); code != 2 || !strings.Contains(stderr, "team-a") {
		t.Errorf("--tenant team-b with team-a's token: exit %d %s", code, stderr)
	}
	if _, _, code := run(t, "", "results", "--batch", batchID, "--ingress", ingressURL, "--token", "not-a-valid-token-of-anyone"); code != 2 {
		t.Errorf("an unknown token: exit %d, want 2", code)
	}

	teamReviewsThroughIngress(t, dir, ingressURL, tokenFile, tokenB, batchID)

	// A reviewer of team-a, holding the token `tribunal tenants --reviewer` wrote, lists
	// and exports the queue blind, and reads nothing else: no results, no gold set, no
	// submission.
	stdout, stderr, code = run(t, dir, "review", "--batch", batchID, "--ingress", ingressURL, "--token-file", reviewerFile)
	if code != 0 || !strings.Contains(stdout, "review queue of team-a/"+batchID) {
		t.Errorf("the reviewer's listing: exit %d: %s %s", code, stdout, stderr)
	}
	if _, stderr, code := run(t, dir, "review", "--batch", batchID, "--ingress", ingressURL, "--token-file", reviewerFile, "--export", filepath.Join(dir, "reviewer-queue.json")); code != 0 {
		t.Errorf("the reviewer's export: exit %d: %s", code, stderr)
	}
	for _, args := range [][]string{
		{"results", "--batch", batchID},
		{"review", "--batch", batchID, "--export-gold", filepath.Join(dir, "reviewer-gold")},
		{"submit", "quickstart"},
	} {
		stdout, stderr, code := run(t, dir, append(args, "--ingress", ingressURL, "--token-file", reviewerFile)...)
		if code == 0 || !strings.Contains(stderr, "a reviewer's token of team-a may not use") {
			t.Errorf("the reviewer's %v: exit %d: %s %s", args, code, stdout, stderr)
		}
	}
}

// teamReviewsThroughIngress is the team's review of its batch through the ingress: it lists
// the queue, exports it blind with its images, imports answers (recorded by the token's
// holder) and writes a gold set; team-b's token is told team-a's batch is not found.
func teamReviewsThroughIngress(t *testing.T, dir, ingressURL, tokenFile, tokenB, batchID string) {
	t.Helper()
	review := func(args ...string) (string, string, int) {
		return run(t, dir, append([]string{"review", "--batch", batchID, "--ingress", ingressURL}, args...)...)
	}
	queue := func() []ingress.QueueItem {
		stdout, stderr, code := review("--token-file", tokenFile, "--json")
		var q []ingress.QueueItem
		if code != 0 || json.Unmarshal([]byte(stdout), &q) != nil {
			t.Fatalf("review --json exit %d: %s %s", code, stdout, stderr)
		}
		// The listing is what a reviewer is shown: blind.
		for _, leak := range []string{"AC-1", "AC-3", "badge.png", "release-notes.md", "ac_id", "reasons", "reviewers"} {
			if strings.Contains(stdout, leak) {
				t.Errorf("the listing through the ingress shows %q", leak)
			}
		}
		return q
	}
	q := queue()
	answers := map[string]any{}
	for _, e := range q {
		if e.Status != ingress.StatusUnreviewed || e.Yours != nil {
			t.Errorf("%s reviewed before any answer: %s %+v", e.Item, e.Status, e.Yours)
		}
		if e.Kind == "ab" {
			answers[e.Item] = map[string]any{"raw_winner": "B", "confidence": 0.7, "biggest_gap": "slot B is clearer"}
		}
	}
	if len(answers) != 4 {
		t.Fatalf("queue %+v: want the 4 judged ab ACs among it", q)
	}

	exportFile := filepath.Join(dir, "queue.json")
	if _, stderr, code := review("--token-file", tokenFile, "--export", exportFile); code != 0 {
		t.Fatalf("review --export exit %d: %s", code, stderr)
	}
	data, _ := os.ReadFile(exportFile)
	var ex client.ReviewExport
	if err := json.Unmarshal(data, &ex); err != nil || len(ex.Items) != len(q) {
		t.Fatalf("export: %v, %d items of %d", err, len(ex.Items), len(q))
	}
	for _, leak := range []string{"AC-1", "AC-3", "badge.png", "release-notes.md"} {
		if strings.Contains(string(data), leak) {
			t.Errorf("the blind export shows %q", leak)
		}
	}
	if len(ex.Images) == 0 {
		t.Error("the export carries none of the images its items show")
	}
	// They are team-a's blobs: team-b's token is told no such blob.
	tokA, _ := os.ReadFile(tokenFile)
	for sha := range ex.Images {
		for tok, want := range map[string]int{strings.TrimSpace(string(tokA)): http.StatusOK, tokenB: http.StatusNotFound} {
			req, _ := http.NewRequest(http.MethodGet, ingressURL+"/v1/blobs/"+sha, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("GET image %s: %d, want %d", sha, resp.StatusCode, want)
			}
		}
	}

	answersFile := filepath.Join(dir, "answers.json")
	data, _ = json.Marshal(answers)
	if err := os.WriteFile(answersFile, data, 0o644); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code := review("--token-file", tokenFile, "--import", answersFile)
	if code != 0 || !strings.Contains(stdout, "4 review(s) recorded by team-a (token ") {
		t.Fatalf("review --import exit %d: %s %s", code, stdout, stderr)
	}
	for _, e := range queue() {
		if _, answered := answers[e.Item]; answered && (e.Status != ingress.StatusReviewed || e.Yours == nil || !strings.Contains(string(e.Yours.Answer), "slot B is clearer")) {
			t.Errorf("%s: %s, yours %+v after the import", e.Item, e.Status, e.Yours)
		}
	}

	gold := filepath.Join(dir, "gold")
	if stdout, stderr, code := review("--token-file", tokenFile, "--export-gold", gold); code != 0 || !strings.Contains(stdout, "gold set: 4 reviewed AC(s)") {
		t.Errorf("review --export-gold exit %d: %s %s", code, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(gold, "expectations.yaml")); err != nil {
		t.Error(err)
	}

	for _, args := range [][]string{{}, {"--export", "-"}, {"--import", answersFile}, {"--export-gold", filepath.Join(dir, "gold-b")}} {
		stdout, stderr, code := review(append([]string{"--token", tokenB}, args...)...)
		if code != 2 || !strings.Contains(stderr, "batch team-b/"+batchID+": not found") || strings.Contains(stdout, "item-") {
			t.Errorf("team-b's review %v of team-a's batch: exit %d: %s %s", args, code, stdout, stderr)
		}
	}
}
