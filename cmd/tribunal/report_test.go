package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/trust"
	"github.com/tribunal-dev/tribunal/pkg/trust/collect"
)

// fakeStack is the four services on a real NATS server and file blob store, judging
// with the openai provider against a local OpenAI-compatible fake.
type fakeStack struct {
	run   *app.Running
	store blob.Store
	js    jetstream.JetStream
	fake  *fakellm.Server
	conn  []string
}

func startFakeStack(t *testing.T, respond func(goopenai.ChatCompletionRequest, int) fakellm.Reply) *fakeStack {
	t.Helper()
	env := e2e.NewEnv(t)
	env.Bus = bus.Config{}
	p, fake := e2e.OpenAIJudge(t, "fake-biased", fakellm.Options{Respond: respond})
	r := env.StartWith(app.Options{Provider: p, Instance: "test", Concurrency: 16, CloseTimeout: 5 * time.Second})
	_, js := natstest.Connect(t, env.NATS.URL)
	return &fakeStack{run: r, store: env.Store, js: js, fake: fake, conn: []string{"--nats", env.NATS.URL, "--blob", "file://" + env.BlobDir}}
}

// judge submits a batch made of files under tenant and waits until its batch.completed
// is in the stream.
func (s *fakeStack) judge(t *testing.T, tenant string, files map[string]string) client.Submission {
	t.Helper()
	b := e2e.WriteBatch(t, files)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sub, err := (&client.Submitter{Pub: s.run.Pub, Store: s.store}).Submit(ctx, b, tenant, client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Watch(ctx, s.run.Buckets, sub.Tenant, sub.BatchID, 20*time.Millisecond, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	e2e.WaitBatchCompleted(t, s.js, sub.Tenant, sub.BatchID)
	return sub
}

// report runs `tribunal report` on a batch, as text and as JSON.
func (s *fakeStack) report(t *testing.T, sub client.Submission) (string, trust.Report) {
	t.Helper()
	args := append(s.conn, "--batch", sub.BatchID, "--tenant", sub.Tenant)
	text, errOut, code := execArgusCmd(t, newReportCmd(), args...)
	if code != 0 {
		t.Fatalf("report: exit %d: %s", code, errOut)
	}
	out, errOut, code := execArgusCmd(t, newReportCmd(), append(args, "--json")...)
	if code != 0 {
		t.Fatalf("report --json: exit %d: %s", code, errOut)
	}
	var rep trust.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, out)
	}
	return text, rep
}

// textACs are n ab ACs over distinct text files; extra goes into the batch header.
func textACs(n int, extra string, artifact func(i int) (ours, ref string)) map[string]string {
	files := map[string]string{}
	var y strings.Builder
	y.WriteString("version: 1\nname: trust\n" + extra + "acs:\n")
	for i := range n {
		o, r := artifact(i)
		files[fmt.Sprintf("o%d.md", i)], files[fmt.Sprintf("r%d.md", i)] = o, r
		fmt.Fprintf(&y, "  - {id: AC-%d, criterion: the notes are clear, ours: o%d.md, reference: r%d.md}\n", i, i, i)
	}
	files["batch.yaml"] = y.String()
	return files
}

func plainNotes(i int) (string, string) {
	return fmt.Sprintf("Release %d: exports are faster.\n", i), fmt.Sprintf("Release %d: various improvements.\n", i)
}

func winnerOf(content string) string {
	var v struct {
		RawWinner string `json:"raw_winner"`
	}
	_ = json.Unmarshal([]byte(content), &v)
	return v.RawWinner
}

func judgeOf(t *testing.T, rep trust.Report, name string) trust.JudgeReport {
	t.Helper()
	for _, j := range rep.Judges {
		if j.Judge == name {
			return j
		}
	}
	t.Fatalf("no judge %s in the report: %+v", name, rep.Judges)
	return trust.JudgeReport{}
}

// TestReportShowsPositionBias: a fake model that answers slot A on 70% of its calls
// whatever the artifacts say. On a batch judged in one order the report shows a slot-A
// win rate whose interval excludes 50% and names the judge; on the same batch judged in
// both orders it shows the flip rate the fake actually produced, and flips of the
// "picked the first slot both times" kind.
func TestReportShowsPositionBias(t *testing.T) {
	var mu sync.Mutex
	answers := map[string][]string{} // the two slot texts, sorted -> the fake's answers
	biased := fakellm.SlotA(0.7)
	s := startFakeStack(t, func(req goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		r := biased(req, n)
		a, b := fakellm.Slots(req)
		key := min(a, b) + "|" + max(a, b)
		mu.Lock()
		answers[key] = append(answers[key], winnerOf(r.Content))
		mu.Unlock()
		return r
	})
	const n = 100

	single := s.judge(t, "single", textACs(n, "", plainNotes))
	text, rep := s.report(t, single)
	j := judgeOf(t, rep, "openai/fake-biased")
	b := j.PositionBias
	if b.SlotA.N != n || b.SlotA.K != 70 || !b.Biased || !b.SlotA.Excludes(0.5) {
		t.Fatalf("slot A %s biased %v, want 70/100 with an interval that excludes 0.5", b.SlotA, b.Biased)
	}
	for _, want := range []string{"judge openai/fake-biased", "slot A won " + b.SlotA.String(), "BIASED: the interval excludes 0.5"} {
		if !strings.Contains(text, want) {
			t.Errorf("report text lacks %q:\n%s", want, text)
		}
	}

	mu.Lock()
	clear(answers)
	mu.Unlock()
	swapped := s.judge(t, "swapped", textACs(n, "positions: swap\n", plainNotes))
	text, rep = s.report(t, swapped)
	// What the fake produced: a pair flipped when both orders got the same slot letter.
	pairs, flips := 0, 0
	for key, got := range answers {
		if len(got) != 2 {
			t.Fatalf("%q was asked %d times, want both orders once", key, len(got))
		}
		pairs++
		if got[0] == got[1] {
			flips++
		}
	}
	f := judgeOf(t, rep, "openai/fake-biased").Flips
	if pairs != n || f.Pairs != n || f.Rate.K != flips {
		t.Fatalf("report flips %s over %d pairs; the fake produced %d flips over %d pairs", f.Rate, f.Pairs, flips, pairs)
	}
	// A content-blind judge at 70% flips about 1 - 2·0.7·0.3 = 58% of pairs, nearly all
	// by answering the first slot both times.
	if f.Rate.Point < 0.4 || f.Patterns["A->B"] <= f.Patterns["B->A"] || !strings.Contains(text, "flips: "+f.Rate.String()) {
		t.Errorf("flips %+v\n%s", f, text)
	}
}

// TestReportPanelAgreement: a three-judge panel in which one judge answers at random.
// Krippendorff's alpha over the panel falls below that of the two consistent judges
// alone, the pairwise table shows the consistent pair agreeing, and the report lists
// every AC the random judge split the panel on.
func TestReportPanelAgreement(t *testing.T) {
	var mu sync.Mutex
	coin := rand.New(rand.NewPCG(1, 2))
	s := startFakeStack(t, func(req goopenai.ChatCompletionRequest, _ int) fakellm.Reply {
		if req.Model == "coin" {
			mu.Lock()
			w := []string{"A", "B", "tie"}[coin.IntN(3)]
			mu.Unlock()
			return fakellm.Reply{Content: fakellm.Verdict(w, 0.9)}
		}
		a, _ := fakellm.Slots(req)
		if strings.Contains(a, "GOOD") {
			return fakellm.Reply{Content: fakellm.Verdict("A", 0.9)}
		}
		return fakellm.Reply{Content: fakellm.Verdict("B", 0.9)}
	})
	// Ours is the better side in half of the ACs, the reference in the other half, so the
	// consistent judges' answers vary and alpha is defined.
	sub := s.judge(t, "panel", textACs(40, "judges: [steady-1, steady-2, coin]\n", func(i int) (string, string) {
		good, bad := fmt.Sprintf("GOOD notes %d\n", i), fmt.Sprintf("poor notes %d\n", i)
		if i%2 == 0 {
			return good, bad
		}
		return bad, good
	}))
	text, rep := s.report(t, sub)
	p := rep.Panel
	if p == nil || p.Alpha == nil {
		t.Fatalf("no panel alpha: %+v\n%s", p, text)
	}

	// The reference: the same judgments, the two consistent judges alone.
	jobs, err := records.New(s.run.Buckets).LoadJobs(context.Background(), sub.Tenant, sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	var steady []trust.Judgment
	coinAnswers := map[string]string{}
	for _, j := range collect.Input(jobs, nil).Judgments {
		if j.Judge == "openai/coin" {
			coinAnswers[j.AC] = string(j.Answer())
			continue
		}
		steady = append(steady, j)
	}
	pair, err := trust.Panel(steady, 1.96)
	if err != nil || pair.Alpha == nil || pair.Alpha.Alpha != 1 {
		t.Fatalf("the consistent pair's alpha: %+v %v", pair.Alpha, err)
	}
	if p.Alpha.Alpha >= pair.Alpha.Alpha {
		t.Errorf("panel alpha %.3f is not below the consistent pair's %.3f", p.Alpha.Alpha, pair.Alpha.Alpha)
	}
	for _, pr := range p.Pairs {
		if pr.A == "openai/steady-1" && pr.B == "openai/steady-2" && (pr.K != 40 || pr.N != 40) {
			t.Errorf("steady pair agreement %s", pr.Proportion)
		}
	}
	// The split ACs are exactly those where the coin disagreed with the consistent pair.
	var want []string
	for _, j := range steady {
		if j.Judge == "openai/steady-1" && coinAnswers[j.AC] != string(j.Answer()) {
			want = append(want, j.AC)
		}
	}
	if len(p.Split) != len(want) || len(want) == 0 {
		t.Fatalf("%d split ACs, want %d (%v)", len(p.Split), len(want), want)
	}
	if !strings.Contains(text, fmt.Sprintf("split ACs (%d):", len(want))) || !strings.Contains(text, "Krippendorff's alpha (nominal) "+fmt.Sprintf("%.3f", p.Alpha.Alpha)) {
		t.Errorf("report text:\n%s", text)
	}
	for _, ac := range want {
		if !strings.Contains(text, "    "+ac+": openai/coin=") {
			t.Errorf("split AC %s not listed:\n%s", ac, text)
		}
	}
}

// TestUnpinnedTemperatureIsMarked: a run that pins no temperature (--judge-temperature
// -1) says so under the results table, and results.json and the ab manifest mark each
// such verdict; the default pins 0 and records it.
func TestUnpinnedTemperatureIsMarked(t *testing.T) {
	for _, tc := range []struct {
		temp     string
		unpinned bool
	}{{"-1", true}, {"0", false}} {
		out := t.TempDir()
		stdout, stderr, _ := run(t, repoRoot(t), "run", "examples/quickstart", "--out", out, "--judge-temperature", tc.temp)
		if got := strings.Contains(stdout, "temperature not pinned for "); got != tc.unpinned {
			t.Errorf("temperature %s: table says unpinned %v\n%s\n%s", tc.temp, got, stdout, stderr)
		}
		results, _ := filepath.Glob(filepath.Join(out, "quickstart-*", "results.json"))
		manifests, _ := filepath.Glob(filepath.Join(out, "quickstart-*", "manifest.json"))
		if len(results) != 1 || len(manifests) != 1 {
			t.Fatalf("results %v manifests %v", results, manifests)
		}
		var res client.Results
		data, _ := os.ReadFile(results[0])
		if err := json.Unmarshal(data, &res); err != nil {
			t.Fatal(err)
		}
		sampled := 0
		for _, r := range res.Rows {
			if r.Kind != "ab" || r.Status != "compared" {
				continue
			}
			sampled++
			if r.Unpinned != tc.unpinned || len(r.Sampling) != 1 || r.Sampling[0].Pinned() == tc.unpinned || r.Sampling[0].ResponseFormat != "none" {
				t.Errorf("temperature %s: row %s sampling %+v unpinned %v", tc.temp, r.ACID, r.Sampling, r.Unpinned)
			}
		}
		manifest, _ := os.ReadFile(manifests[0])
		if sampled == 0 || strings.Contains(string(manifest), `"temperature_unpinned": true`) != tc.unpinned ||
			strings.Contains(string(manifest), `"temperature": 0`) == tc.unpinned {
			t.Errorf("temperature %s: %d sampled rows; manifest:\n%s", tc.temp, sampled, manifest)
		}
	}
}
