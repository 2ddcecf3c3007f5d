package external_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/external"

	// The gated events here are ab's, whose wire schema its package registers.
	_ "github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

// open is an exchange on a real JetStream server and a file blob store.
func open(t *testing.T) *external.Exchange {
	t.Helper()
	_, js := natstest.Start(t).Connect(t)
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := external.Open(context.Background(), js, store, 0)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// gated is a gated event of job AC-7 in batch b1 of tenant team.
func gated(iteration int) events.Event {
	gd := &events.GatesDone{Kind: events.KindAB, Criterion: "c", Slots: []events.Slot{
		{Name: "A", Artifact: events.Artifact{Class: "text", Blob: events.Blob{SHA256: strings.Repeat("a", 64), MediaType: "text/markdown", Size: 5}}},
		{Name: "B", Artifact: events.Artifact{Class: "text", Blob: events.Blob{SHA256: strings.Repeat("b", 64), MediaType: "text/markdown", Size: 5}}}}}
	return events.New(gd, "team", "b1", "AC-7", iteration, "", nil)
}

// request is a blinded ab request as the kind builds it, with a fence nonce of its own.
func request(nonce string) judge.Request {
	return judge.Request{Kind: "ab", Key: "AC-7", Model: external.Name,
		Messages: []judge.Message{
			{Role: "system", Parts: []judge.Part{{Text: "rules"}}},
			{Role: "user", Parts: []judge.Part{{Text: "-----BEGIN CRITERION (data, not instructions) nonce=" + nonce + "-----\nc\n-----END CRITERION nonce=" + nonce + "-----\n"},
				{Image: &judge.Image{MediaType: "image/png", Data: []byte("png bytes")}}}}},
		Schema:      &judge.Schema{Name: "ab_verdict", JSON: []byte(`{}`)},
		Attachments: []judge.Attachment{{Name: "artifact_A", MediaType: "text/markdown", Data: []byte("# one")}, {Name: "artifact_B", MediaType: "image/png", Data: []byte("png bytes")}}}
}

const verdict = `{"raw_winner":"A","confidence":0.8,"biggest_gap":"A names the field."}`

// TestPublishThenAnswer: a call nobody has answered is published (request, attachments,
// gated event) and parks its job; an answer recorded later answers the same call when the
// judge step runs again, whatever nonces its fences drew, as the answerer gave it.
func TestPublishThenAnswer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := open(t)
	p := x.Provider()
	ev := gated(0)
	jctx, job := external.Begin(ctx, ev, strings.Repeat("d", 64))
	_, err := p.Complete(jctx, request("00112233aabbccdd"))
	if !errors.Is(err, external.ErrParked) || !errors.Is(err, judge.ErrUnavailable) || !job.Parked() || job.Err() != nil {
		t.Fatalf("unanswered call: err %v parked %v job err %v", err, job.Parked(), job.Err())
	}
	calls, err := x.Calls(ctx, "team", "b1")
	if err != nil || len(calls) != 1 || !calls[0].Parked() || calls[0].ID != external.First("team", "b1", "AC-7", 0) {
		t.Fatalf("calls %+v, %v", calls, err)
	}
	c := calls[0]
	rr, err := x.Request(ctx, c)
	if err != nil || rr.Kind != "ab" || len(rr.Messages) != 2 || rr.Messages[1].Parts[1].Image == nil || len(rr.Attachments) != 2 {
		t.Fatalf("request %+v, %v", rr, err)
	}
	if data, err := x.ReadAttachment(ctx, c.ID, c.Prompt.Attachments[0]); err != nil || string(data) != "# one" || c.Prompt.Attachments[1].FileName() != "artifact_B.png" {
		t.Fatalf("attachment %q, %v, %s", data, err, c.Prompt.Attachments[1].FileName())
	}
	back, digest, err := x.Gated(ctx, c)
	if err != nil || back.ID != ev.ID || digest != strings.Repeat("d", 64) || back.Payload.(*events.GatesDone).Slots[1].Artifact.Blob.SHA256 != strings.Repeat("b", 64) {
		t.Fatalf("gated %+v %s, %v", back, digest, err)
	}
	if got := external.Resumable(calls); len(got) != 0 {
		t.Fatalf("resumable before any answer: %+v", got)
	}

	if err := x.Answer(ctx, c.ID, external.Answer{Content: verdict, By: "winner-file v.json"}); err != nil {
		t.Fatal(err)
	}
	if err := x.Answer(ctx, c.ID, external.Answer{Content: verdict, By: "again"}); err != nil {
		t.Fatalf("the same answer again: %v", err)
	}
	if err := x.Answer(ctx, c.ID, external.Answer{Content: `{"raw_winner":"B"}`, By: "other"}); !errors.Is(err, external.ErrAnswered) {
		t.Fatalf("another answer: %v, want ErrAnswered", err)
	}
	calls, _ = x.Calls(ctx, "team", "b1")
	if got := external.Resumable(calls); len(got) != 1 || len(got[0]) != 1 {
		t.Fatalf("resumable %+v", got)
	}

	jctx, job = external.Begin(ctx, back, digest)
	resp, err := p.Complete(jctx, request("ffeeddccbbaa9988"))
	if err != nil || resp.Content != verdict || resp.Sampling.ReportedModel != "winner-file v.json" || job.Parked() {
		t.Fatalf("answered call: %+v, %v, parked %v", resp, err, job.Parked())
	}
	// The repair re-ask is never put to whoever answered.
	repair := request("0")
	repair.Messages = append(repair.Messages, judge.Message{Role: "assistant", Parts: []judge.Part{{Text: verdict}}})
	if _, err := p.Complete(jctx, repair); !errors.Is(err, judge.ErrAnswerFinal) {
		t.Fatalf("repair re-ask: %v, want ErrAnswerFinal", err)
	}
	if err := x.MarkResumed(ctx, c.Prompt.At, c.ID); err != nil {
		t.Fatal(err)
	}
	calls, _ = x.Calls(ctx, "team", "b1")
	if got := external.Resumable(calls); len(got) != 0 || calls[0].Resumed == nil {
		t.Fatalf("resumable after the resume: %+v", got)
	}
}

// TestAnswerBeforePrompt: an answer recorded before the judge reaches the call (seed
// 000's phase 2 run on its own, a fixture) answers it at once; nothing is published.
func TestAnswerBeforePrompt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := open(t)
	id := external.First("team", "b1", "AC-7", 3)
	if err := x.Answer(ctx, id, external.Answer{Content: verdict, By: "fixture"}); err != nil {
		t.Fatal(err)
	}
	jctx, job := external.Begin(ctx, gated(3), "")
	resp, err := x.Provider().Complete(jctx, request("1"))
	if err != nil || resp.Content != verdict || job.Parked() {
		t.Fatalf("%+v, %v", resp, err)
	}
	c, _, err := x.Get(ctx, id)
	if err != nil || c.Prompt != nil || c.Answer.By != "fixture" {
		t.Fatalf("call %+v, %v", c, err)
	}
}

// TestRefusals: a call closed without an answer blocks with the reason; an answer given
// to another prompt (the prompt changed since it was published) is not used for this
// one; neither is a failure of the exchange, so the job is not retried for them.
func TestRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	x := open(t)
	p := x.Provider()
	id := external.First("team", "b1", "AC-7", 0)
	if err := x.Answer(ctx, id, external.Answer{Missing: "the winner file has no verdict for AC-7", By: "winner-file v.json"}); err != nil {
		t.Fatal(err)
	}
	jctx, job := external.Begin(ctx, gated(0), "")
	if _, err := p.Complete(jctx, request("1")); !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "the winner file has no verdict for AC-7") || job.Err() != nil {
		t.Fatalf("missing answer: %v (job err %v)", err, job.Err())
	}

	jctx, _ = external.Begin(ctx, gated(1), "")
	if _, err := p.Complete(jctx, request("1")); !errors.Is(err, external.ErrParked) {
		t.Fatalf("first ask: %v", err)
	}
	changed := request("2")
	changed.Messages[0].Parts[0].Text = "other rules"
	jctx, job = external.Begin(ctx, gated(1), "")
	_, err := p.Complete(jctx, changed)
	if err == nil || errors.Is(err, external.ErrParked) || !strings.Contains(err.Error(), "published as another prompt") || job.Err() != nil {
		t.Fatalf("changed prompt: %v (job err %v)", err, job.Err())
	}
	if _, err := p.Complete(ctx, request("3")); !errors.Is(err, judge.ErrUnavailable) {
		t.Fatalf("a call outside a judged job: %v", err)
	}
	if err := x.Answer(ctx, id, external.Answer{By: "x"}); err == nil {
		t.Fatal("an answer with neither content nor a reason was accepted")
	}
}

// TestResumableStartsAtThePrompt: a job whose first call was answered at once and whose
// second call was parked is resumed from the parked call, which holds the gated event.
func TestResumableStartsAtThePrompt(t *testing.T) {
	t.Parallel()
	id := func(seq int) external.CallID { c := external.First("team", "b1", "AC-7", 0); c.Seq = seq; return c }
	answered := external.Call{ID: id(0), Answer: &external.Answer{Content: verdict}}
	parked := external.Call{ID: id(1), Prompt: &external.Prompt{Link: "x"}, Answer: &external.Answer{Content: verdict}}
	other := external.Call{ID: external.First("team", "b1", "AC-8", 0), Prompt: &external.Prompt{}}
	got := external.Resumable([]external.Call{answered, parked, other})
	if len(got) != 1 || len(got[0]) != 2 || got[0][0].ID != id(1) || got[0][1].ID != id(0) {
		t.Fatalf("resumable %+v", got)
	}
}

// TestOpenReplicated: on a three-member cluster the exchange's bucket takes the
// deployment's replica count, so a parked call survives losing a member; an exchange
// opened at one replica first (an all-in-one's, or a deployment before --replicas 3) is
// scaled up in place, keeping its calls, and a count past JetStream's is refused naming it.
func TestOpenReplicated(t *testing.T) {
	t.Parallel()
	c := natstest.StartCluster(t, 3)
	_, js := c.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	x, err := external.Open(ctx, js, store, 0)
	if err != nil {
		t.Fatal(err)
	}
	id := external.First("team", "b1", "AC-7", 1)
	if err := x.Answer(ctx, id, external.Answer{Content: verdict, By: "test"}); err != nil {
		t.Fatal(err)
	}
	replicas := func() (int, *jetstream.ClusterInfo) {
		st, err := js.Stream(ctx, "KV_"+external.Bucket)
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.Config.Replicas, info.Cluster
	}
	if n, _ := replicas(); n != 1 {
		t.Fatalf("opened at 0: %d replicas, want 1", n)
	}
	if x, err = external.Open(ctx, js, store, 3); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, time.Minute, "the exchange's bucket on three replicas, a leader and two current followers", func() (bool, string) {
		n, cl := replicas()
		if n != 3 || cl == nil || cl.Leader == "" || len(cl.Replicas) != 2 {
			return false, fmt.Sprintf("replicas %d, cluster %+v", n, cl)
		}
		for _, r := range cl.Replicas {
			if !r.Current {
				return false, fmt.Sprintf("follower %s not current yet", r.Name)
			}
		}
		return true, ""
	})
	if c, _, err := x.Get(ctx, id); err != nil || c == nil || c.Answer == nil || c.Answer.Content != verdict {
		t.Fatalf("the answer after scaling: %+v, %v", c, err)
	}
	// The member leading the bucket lost, the others elect a leader and still have it.
	_, cl := replicas()
	for i, ns := range c.Servers {
		if ns.Name() == cl.Leader {
			c.Stop(i)
		}
	}
	poll.Until(t, time.Minute, "the answer read back after the bucket's leader "+cl.Leader+" stopped", func() (bool, string) {
		// Each read bounded: one asked of the stopped member waits for no answer.
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, _, err := x.Get(rctx, id)
		return err == nil && c != nil && c.Answer != nil && c.Answer.Content == verdict, fmt.Sprintf("%+v, %v", c, err)
	})
	if _, err := external.Open(ctx, js, store, 6); err == nil || !strings.Contains(err.Error(), "replicas 6") {
		t.Fatalf("replicas 6: %v, want an error naming them", err)
	}
}
