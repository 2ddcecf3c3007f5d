package scripted

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

func writeAnswers(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "answers.json")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const recorded = `{
  "AC-1": {"raw_winner": "B", "confidence": 0.8, "biggest_gap": "B is clearer"},
  "AC-2": {"raw_winner": "tie", "confidence": 0.4, "biggest_gap": "same"},
  "AC-bad": {"raw_winner": "C", "confidence": 0.8, "biggest_gap": "x"}
}`

func TestNewOptions(t *testing.T) {
	t.Parallel()
	answers := writeAnswers(t, recorded)
	tests := []struct {
		name      string
		o         Options
		wantModel string
		wantErr   string
	}{
		{"fixed A", Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"}, "fixed-A", ""},
		{"fixed lower-case b", Options{Fixtures: map[string]string{"ab": "b"}, Named: "ab"}, "fixed-B", ""},
		{"fixed Tie", Options{Fixtures: map[string]string{"ab": "Tie"}, Named: "ab"}, "fixed-tie", ""},
		{"fixed TIE", Options{Fixtures: map[string]string{"ab": "TIE"}, Named: "ab"}, "fixed-tie", ""},
		{"answers file", Options{AnswersFile: answers}, "recorded-answers.json", ""},
		{"both", Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab", AnswersFile: answers}, "fixed-A+recorded-answers.json", ""},
		{"bad winner", Options{Fixtures: map[string]string{"ab": "C"}, Named: "ab"}, "", `"C"`},
		{"winner ours is not a slot", Options{Fixtures: map[string]string{"ab": "ours"}, Named: "ab"}, "", "want A, B or tie"},
		{"nothing", Options{}, "", "fixed winner or an answers file"},
		{"missing answers file", Options{AnswersFile: filepath.Join(t.TempDir(), "nope.json")}, "", "scripted answers"},
		{"answers not an object", Options{AnswersFile: writeAnswers(t, `["AC-1"]`)}, "", "JSON object"},
		{"answers not JSON", Options{AnswersFile: writeAnswers(t, `{`)}, "", "JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(tt.o)
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("NewScripted succeeded (model %s)", s.DefaultModel())
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("err = %v; want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Name() != "scripted" || s.DefaultModel() != tt.wantModel {
				t.Errorf("Name, DefaultModel = %q, %q; want scripted, %q", s.Name(), s.DefaultModel(), tt.wantModel)
			}
		})
	}
}

func TestScriptedFixedWinner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		winner   string
		wantRaw  string
		wantConf float64
	}{
		{"A", "A", 1},
		{"B:0.62", "B", 0.62},
		{"tie:0.5", "tie", 0.5},
	}
	for _, tt := range tests {
		s, err := New(Options{Fixtures: map[string]string{"ab": tt.winner}, Named: "ab"})
		if err != nil {
			t.Fatal(err)
		}
		for _, key := range []string{"AC-1", "AC-999", ""} {
			v := ab.Judge(context.Background(), s, "", "i", ab.Input{Key: key, Criterion: "c"}, judge.Params{})
			if v.Status != "ok" || v.RawWinner != tt.wantRaw || v.Confidence != tt.wantConf || v.BiggestGap == "" {
				t.Errorf("winner %s key %q: vote %+v", tt.winner, key, v)
			}
			if v.Judge.Provider != "scripted" || v.Judge.Model != "fixed-"+tt.wantRaw {
				t.Errorf("judge = %+v; every scripted verdict must say so", v.Judge)
			}
		}
		if s.Calls() != 3 {
			t.Errorf("Calls() = %d; want 3", s.Calls())
		}
	}
}

func TestScriptedAnswersFile(t *testing.T) {
	t.Parallel()
	answers := writeAnswers(t, recorded)
	only, err := New(Options{AnswersFile: answers})
	if err != nil {
		t.Fatal(err)
	}
	withFixed, err := New(Options{Fixtures: map[string]string{"ab": "A:0.9"}, Named: "ab", AnswersFile: answers})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		p          *Provider
		key        string
		wantStatus events.VoteStatus
		wantRaw    string
		wantConf   float64
		wantCalls  int64
	}{
		{"recorded AC-1", only, "AC-1", "ok", "B", 0.8, 1},
		{"recorded AC-2", only, "AC-2", "ok", "tie", 0.4, 1},
		{"unknown AC without fixed winner", only, "AC-3", "unavailable", "", 0, 1},
		{"recorded invalid answer is re-asked, then a violation", only, "AC-bad", "schema_violation", "", 0, 2},
		{"recorded wins over fixed", withFixed, "AC-1", "ok", "B", 0.8, 1},
		{"fixed for unknown AC", withFixed, "AC-3", "ok", "A", 0.9, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.p.Calls()
			v := ab.Judge(context.Background(), tt.p, "", "", ab.Input{Key: tt.key, Criterion: "c"}, judge.Params{})
			if v.Status != tt.wantStatus || v.RawWinner != tt.wantRaw || v.Confidence != tt.wantConf {
				t.Errorf("vote = %+v; want %s %q %v", v, tt.wantStatus, tt.wantRaw, tt.wantConf)
			}
			if got := tt.p.Calls() - before; got != tt.wantCalls {
				t.Errorf("%d calls; want %d", got, tt.wantCalls)
			}
			if tt.wantStatus == "schema_violation" && !strings.Contains(v.Raw, `"C"`) {
				t.Errorf("Raw = %q; want the recorded answer", v.Raw)
			}
		})
	}
}

func TestScriptedComplete(t *testing.T) {
	t.Parallel()
	s, err := New(Options{AnswersFile: writeAnswers(t, recorded)})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := s.Complete(context.Background(), judge.Request{Kind: "ab", Key: "AC-1"})
	if err != nil {
		t.Fatal(err)
	}
	var got, want any
	_ = json.Unmarshal([]byte(resp.Content), &got)
	_ = json.Unmarshal([]byte(`{"raw_winner": "B", "confidence": 0.8, "biggest_gap": "B is clearer"}`), &want)
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) || resp.Model != "recorded-answers.json" || resp.Attempts != 1 {
		t.Errorf("response = %+v", resp)
	}
	if resp, _ := s.Complete(context.Background(), judge.Request{Kind: "ab", Key: "AC-1", Model: "asked-model"}); resp.Model != "asked-model" {
		t.Errorf("requested model not echoed: %q", resp.Model)
	}
	_, err = s.Complete(context.Background(), judge.Request{Kind: "ab", Key: "AC-404"})
	if !errors.Is(err, judge.ErrUnavailable) || !strings.Contains(err.Error(), "AC-404") {
		t.Errorf("err = %v; want ErrUnavailable naming the AC", err)
	}
	// A fixed ab winner answers nothing but ab requests.
	fixed, _ := New(Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if _, err := fixed.Complete(context.Background(), judge.Request{Kind: "no-such-kind", Key: "AC-1"}); !errors.Is(err, judge.ErrUnavailable) {
		t.Errorf("fixed ab winner answered another kind: %v", err)
	}
	if s.Calls() != 3 || fixed.Calls() != 1 {
		t.Errorf("Calls() = %d, %d; want 3, 1 (failed calls count too)", s.Calls(), fixed.Calls())
	}
}

func TestScriptedLatencyHonoursContext(t *testing.T) {
	s, err := New(Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab", Latency: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Complete(ctx, judge.Request{Kind: "ab", Key: "AC-1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v; want the context's error", err)
	}
	if time.Since(start) > time.Second {
		t.Errorf("Complete ignored the context for %v", time.Since(start))
	}

	quick, _ := New(Options{Fixtures: map[string]string{"ab": "B"}, Named: "ab", Latency: 20 * time.Millisecond})
	start = time.Now()
	if _, err := quick.Complete(context.Background(), judge.Request{Kind: "ab"}); err != nil {
		t.Fatal(err)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Errorf("latency not simulated: %v", time.Since(start))
	}
}

// TestScriptedCountsRecordedKeys: a recorded list answers its n-th call with its n-th
// entry (the last repeating), so the calls of each recorded key are counted; a key a
// fixture answers is counted only when CountEveryKey asks, so a large batch judged by a
// fixed winner keeps no count for each of its ACs.
func TestScriptedCountsRecordedKeys(t *testing.T) {
	t.Parallel()
	answers := writeAnswers(t, `{"AC-seq": [{"raw_winner": "A", "confidence": 0.9, "biggest_gap": "x"}, {"raw_winner": "B", "confidence": 0.9, "biggest_gap": "y"}]}`)
	for _, every := range []bool{false, true} {
		s, err := New(Options{AnswersFile: answers, Fixtures: map[string]string{"ab": "A"}, Named: "ab", CountEveryKey: every})
		if err != nil {
			t.Fatal(err)
		}
		var winners []string
		for range 3 {
			resp, err := s.Complete(context.Background(), judge.Request{Kind: "ab", Key: "AC-seq"})
			if err != nil {
				t.Fatal(err)
			}
			var a struct {
				Winner string `json:"raw_winner"`
			}
			if err := json.Unmarshal([]byte(resp.Content), &a); err != nil {
				t.Fatal(err)
			}
			winners = append(winners, a.Winner)
		}
		if strings.Join(winners, ",") != "A,B,B" {
			t.Errorf("every %v: a recorded list answered %v, want A,B,B", every, winners)
		}
		for i := range 100 {
			if _, err := s.Complete(context.Background(), judge.Request{Kind: "ab", Key: "AC-" + string(rune('a'+i%26)) + string(rune('0'+i/26))}); err != nil {
				t.Fatal(err)
			}
		}
		want := 1
		if every {
			want = 101
		}
		if s.CallsFor("AC-seq") != 3 || len(s.byKey) != want {
			t.Errorf("every %v: AC-seq counted %d (want 3), %d keys counted (want %d)", every, s.CallsFor("AC-seq"), len(s.byKey), want)
		}
	}
}
