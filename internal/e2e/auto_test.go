package e2e

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	abstages "github.com/tribunal-dev/tribunal/pkg/kind/ab/stages"
	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

var notesIndex = regexp.MustCompile(`# Notes (\d+)`)

// contentJudge follows content (our build's notes win, in whichever slot they sit) and
// is sure of itself except on every fifth AC, where its confidence is 0.6; the model
// "biased" instead answers slot A on 70% of its calls whatever the content.
func contentJudge() func(goopenai.ChatCompletionRequest, int) fakellm.Reply {
	biased := fakellm.SlotA(0.7)
	return func(req goopenai.ChatCompletionRequest, n int) fakellm.Reply {
		if req.Model == "biased" {
			return biased(req, n)
		}
		a, b := fakellm.Slots(req)
		conf := 0.95
		if m := notesIndex.FindStringSubmatch(a + b); m != nil {
			if i, _ := strconv.Atoi(m[1]); i%5 == 0 {
				conf = 0.6
			}
		}
		if strings.Contains(a, "Build item") {
			return fakellm.Reply{Content: fakellm.Verdict("A", conf)}
		}
		return fakellm.Reply{Content: fakellm.Verdict("B", conf)}
	}
}

// waitFlips waits until the aggregator has recorded a batch's swapped pairs for judge
// in tenant's flip history (it does so right after the batch's completion).
func waitFlips(t *testing.T, env *Env, tenant, judge string, pairs int) ab.FlipCount {
	t.Helper()
	kv := env.clientRunning().Buckets.Cache
	deadline := time.Now().Add(15 * time.Second)
	for {
		h, _, err := abstages.LoadFlipHistory(context.Background(), kv, tenant)
		if err != nil {
			t.Fatal(err)
		}
		if c := h.Count(judge); c.Pairs >= pairs {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("flip history of %s never reached %d pairs for %s: %+v", tenant, pairs, judge, h)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAutoPositionsCost measures `positions: auto` against `positions: swap` on the same
// kind of batch and pins its rule end to end. A judge that followed content in a swapped
// batch (no flips) has its flip rate recorded at completion (and exported as metrics);
// on the next batch auto asks it for the second order only on the ACs it was unsure of
// (one in five), which is the saving. A tenant with no history, and a position-biased
// judge whose swapped batch flipped, get both orders on every AC.
func TestAutoPositionsCost(t *testing.T) {
	m := telemetry.Reset()
	env, fake := fakeJudge(t, fakellm.Options{Respond: contentJudge()})
	const n = 60

	res := env.Wait(env.Submit(WriteBatch(t, batchFiles{N: n, Salt: "s", Extra: "positions: swap\n"}.build()), e2eTenant), 60*time.Second)
	swapCalls := fake.Calls()
	if res.Summary.Compared != n || swapCalls != 2*n {
		t.Fatalf("swap batch: %+v, %d calls", res.Summary, swapCalls)
	}
	if c := waitFlips(t, env, e2eTenant, "openai/fake-model", n); c.Flips != 0 {
		t.Fatalf("a content-following judge flipped: %+v", c)
	}
	if got := m.Value("tribunal_judge_swap_pairs_total", "model=fake-model", "flipped=false"); got != n {
		t.Errorf("swap pairs metric %v, want %d", got, n)
	}
	if got := m.Value("tribunal_judge_flip_ratio", "model=fake-model"); got != 0 {
		t.Errorf("flip ratio gauge %v", got)
	}

	fake.Reset()
	res = env.Wait(env.Submit(WriteBatch(t, batchFiles{N: n, Salt: "t", Extra: "positions: auto\n"}.build()), e2eTenant), 60*time.Second)
	autoCalls := fake.Calls()
	unsure := n / 5
	if res.Summary.Compared != n || autoCalls != n+unsure {
		t.Fatalf("auto batch: %+v, %d calls, want %d (one per AC, two for the %d unsure ones)", res.Summary, autoCalls, n+unsure, unsure)
	}
	swapped := 0
	for _, r := range res.Rows {
		if len(r.Sampling) == 0 || r.Winner != "ours" {
			t.Errorf("auto row %+v", r)
		}
	}
	for id, c := range callsPerAC(t, fake.Requests()) {
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "t"))
		want := 1
		if i%5 == 0 {
			want = 2
			swapped++
		}
		if c != want {
			t.Errorf("AC %s: %d calls, want %d", id, c, want)
		}
	}
	t.Logf("positions swap: %d calls for %d ACs; positions auto: %d calls (%d ACs swapped), %.0f%% fewer",
		swapCalls, n, autoCalls, swapped, 100*float64(swapCalls-autoCalls)/float64(swapCalls))

	// Another tenant has no history: auto swaps everything until the judge shows a low
	// flip rate there.
	fake.Reset()
	env.Wait(env.Submit(WriteBatch(t, batchFiles{N: n, Salt: "u", Extra: "positions: auto\n"}.build()), "team-new"), 60*time.Second)
	if got := fake.Calls(); got != 2*n {
		t.Errorf("auto on a tenant without history: %d calls, want %d", got, 2*n)
	}

	// A biased judge flips: its history keeps auto swapping every AC.
	env.Wait(env.Submit(WriteBatch(t, batchFiles{N: n, Salt: "v", Extra: "positions: swap\njudges: [biased]\n"}.build()), "team-b"), 60*time.Second)
	c := waitFlips(t, env, "team-b", "openai/biased", n)
	if c.Flips < n/3 {
		t.Fatalf("the biased judge flipped only %+v", c)
	}
	if got := m.Value("tribunal_judge_slot_a_ratio", "model=biased"); got < 0.6 {
		t.Errorf("slot A gauge of the biased judge %v", got)
	}
	fake.Reset()
	env.Wait(env.Submit(WriteBatch(t, batchFiles{N: n, Salt: "w", Extra: "positions: auto\njudges: [biased]\n"}.build()), "team-b"), 60*time.Second)
	if got := fake.Calls(); got != 2*n {
		t.Errorf("auto with a flipping judge: %d calls, want %d", got, 2*n)
	}
}
