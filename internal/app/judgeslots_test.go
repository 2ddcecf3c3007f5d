package app_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	oai "github.com/tribunal-dev/tribunal/pkg/judge/openai"
)

// waitingProvider counts the judge calls handed to an openai provider, those still
// waiting for one of its slots included; it is judge.Bounded through the provider.
type waitingProvider struct {
	*oai.Provider
	entered, peak atomic.Int32
}

func (p *waitingProvider) Complete(ctx context.Context, req judge.Request) (judge.Response, error) {
	n := p.entered.Add(1)
	defer p.entered.Add(-1)
	for {
		old := p.peak.Load()
		if n <= old || p.peak.CompareAndSwap(old, n) {
			break
		}
	}
	return p.Provider.Complete(ctx, req)
}

// TestJudgeFeedsEveryProviderSlot: with the judge service's concurrency equal to its
// provider's, a message held its service slot through the reads, the cache and the
// publish around its call while its provider slot sat idle (64 calls in flight averaged
// 57-61). The judge service now holds more messages than the provider has slots: while
// the model server holds every slot's call, further messages already wait at the
// provider for a slot, and the server still never sees more calls than the provider's
// bound. Nothing here is timed: the model server holds the calls until the count is
// seen.
func TestJudgeFeedsEveryProviderSlot(t *testing.T) {
	const slots = 16 // the e2e harness runs each service with Concurrency 16
	release := make(chan struct{})
	llm := fakellm.New(fakellm.Options{Respond: func(openai.ChatCompletionRequest, int) fakellm.Reply {
		<-release
		return fakellm.Reply{}
	}})
	t.Cleanup(llm.Close)
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)

	p, err := oai.New(oai.Config{BaseURL: llm.BaseURL(), Model: "fake", Concurrency: slots})
	if err != nil {
		t.Fatal(err)
	}
	wp := &waitingProvider{Provider: p}
	env := e2e.NewEnv(t)
	env.Start(wp, "judge-slots", bus.Services...)
	sub := env.Submit(e2e.WriteBatch(t, e2e.TextBatch(3*slots, "")), tenant)

	deadline := time.Now().Add(60 * time.Second)
	for wp.entered.Load() <= slots || llm.PeakInFlight() < slots {
		if time.Now().After(deadline) {
			t.Fatalf("the judge handed %d calls to a provider of %d slots whose %d calls were all held: no message waits to take a slot the moment one frees",
				wp.entered.Load(), slots, llm.PeakInFlight())
		}
		time.Sleep(10 * time.Millisecond)
	}
	open()
	res := env.Wait(sub, 60*time.Second)
	if got := len(res.Rows); got != 3*slots {
		t.Fatalf("%d results, want %d", got, 3*slots)
	}
	if got := llm.PeakInFlight(); got != slots {
		t.Errorf("the model server saw %d calls at once, want the provider's %d", got, slots)
	}
	if got := wp.peak.Load(); got > slots+slots/4 {
		t.Errorf("%d calls waited at the provider at once, want at most %d", got, slots+slots/4)
	}
}
