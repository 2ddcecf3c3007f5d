package e2e

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind/critic"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
)

// TestJudgeCallRecords: every judge call of every kind keeps what it sent and received as
// a blob, referenced from its vote, for reviewers: the exact prompt (slots and criterion
// fenced as the model saw them, images by digest) and the raw answer. The prompt itself
// travels in no event, and a vote answered from the cache points at the record of the
// call that paid for it.
func TestJudgeCallRecords(t *testing.T) {
	env := NewEnv(t)
	env.Start(scriptedAll(t, nil), "all", bus.Services...)
	files := map[string]string{
		"ours.md":      "# Notes\nOurs says what changed.\n",
		"ref.md":       "# Notes\nThe reference says what changed and what to do.\n",
		"original.md":  "# Skill\nAlways ask for the component first.\n",
		"candidate.md": "# Skill\nAsk for the component.\n",
		"batch.yaml": "version: 1\nname: calls\nacs:\n" +
			"  - {id: AC-ab, criterion: The notes say what to do next., ours: ours.md, reference: ref.md}\n" +
			"  - {id: AC-critic, kind: critic, task: Summarise the notes., output: The notes changed.}\n" +
			"  - id: AC-eq\n    kind: equivalence\n    original: original.md\n    candidate: candidate.md\n" + equivCases,
	}
	env.Wait(env.Submit(WriteBatch(t, files), "team-a"), 30*time.Second)

	ctx := context.Background()
	record := func(what string, ji events.JudgeInfo) *judge.CallRecord {
		t.Helper()
		if ji.Call == nil {
			t.Fatalf("%s: the vote names no call record", what)
		}
		data, _, err := blob.ReadAll(ctx, env.Store, blob.Ref{Tenant: "team-a", SHA256: ji.Call.SHA256})
		if err != nil {
			t.Fatalf("%s: call record: %v", what, err)
		}
		rec, err := judge.DecodeCallRecord(data)
		if err != nil || len(rec.Exchanges) == 0 || rec.Exchanges[0].Response == "" || len(rec.Exchanges[0].Messages) < 2 {
			t.Fatalf("%s: call record %s: %v", what, data, err)
		}
		return rec
	}
	var system []string
	var abCall *events.Blob
	kinds := map[events.Kind]int{}
	for _, m := range env.subjectMsgs("tribunal.team-a.verdict.emitted") {
		ev, err := events.Decode(m.Data)
		if err != nil {
			t.Fatal(err)
		}
		v := ev.Payload.(*events.VerdictEmitted)
		kinds[v.Kind]++
		var infos []events.JudgeInfo
		for _, vote := range v.Votes {
			infos = append(infos, vote.Judge)
		}
		if critic.VoteOf(v.KindPart) != nil {
			infos = append(infos, critic.VoteOf(v.KindPart).Judge)
		}
		for _, c := range v.Cases {
			infos = append(infos, c.Judge)
		}
		for _, ji := range infos {
			rec := record(ev.JobID, ji)
			x := rec.Exchanges[0]
			system = append(system, x.Messages[0].Parts[0].Text)
			if ev.JobID == "AC-ab" {
				abCall = ji.Call
				user := x.Messages[1]
				var text strings.Builder
				for _, p := range user.Parts {
					text.WriteString(p.Text)
				}
				for _, want := range []string{"The notes say what to do next.", "Ours says what changed.", "what changed and what to do.", "BEGIN ARTIFACT A"} {
					if !strings.Contains(text.String(), want) {
						t.Errorf("the ab call record's prompt lacks %q:\n%s", want, text.String())
					}
				}
				if x.Kind != "ab" || x.Schema != "ab_verdict" || !strings.Contains(x.Response, "raw_winner") {
					t.Errorf("ab exchange %+v", x)
				}
			}
		}
	}
	if kinds[events.KindAB] != 1 || kinds[events.KindCritic] != 1 || kinds[events.KindEquivalence] != 1 {
		t.Fatalf("verdicts by kind %v", kinds)
	}
	// The prompts stay in blob storage: no event of any type carries one.
	all := env.subjectMsgs("tribunal.team-a.gates.done")
	for _, typ := range []string{"verdict.emitted", "iteration.decided", "render.done", "batch.completed"} {
		all = append(all, env.subjectMsgs("tribunal.team-a."+typ)...)
	}
	for _, s := range system {
		head := s
		if len(head) > 60 {
			head = head[:60]
		}
		for _, m := range all {
			if bytes.Contains(m.Data, []byte(head)) {
				t.Fatalf("an event on %s carries a prompt (%q)", m.Subject, head)
			}
		}
	}
	// The runner's calls are kept the same way.
	for _, m := range env.subjectMsgs("tribunal.team-a.render.done") {
		ev, _ := events.Decode(m.Data)
		for _, tr := range ev.Payload.(*events.RenderDone).Transcripts {
			record("runner "+tr.CaseID+"/"+tr.Side, tr.Runner.Judge)
		}
	}
	// A rerun's cached vote names the record of the call that was made.
	res := env.Wait(env.Submit(WriteBatch(t, files), "team-a"), 30*time.Second)
	for _, j := range env.jobs(res.BatchID) {
		if j.ACID != "AC-ab" {
			continue
		}
		if len(j.Calls) != 1 || !j.Calls[0].Cached || j.Calls[0].Record == nil || j.Calls[0].Record.SHA256 != abCall.SHA256 {
			t.Fatalf("the rerun's calls %+v, want one cached call naming %s", j.Calls, abCall.SHA256)
		}
	}
}
