package trust

import (
	"cmp"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/trials"
)

// Order and status values of a judge call, as events.Vote records them.
const (
	// OrderShown is a call that saw the slots as the gater placed them ("AB");
	// OrderSwapped is the second call of a swapped AC, with the slots exchanged ("BA").
	OrderShown   = "AB"
	OrderSwapped = "BA"
	// StatusOK marks a call that produced a valid answer; any other status (a schema
	// violation, an unavailable provider) means the call has no answer.
	StatusOK = "ok"
)

// The answers of a pairwise judgment. A call answers in slots (SlotA, SlotB, SlotTie:
// the artifacts as it was shown them, blind); un-shuffled, its answer is a Winner, in
// roles. A pairwise kind spells its answers so on the wire (its own package holds that
// its constants equal these).
const (
	SlotA   = "A"
	SlotB   = "B"
	SlotTie = "tie"
)

// Winner is a pairwise answer in roles: our artifact, the reference, or a tie.
type Winner string

// The Winner values.
const (
	WinnerOurs      Winner = "ours"
	WinnerReference Winner = "reference"
	WinnerTie       Winner = "tie"
)

// Valid reports whether w is one of the three answers.
func (w Winner) Valid() bool {
	return w == WinnerOurs || w == WinnerReference || w == WinnerTie
}

// Judgment is one judge call's answer on one pairwise AC: one vote of a verdict. The
// report passes the calls of each AC's deciding verdict (not of superseded attempts).
type Judgment struct {
	// AC is the AC (job) id.
	AC string `json:"ac"`
	// Judge names the judge as verdicts do, "provider/model" (e.g. "openai/gpt-4o").
	Judge string `json:"judge"`
	// Order is OrderShown for the only or first call, OrderSwapped for a swapped AC's
	// second. Empty means OrderShown.
	Order string `json:"order,omitempty"`
	// Status is StatusOK when the call produced a valid answer.
	Status string `json:"status"`
	// RawWinner is the answer over the slots as this call saw them: A, B or tie (any
	// letter case, as the pairwise kind accepts).
	RawWinner string `json:"raw_winner,omitempty"`
	// Winner is the answer un-shuffled to roles: ours, reference or tie.
	Winner Winner `json:"winner,omitempty"`
	// Confidence is the judge's stated confidence in [0, 1].
	Confidence float64 `json:"confidence"`
	// LenOurs and LenRef are the lengths of our artifact and the reference, for text
	// artifacts (any unit, only their ratio counts: `tribunal report` passes the stored
	// sizes in bytes); 0 when unknown or not text (images), which leaves the judgment out
	// of the length figures.
	LenOurs int `json:"len_ours,omitempty"`
	LenRef  int `json:"len_ref,omitempty"`
	// Trial is which of the AC's repeated trials the call was (0 the first).
	Trial int `json:"trial,omitempty"`
}

// Slot returns the call's answer in slot terms, canonically spelled ("A", "B" or "tie"),
// or "" when the call has no valid answer.
func (j Judgment) Slot() string {
	if j.Status != StatusOK {
		return ""
	}
	for _, s := range []string{SlotA, SlotB, SlotTie} {
		if strings.EqualFold(j.RawWinner, s) {
			return s
		}
	}
	return ""
}

// Answer returns the call's un-shuffled answer (ours, reference or tie), or "" when the
// call has no valid answer.
func (j Judgment) Answer() Winner {
	if j.Status != StatusOK || !j.Winner.Valid() {
		return ""
	}
	return j.Winner
}

func (j Judgment) swapped() bool { return j.Order == OrderSwapped }

func (j Judgment) judgeName() string { return j.Judge }

// Outcome is one pairwise AC's final result in a batch, as results.json records it.
type Outcome struct {
	AC string `json:"ac"`
	// Winner is ours, reference or tie; ignored when Blocked.
	Winner Winner `json:"winner,omitempty"`
	// Blocked means the AC got no verdict (a missing artifact, a failed judge call, ...).
	Blocked bool `json:"blocked,omitempty"`
}

// Call is one judge call of any kind, for the cost figures.
type Call struct {
	Judge  string `json:"judge"`
	Status string `json:"status"`
	// PromptTokens and CompletionTokens are the provider's usage report.
	PromptTokens     int `json:"prompt_tokens,omitempty"`
	CompletionTokens int `json:"completion_tokens,omitempty"`
	// LatencyMillis is the call's wall time as the judge measured it.
	LatencyMillis int64 `json:"latency_ms,omitempty"`
	// Cached means the answer came from the judge-call cache: no provider call was made
	// (the tokens and latency are the original call's).
	Cached bool `json:"cached,omitempty"`
}

func (c Call) judgeName() string { return c.Judge }

// SpotCheck is a person's HE-2 check of a judge's sign-off: approved, or the one
// dimension the person says the judge got wrong.
type SpotCheck struct {
	AC        string `json:"ac"`
	Judge     string `json:"judge"`
	Approved  bool   `json:"approved"`
	Dimension string `json:"dimension,omitempty"`
}

func (s SpotCheck) judgeName() string { return s.Judge }

// Group holds the items of one judge, in input order.
type Group[T any] struct {
	Judge string
	Items []T
}

// ByJudge groups items by judge, sorted by judge name, so each per-judge figure is
// computed by passing one group's items to the same function as the whole batch.
func ByJudge[T interface{ judgeName() string }](items []T) []Group[T] {
	var out []Group[T]
	index := map[string]int{}
	for _, it := range items {
		name := it.judgeName()
		i, ok := index[name]
		if !ok {
			i = len(out)
			index[name] = i
			out = append(out, Group[T]{Judge: name})
		}
		out[i].Items = append(out[i].Items, it)
	}
	slices.SortFunc(out, func(a, b Group[T]) int { return cmp.Compare(a.Judge, b.Judge) })
	return out
}

// JudgeOutcomes returns each judge's own outcome per AC from its calls, sorted by judge
// and AC: the judge's answer when all its calls on the AC agree; a tie when they do not
// (a swap pair that flipped, as a pairwise kind combines a swap); blocked when any of its
// calls on the AC has no valid answer. An AC judged with repeated trials takes each
// trial's outcome so, then the trials' strict majority (trials.Majority), a tie without
// one.
func JudgeOutcomes(js []Judgment) []Group[Outcome] {
	var out []Group[Outcome]
	for _, g := range ByJudge(js) {
		type key struct {
			ac    string
			trial int
		}
		byAC := map[key]*Outcome{}
		var order []string
		trialsOf := map[string][]key{}
		for _, j := range g.Items {
			k := key{j.AC, j.Trial}
			o, ok := byAC[k]
			if !ok {
				o = &Outcome{AC: j.AC, Winner: j.Answer()}
				byAC[k] = o
				if len(trialsOf[j.AC]) == 0 {
					order = append(order, j.AC)
				}
				trialsOf[j.AC] = append(trialsOf[j.AC], k)
			}
			w := j.Answer()
			switch {
			case w == "":
				o.Blocked, o.Winner = true, ""
			case o.Blocked:
			case o.Winner != w:
				o.Winner = WinnerTie
			}
		}
		slices.Sort(order)
		grp := Group[Outcome]{Judge: g.Judge}
		for _, ac := range order {
			ks := trialsOf[ac]
			if len(ks) == 1 {
				grp.Items = append(grp.Items, *byAC[ks[0]])
				continue
			}
			o := Outcome{AC: ac}
			var answers []string
			for _, k := range ks {
				t := byAC[k]
				o.Blocked = o.Blocked || t.Blocked
				answers = append(answers, string(t.Winner))
			}
			if !o.Blocked {
				o.Winner = WinnerTie
				if r := trials.Majority(answers, 0); r.Unsure == "" {
					o.Winner = Winner(r.Answer)
				}
			}
			grp.Items = append(grp.Items, o)
		}
		out = append(out, grp)
	}
	return out
}
