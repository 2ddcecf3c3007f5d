package events_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"

	"github.com/vmihailenco/msgpack/v5"
)

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func abSpec() JobSpec {
	return JobSpec{Kind: KindAB, ACID: "AC-7", Criterion: "clear headline", KindPart: &ab.Spec{
		Ours:      Source{Name: "ours.md", Blob: &Blob{SHA256: digest, MediaType: "text/markdown", Size: 3}},
		Reference: Source{Name: "https://example.test/ref", URL: "https://example.test/ref"},
		Threshold: 0.75,
	}}
}

func art() Artifact {
	return Artifact{Blob: Blob{SHA256: digest, MediaType: "image/png", Size: 10}, Class: "image"}
}

// samples holds one valid payload of every event type.
func samples() []Payload {
	return []Payload{
		&JobSubmitted{Spec: abSpec(), Index: 0, BatchSize: 2},
		&RenderRequested{Spec: abSpec()},
		&RenderDone{Spec: abSpec(), Artifacts: map[string]Artifact{"ours": art(), "reference": art()}},
		&GatesDone{Kind: KindAB, Criterion: "c", Gates: []Gate{{Name: "readable", Status: "pass"}}, Slots: []Slot{{Name: "A", Artifact: art()}, {Name: "B", Artifact: art()}}},
		&GatesFailed{Kind: KindAB, ACID: "AC-7", Blocked: "missing"},
		&VerdictEmitted{Kind: KindAB, Votes: []Vote{{Judge: JudgeInfo{Provider: "scripted", Model: "fixed"}, Order: "AB", Status: "ok", RawWinner: "A", Confidence: 0.9, BiggestGap: "x"}}},
		&IterationDecided{Kind: KindAB, ACID: "AC-7", Status: "compared", Final: true, KindPart: &ab.Decided{LabelAssignment: "A=ours,B=reference", Winner: "ours"}},
		&SignoffRecorded{Feature: "f", Target: "t", State: "s", Appearance: "light", HumanSpotcheck: "pending"},
		&ManifestEmitted{Kind: KindAB, Manifest: Blob{SHA256: digest, MediaType: "application/json", Size: 1}},
		&JobBlocked{Kind: KindAB, ACID: "AC-7", Stage: "render", Reason: "missing"},
		&BatchCompleted{Total: 2, Compared: 2},
		&RenderUnchanged{Kind: KindRubric, ACID: "AC-7", Render: Blob{SHA256: digest, MediaType: "image/png", Size: 9}},
		&SpotcheckRecorded{ACID: "AC-7", Approved: true},
		&ViewReset{ACID: "AC-7", Loop: 1, By: "me", Reason: "budget spent on a frozen dimension; the rubric is fixed"},
		&BatchOpened{Size: 2, Digest: digest, Pages: []Blob{{SHA256: digest, MediaType: "application/json", Size: 40}}},
		&BatchCancelRequested{By: "alice@host"},
		&JobCancelRequested{Kind: KindAB, Index: 1, BatchSize: 2, By: "alice@host"},
		&ReviewRecorded{Kind: KindAB, Answer: `{"raw_winner":"A","confidence":0.8,"biggest_gap":"x"}`, By: "ann@team", Via: "import"},
	}
}

func TestRoundTripEveryType(t *testing.T) {
	t.Parallel()
	seen := map[Type]bool{}
	for _, p := range samples() {
		e := New(p, "team-a", "b1", "AC-7", 0, "", nil)
		data, err := Encode(e)
		if err != nil {
			t.Fatalf("%s: encode: %v", p.EventType(), err)
		}
		got, err := Decode(data)
		if err != nil {
			t.Fatalf("%s: decode: %v", p.EventType(), err)
		}
		if got.ID != e.ID || got.Type != p.EventType() || got.Tenant != "team-a" || got.CorrelationID == "" {
			t.Fatalf("%s: envelope changed: %+v", p.EventType(), got.Envelope)
		}
		seen[got.Type] = true
	}
	for _, typ := range AllTypes {
		if !seen[typ] {
			t.Errorf("no round-trip sample for %s", typ)
		}
	}
}

// TestChainOnTheWire pins the digest chain as an optional wire field: an event without
// one encodes to exactly the bytes it had before chains existed, a derived event carries
// its cause's chain and then its cause's link, and a reader that knows no chain (the
// envelope of an older build) still reads an event that has one.
func TestChainOnTheWire(t *testing.T) {
	cause := New(&RenderRequested{Spec: abSpec()}, "team-a", "b1", "AC-7", 0, "", nil)
	plain, err := Encode(cause)
	if err != nil {
		t.Fatal(err)
	}
	var generic map[string]any
	if err := msgpack.Unmarshal(plain, &generic); err != nil {
		t.Fatal(err)
	}
	if _, ok := generic["chain"]; ok {
		t.Fatalf("an event without a chain writes one: %v", generic)
	}
	done := New(&RenderDone{Spec: abSpec(), Artifacts: map[string]Artifact{"ours": art(), "reference": art()}}, "team-a", "b1", "AC-7", 0, "", &cause.Envelope)
	done.Chain = ChainOf(cause.Envelope, digest)
	gated := New(&GatesDone{Kind: KindAB, Gates: []Gate{{Name: "readable", Status: "pass"}}, Slots: []Slot{{Name: "A", Artifact: art()}, {Name: "B", Artifact: art()}}}, "team-a", "b1", "AC-7", 0, "", &done.Envelope)
	gated.Chain = ChainOf(done.Envelope, strings.Repeat("f", 64))
	data, err := Encode(gated)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{cause.ID + ":" + digest, done.ID + ":" + strings.Repeat("f", 64)}
	if strings.Join(got.Chain, ",") != strings.Join(want, ",") {
		t.Fatalf("chain %v, want %v", got.Chain, want)
	}
	if id, sha, ok := ParseLink(got.Chain[1]); !ok || id != done.ID || sha != strings.Repeat("f", 64) {
		t.Fatalf("ParseLink(%q) = %q, %q, %v", got.Chain[1], id, sha, ok)
	}
	// The envelope as builds before chains read it.
	var old struct {
		V       int                `msgpack:"v"`
		ID      string             `msgpack:"id"`
		Type    Type               `msgpack:"type"`
		Tenant  string             `msgpack:"tenant"`
		BatchID string             `msgpack:"batch"`
		Data    msgpack.RawMessage `msgpack:"data"`
	}
	if err := msgpack.Unmarshal(data, &old); err != nil || old.ID != gated.ID || len(old.Data) == 0 {
		t.Fatalf("an older reader: %+v, %v", old, err)
	}
}

func TestDeterministicIDs(t *testing.T) {
	t.Parallel()
	a := NewID(TypeVerdictEmitted, "t", "b", "AC-1", 0, "")
	if a != NewID(TypeVerdictEmitted, "t", "b", "AC-1", 0, "") {
		t.Fatal("same step, different id")
	}
	for _, other := range []string{
		NewID(TypeVerdictEmitted, "t", "b", "AC-1", 1, ""),
		NewID(TypeVerdictEmitted, "u", "b", "AC-1", 0, ""),
		NewID(TypeRenderDone, "t", "b", "AC-1", 0, ""),
		NewID(TypeVerdictEmitted, "t", "b", "AC-1", 0, "swap"),
		NewID(TypeVerdictEmitted, "t", "bA", "C-1", 0, ""), // no ambiguity from concatenation
	} {
		if other == a {
			t.Fatalf("distinct steps share id %s", a)
		}
	}
}

func TestPayloadValidation(t *testing.T) {
	t.Parallel()
	bad := abSpec()
	ab.SpecOf(bad.KindPart).Threshold = 1.5
	spec2 := abSpec()
	ab.SpecOf(spec2.KindPart).Ours = Source{Name: "x", URL: "u", Blob: &Blob{SHA256: digest, MediaType: "m"}}
	badPositions := abSpec()
	ab.SpecOf(badPositions.KindPart).Positions = "sometimes"
	badAuto := abSpec()
	ab.SpecOf(badAuto.KindPart).Positions, ab.SpecOf(badAuto.KindPart).AutoSwap = PositionsAuto, &AutoSwap{Confidence: 0.8, FlipRate: 1.2}
	auto := abSpec()
	ab.SpecOf(auto.KindPart).Positions, ab.SpecOf(auto.KindPart).AutoSwap = PositionsAuto, &AutoSwap{Confidence: 0.8, FlipRate: 0.1}
	if _, err := Encode(New(&JobSubmitted{Spec: auto, BatchSize: 1}, "team-a", "b", "AC-7", 0, "", nil)); err != nil {
		t.Errorf("positions auto refused: %v", err)
	}
	cases := []struct {
		p     Payload
		field string
	}{
		{&JobSubmitted{Spec: bad, BatchSize: 1}, "ab.threshold"},
		{&JobSubmitted{Spec: spec2, BatchSize: 1}, "ab.ours"},
		{&JobSubmitted{Spec: badPositions, BatchSize: 1}, "ab.positions"},
		{&JobSubmitted{Spec: badAuto, BatchSize: 1}, "ab.auto_swap.flip_rate"},
		{&GatesDone{Kind: KindAB, Positions: PositionsAuto, AutoSwap: &AutoSwap{Confidence: -1}, Slots: []Slot{{Name: "A", Artifact: art()}, {Name: "B", Artifact: art()}}}, "auto_swap.confidence"},
		{&JobSubmitted{Spec: abSpec(), BatchSize: 1, Index: 1}, "index"},
		// de157a3 took these and the aggregator panicked sizing the completion tree.
		{&JobSubmitted{Spec: abSpec(), BatchSize: 1 << 31}, "batch_size"},
		{&JobSubmitted{Spec: abSpec(), BatchSize: 1 << 62, Index: 1 << 61}, "batch_size"},
		{&JobSubmitted{Spec: JobSpec{Kind: "poetry", ACID: "x"}, BatchSize: 1}, "kind"},
		{&GatesDone{Kind: KindAB, Slots: []Slot{{Name: "B", Artifact: art()}, {Name: "A", Artifact: art()}}}, "slots"},
		{&GatesDone{Kind: KindAB, Gates: []Gate{{Name: "g", Status: "fail"}}, Slots: []Slot{{Name: "A", Artifact: art()}, {Name: "B", Artifact: art()}}}, "gates[0]"},
		{&VerdictEmitted{Kind: KindAB, Votes: []Vote{{Judge: JudgeInfo{Provider: "p"}, Order: "CD", Status: "ok"}}}, "votes[0].order"},
		{&RenderDone{Spec: abSpec(), Artifacts: map[string]Artifact{"ours": {Blob: Blob{SHA256: "xyz", MediaType: "m"}, Class: "image"}}}, "artifacts.ours.blob.sha256"},
	}
	for _, c := range cases {
		_, err := Encode(New(c.p, "team-a", "b", "AC-7", 0, "", nil))
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != c.field {
			t.Errorf("%s: got %v, want field %s", c.p.EventType(), err, c.field)
		}
	}
}

func TestSubjects(t *testing.T) {
	t.Parallel()
	s, err := Subject("team-a", TypeRenderRequested)
	if err != nil || s != "tribunal.team-a.render.requested" {
		t.Fatalf("got %q %v", s, err)
	}
	tenant, typ, err := ParseSubject(s)
	if err != nil || tenant != "team-a" || typ != TypeRenderRequested {
		t.Fatalf("parse: %q %q %v", tenant, typ, err)
	}
	if AnyTenant(TypeGatesDone) != "tribunal.*.gates.done" {
		t.Fatal(AnyTenant(TypeGatesDone))
	}
	for _, bad := range []string{"", "a.b", "*", ">", "a b", "Team", "_dlq", "-x", strings.Repeat("a", 64)} {
		if _, err := Subject(bad, TypeJobSubmitted); err == nil {
			t.Errorf("tenant %q accepted", bad)
		}
	}
	if _, err := Subject("ok", "nope"); err == nil {
		t.Error("unknown type accepted")
	}
	if _, _, err := ParseSubject(DeadLetterSubject("judge")); err == nil {
		t.Error("dead-letter subject parsed as a tenant subject")
	}
}

func TestEncodeStampsTime(t *testing.T) {
	e := New(&JobBlocked{Kind: KindAB, ACID: "AC-1", Reason: "r"}, "t", "b", "AC-1", 0, "", nil)
	if time.Since(e.Time) > time.Minute {
		t.Fatal("time not set")
	}
	cause := e.Envelope
	child := New(&JobBlocked{Kind: KindAB, ACID: "AC-1", Reason: "r2"}, "t", "b", "AC-1", 0, "x", &cause)
	if child.CausationID != e.ID || child.CorrelationID != e.CorrelationID {
		t.Fatal("causation/correlation not carried")
	}
}

func FuzzDecode(f *testing.F) {
	for _, p := range samples() {
		b, err := Encode(New(p, "team-a", "b1", "AC-7", 0, "", nil))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			if !IsDecodeError(err) {
				t.Fatalf("decode error is not a FieldError: %v", err)
			}
			return
		}
		// A decoded event must re-encode: decoding validated everything.
		if _, err := Encode(e); err != nil {
			t.Fatalf("decoded event does not re-encode: %v", err)
		}
	})
}

// TestSpotcheckDimension: a rejected spot-check.recorded names a dimension; the words of
// the HE-2 answer ("reject", "y") and the human_spotcheck states ("pending", "approved")
// never pass for one (a rejection once recorded "reject" as the dimension).
func TestSpotcheckDimension(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p  SpotcheckRecorded
		ok bool
	}{
		{SpotcheckRecorded{ACID: "v", Approved: true}, true},
		{SpotcheckRecorded{ACID: "v", Dimension: "typography"}, true},
		{SpotcheckRecorded{ACID: "v", Dimension: ""}, false},
		{SpotcheckRecorded{ACID: "v", Dimension: "reject"}, false},
		{SpotcheckRecorded{ACID: "v", Dimension: "Reject"}, false},
		{SpotcheckRecorded{ACID: "v", Dimension: "approved"}, false},
		{SpotcheckRecorded{ACID: "v", Dimension: "pending"}, false},
		{SpotcheckRecorded{ACID: "v", Dimension: "y"}, false},
		{SpotcheckRecorded{ACID: "v", Dimension: " typography"}, false},
		{SpotcheckRecorded{ACID: "v", Approved: true, Dimension: "y"}, false},
	} {
		_, err := Encode(New(&tc.p, "team-a", "b", "v", 0, "", nil))
		var fe *FieldError
		if tc.ok != (err == nil) || err != nil && (!errors.As(err, &fe) || fe.Field != "dimension") {
			t.Errorf("%+v: %v", tc.p, err)
		}
	}
}

// TestBatchEventsNameTheBadField: the batch-wide events refuse what the aggregator could
// not act on, naming the field.
func TestBatchEventsNameTheBadField(t *testing.T) {
	t.Parallel()
	page := Blob{SHA256: digest, MediaType: "application/json", Size: 40}
	cases := []struct {
		name  string
		p     Payload
		field string
	}{
		{"no size", &BatchOpened{Digest: digest, Pages: []Blob{page}}, "size"},
		{"bad digest", &BatchOpened{Size: 1, Digest: "abc", Pages: []Blob{page}}, "digest"},
		{"pages short of the size", &BatchOpened{Size: PlanPageSize + 1, Digest: digest, Pages: []Blob{page}}, "pages"},
		{"bad page", &BatchOpened{Size: 1, Digest: digest, Pages: []Blob{{SHA256: "x", MediaType: "application/json"}}}, "pages[0].sha256"},
		{"nobody cancels", &BatchCancelRequested{}, "by"},
		{"control characters in by", &BatchCancelRequested{By: "alice\nbob"}, "by"},
		{"negative page", &BatchCancelRequested{By: "alice", Page: -1}, "page"},
		{"unknown kind", &JobCancelRequested{Kind: "poetry", Index: 0, BatchSize: 1, By: "alice"}, "kind"},
		{"index past the batch", &JobCancelRequested{Kind: KindAB, Index: 1, BatchSize: 1, By: "alice"}, "index"},
		{"by too long", &JobCancelRequested{Kind: KindAB, Index: 0, BatchSize: 1, By: strings.Repeat("a", 201)}, "by"},
		{"a batch past the maximum", &JobCancelRequested{Kind: KindAB, Index: 0, BatchSize: MaxBatchSize + 1, By: "alice"}, "batch_size"},
		{"a plan past the maximum", &BatchOpened{Size: 1 << 31, Digest: digest, Pages: []Blob{page}}, "size"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Encode(New(c.p, "team-a", "b1", "", 0, "", nil))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || fe.Doc != string(c.p.EventType()) {
				t.Fatalf("got %v, want a field error on %s.%s", err, c.p.EventType(), c.field)
			}
		})
	}
	if PlanPages(1) != 1 || PlanPages(PlanPageSize) != 1 || PlanPages(PlanPageSize+1) != 2 {
		t.Fatal("PlanPages")
	}
	if CancelStep(0) != "" || CancelStep(3) != "page-3" {
		t.Fatal("CancelStep")
	}
}

// TestBatchCompletedJSONIsSnakeCase: the summary in results.json, `--json` outputs and
// the batch record uses the msgpack names, and a record stored before the JSON names
// existed (Go field names) still reads back whole, exit code included.
func TestBatchCompletedJSONIsSnakeCase(t *testing.T) {
	t.Parallel()
	s := BatchCompleted{Total: 3, Compared: 2, Blocked: 1, Violations: 0, Suggestions: 1, ExitCode: 1,
		Manifests: []Blob{{SHA256: strings.Repeat("a", 64), MediaType: "application/json", Size: 2}}}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"total":3,"compared":2,"blocked":1,"violations":0,"suggestions":1,"exit_code":1,"manifests":[{"sha256":"` + strings.Repeat("a", 64) + `","media_type":"application/json","size":2}]}`
	if string(data) != want {
		t.Fatalf("JSON\n got %s\nwant %s", data, want)
	}
	var back BatchCompleted
	if err := json.Unmarshal(data, &back); err != nil || back.ExitCode != 1 || back.Total != 3 || len(back.Manifests) != 1 {
		t.Fatalf("round trip %+v %v", back, err)
	}
	legacy := `{"Total":3,"Compared":2,"Blocked":1,"Violations":0,"Suggestions":1,"ExitCode":4}`
	back = BatchCompleted{}
	if err := json.Unmarshal([]byte(legacy), &back); err != nil || back.ExitCode != 4 || back.Total != 3 || back.Suggestions != 1 {
		t.Fatalf("legacy record %+v %v", back, err)
	}
}
