package ab

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// ManifestStatus is the status every freshly built manifest carries: its suggestions
// wait for the vote.
const ManifestStatus = "pending_review"

// SuggestionCategory is the category of every suggestion this judge makes.
const SuggestionCategory = "reference-gap"

// SuggestionStatus is the status of a suggestion nobody has voted on yet.
const SuggestionStatus = "pending"

// SuggestionEffort is the effort written on every suggestion. The judge compares
// artifacts; it has no basis for estimating the work a fix takes, so it writes the
// neutral middle value the seed's example uses and leaves the estimate to the voters.
const SuggestionEffort = "medium"

// ComparisonStatus is the status of one comparison record: the seed's manifest uses three
// of the job statuses.
type ComparisonStatus = events.Status

const (
	// StatusCompared: a valid verdict was recorded.
	StatusCompared = events.StatusCompared
	// StatusBlocked: the comparison could not be made; BlockedReason says why.
	StatusBlocked = events.StatusBlocked
	// StatusSchemaViolation: the judge answered, but not within the schema;
	// BlockedReason holds the violation.
	StatusSchemaViolation = events.StatusSchemaViolation
)

// Manifest is the vote manifest in the seed's shape, consumed by the vote step.
//
// Every field up to Suggestions is the shared shape and is always written. Tribunal adds
// its own data only under the optional "tribunal" key, so a consumer that knows just the
// shared shape can ignore one key and lose nothing it relies on.
type Manifest struct {
	ReviewID    string       `json:"review_id"`
	Source      string       `json:"source"`
	GeneratedAt time.Time    `json:"generated_at"`
	Status      string       `json:"status"`
	Comparisons []Comparison `json:"comparisons"`
	Suggestions []Suggestion `json:"suggestions"`
	// Tribunal holds tribunal's additions to the shared shape.
	Tribunal *ManifestExtras `json:"tribunal,omitempty"`
}

// ManifestExtras is what tribunal adds at the manifest level.
type ManifestExtras struct {
	// Threshold is the confidence threshold the suggestions were routed with. Routing
	// cannot be re-derived from the comparisons without it.
	Threshold float64 `json:"threshold"`
}

// Comparison is the audit record of one AC's comparison. It is written for every AC,
// blocked or not, because a missing record would look like an AC that was never asked
// about.
type Comparison struct {
	ACID              string `json:"ac_id"`
	OursArtifact      string `json:"ours_artifact,omitempty"`
	ReferenceArtifact string `json:"reference_artifact,omitempty"`
	// LabelAssignment records the blind so a reviewer can re-derive it with Assign.
	LabelAssignment Assignment `json:"label_assignment"`
	// RawWinner is the answer over the slots; Winner is what it means under
	// LabelAssignment. Both are empty unless the comparison was compared.
	RawWinner string `json:"raw_winner,omitempty"`
	Winner    Winner `json:"winner,omitempty"`
	// Confidence is nil unless compared: a blocked record has no confidence, and writing
	// 0 would claim one.
	Confidence *float64         `json:"confidence,omitempty"`
	BiggestGap string           `json:"biggest_gap,omitempty"`
	Status     ComparisonStatus `json:"status"`
	// BlockedReason says why there is no verdict: the blocking cause for blocked
	// records, the violation for schema_violation ones. One field serves both because
	// consumers of the shared shape already show it wherever a verdict is missing.
	BlockedReason string `json:"blocked_reason,omitempty"`
	// Tribunal holds tribunal's additions to the shared record.
	Tribunal *ComparisonExtras `json:"tribunal,omitempty"`
}

// ComparisonExtras is what tribunal adds to one comparison record. All of it is
// optional evidence; the shared fields above alone decide routing.
type ComparisonExtras struct {
	// Judge identifies who produced the verdict.
	Judge *JudgeInfo `json:"judge,omitempty"`
	// Swap holds both raw answers when the comparison was judged twice with the slots
	// exchanged (see CombineSwap).
	Swap *SwapRecord `json:"swap,omitempty"`
	// Panel holds every vote when several judges answered (see Panel).
	Panel *PanelResult `json:"panel,omitempty"`
	// Answer is the judge's raw text when it violated the schema, kept for the audit.
	Answer string `json:"answer,omitempty"`
	// Unpinned marks a verdict with a call that pinned no temperature (the server's
	// default applied): judged again, it may come out differently.
	Unpinned bool `json:"temperature_unpinned,omitempty"`
	// Review is set when a person's review decided the comparison (the batch's review
	// decides): the shared fields are then the person's answer, and this keeps who and
	// what the judge had said.
	Review *ReviewNote `json:"review,omitempty"`
	// Trials is how repeated trials were reduced to the winner; Ladder which rung of a
	// judge ladder decided and why it climbed.
	Trials *events.TrialsResult `json:"trials,omitempty"`
	Ladder *events.LadderResult `json:"ladder,omitempty"`
}

// ReviewNote is what a comparison decided by a person's review keeps of it and of the
// judge's verdict it replaced.
type ReviewNote struct {
	DecidedBy string `json:"decided_by"`
	By        string `json:"by"`
	// JudgeWinner, JudgeRawWinner and JudgeConfidence are the judge's verdict.
	JudgeWinner     Winner     `json:"judge_winner,omitempty"`
	JudgeRawWinner  string     `json:"judge_raw_winner,omitempty"`
	JudgeConfidence *float64   `json:"judge_confidence,omitempty"`
	Judge           *JudgeInfo `json:"judge,omitempty"`
}

// JudgeInfo identifies the model and prompt a verdict was obtained with, which is what
// makes a verdict reproducible and a drift traceable.
type JudgeInfo struct {
	Provider      string `json:"provider,omitempty"`
	Model         string `json:"model,omitempty"`
	PromptVersion string `json:"prompt_version,omitempty"`
	// Sampling is how the (first) call was sampled: temperature, seed, token limit,
	// response format and the model id the server reported.
	Sampling *events.Sampling `json:"sampling,omitempty"`
}

// SwapRecord is the evidence of a position-swap pair: both answers, each with the
// assignment it was judged under, and whether they agreed once un-shuffled. Record
// only answers that passed Validate; an out-of-range confidence such as NaN cannot be
// written as JSON (keep such an answer's text in ComparisonExtras.Answer instead).
type SwapRecord struct {
	First            RawVerdict `json:"first"`
	FirstAssignment  Assignment `json:"first_assignment"`
	Second           RawVerdict `json:"second"`
	SecondAssignment Assignment `json:"second_assignment"`
	Consistent       bool       `json:"consistent"`
}

// Suggestion is one entry in the shared suggestion shape, field for field; this package
// only fills it in and adds nothing to it.
type Suggestion struct {
	ID                string   `json:"id"`
	Category          string   `json:"category"`
	Tag               Tag      `json:"tag"`
	OneLiner          string   `json:"one_liner"`
	Title             string   `json:"title"`
	Description       string   `json:"description"`
	Files             []string `json:"files"`
	Impact            Impact   `json:"impact"`
	Effort            string   `json:"effort"`
	SuggestedApproach string   `json:"suggested_approach"`
	Status            string   `json:"status"`
}

// Compared records a valid verdict for an AC. The winner is derived from the raw answer
// and the assignment here, never taken from the judge. For a winner that came from a
// swap pair or a panel, pass a RawVerdict whose RawWinner is a.Label(winner), so that
// raw_winner and label_assignment still re-derive the winner. The verdict should have
// passed Validate; one that did not is turned into a schema violation by BuildManifest
// rather than routed.
func Compared(acID string, p Pair, a Assignment, v RawVerdict) Comparison {
	raw, _ := canonicalRawWinner(v.RawWinner)
	conf := v.Confidence
	return Comparison{
		ACID:              acID,
		OursArtifact:      p.Ours,
		ReferenceArtifact: p.Reference,
		LabelAssignment:   a,
		RawWinner:         raw,
		Winner:            Unshuffle(v.RawWinner, a),
		Confidence:        &conf,
		BiggestGap:        v.BiggestGap,
		Status:            StatusCompared,
	}
}

// Blocked records an AC that could not be compared, with the reason. The run goes on:
// a blocked AC never stops the batch.
func Blocked(acID string, p Pair, a Assignment, reason string) Comparison {
	return Comparison{
		ACID:              acID,
		OursArtifact:      p.Ours,
		ReferenceArtifact: p.Reference,
		LabelAssignment:   a,
		Status:            StatusBlocked,
		BlockedReason:     reason,
	}
}

// SchemaViolation records an AC whose verdict broke the schema, with the error. The
// invalid values are not copied into the shared fields (a NaN confidence could not even
// be written as JSON); keep the raw answer in Tribunal.Answer if it is needed.
func SchemaViolation(acID string, p Pair, a Assignment, err error) Comparison {
	reason := "schema violation"
	if err != nil {
		reason = err.Error()
	}
	return Comparison{
		ACID:              acID,
		OursArtifact:      p.Ours,
		ReferenceArtifact: p.Reference,
		LabelAssignment:   a,
		Status:            StatusSchemaViolation,
		BlockedReason:     reason,
	}
}

// check re-derives a compared record and reports why it cannot be trusted, or "" when
// it can. The aggregator never trusts what a record claims: the winner must follow from
// raw_winner under label_assignment, and the confidence must be in range.
func (c Comparison) check() string {
	if !c.LabelAssignment.Valid() {
		return fmt.Sprintf("label_assignment %s is not a valid assignment", c.LabelAssignment)
	}
	if _, ok := canonicalRawWinner(c.RawWinner); !ok {
		return fmt.Sprintf("raw_winner %q: must be \"A\", \"B\" or \"tie\"", c.RawWinner)
	}
	if w := Unshuffle(c.RawWinner, c.LabelAssignment); w != c.Winner {
		return fmt.Sprintf("winner %q does not follow from raw_winner %q under %s (expected %q)", c.Winner, c.RawWinner, c.LabelAssignment, w)
	}
	if c.Confidence == nil {
		return "confidence missing"
	}
	if f := *c.Confidence; math.IsNaN(f) || f < 0 || f > 1 {
		return fmt.Sprintf("confidence %v: must be a number in [0,1]", f)
	}
	return ""
}

// Outcome classifies the record for ExitCode. A compared record that does not re-derive
// (see BuildManifest) is a schema violation; an unknown status is one too.
func (c Comparison) Outcome(threshold float64) kind.Outcome {
	switch c.Status {
	case StatusBlocked:
		return kind.OutcomeBlocked
	case StatusCompared:
		if c.check() != "" {
			return kind.OutcomeSchemaViolation
		}
		if suggest, _, _ := Route(c.Winner, *c.Confidence, threshold); suggest {
			return kind.OutcomeFinding
		}
		return kind.OutcomeClean
	}
	return kind.OutcomeSchemaViolation
}

// Outcomes classifies every comparison of the manifest with its recorded threshold
// (DefaultThreshold when the manifest has none), ready for ExitCode.
func (m Manifest) Outcomes() []kind.Outcome {
	threshold := DefaultThreshold
	if m.Tribunal != nil {
		threshold = m.Tribunal.Threshold
	}
	out := make([]kind.Outcome, len(m.Comparisons))
	for i, c := range m.Comparisons {
		out[i] = c.Outcome(threshold)
	}
	return out
}

// BuildManifest assembles the manifest for a batch of comparisons.
//
// Comparisons are ordered by AC id in natural order (AC-2 before AC-12; equal ids keep
// their input order), and suggestions are numbered S001, S002, ... in that order. Sorting
// rather than keeping input order makes the manifest independent of the order in which
// verdicts arrived from concurrent judges, so a replay produces the same ids.
//
// Every comparison is included. A compared record whose winner does not follow from its
// raw_winner and label_assignment, or whose confidence is missing or out of range, is
// rewritten as a schema violation with the reason: the manifest must never carry a
// routing decision that a reviewer cannot re-derive. generatedAt is stored in UTC.
//
// threshold must pass CheckThreshold (a bad one is a usage error, found before any
// judging): it is recorded in the manifest, and a NaN could not be written as JSON.
func BuildManifest(reviewID string, source string, generatedAt time.Time, threshold float64, comps []Comparison) Manifest {
	return buildManifest(reviewID, source, generatedAt, threshold, append(make([]Comparison, 0, len(comps)), comps...))
}

// buildManifest is BuildManifest over comparisons it may sort and rewrite in place: a
// completion's fold hands over its own, and a copy of 1,000,000 of them was about 170 MB.
func buildManifest(reviewID string, source string, generatedAt time.Time, threshold float64, sorted []Comparison) Manifest {
	sort.SliceStable(sorted, func(i, j int) bool { return naturalLess(sorted[i].ACID, sorted[j].ACID) })

	m := Manifest{
		ReviewID:    reviewID,
		Source:      source,
		GeneratedAt: generatedAt.UTC(),
		Status:      ManifestStatus,
		Comparisons: sorted,
		Suggestions: []Suggestion{},
		Tribunal:    &ManifestExtras{Threshold: threshold},
	}
	for i := range m.Comparisons {
		c := &m.Comparisons[i]
		*c = checked(*c)
		if s, ok := suggestion(*c, threshold, len(m.Suggestions)+1); ok {
			m.Suggestions = append(m.Suggestions, s)
		}
	}
	return m
}

// checked is a comparison as the manifest lists it: a compared one that does not
// re-derive is rewritten as a schema violation with the reason. It depends on the
// comparison alone.
func checked(c Comparison) Comparison {
	if c.Status != StatusCompared {
		return c
	}
	reason := c.check()
	if reason == "" {
		return c
	}
	return Comparison{
		ACID:              c.ACID,
		OursArtifact:      c.OursArtifact,
		ReferenceArtifact: c.ReferenceArtifact,
		LabelAssignment:   c.LabelAssignment,
		Status:            StatusSchemaViolation,
		BlockedReason:     reason,
		Tribunal:          c.Tribunal,
	}
}

// suggestion is the n-th suggestion of the manifest when checked comparison c routes to
// one under threshold.
func suggestion(c Comparison, threshold float64, n int) (Suggestion, bool) {
	if c.Status != StatusCompared {
		return Suggestion{}, false
	}
	suggest, tag, impact := Route(c.Winner, *c.Confidence, threshold)
	if !suggest {
		return Suggestion{}, false
	}
	s := suggestionFor(c, threshold, tag, impact)
	s.ID = fmt.Sprintf("S%03d", n)
	return s, true
}

// CFNSource and CFNReviewPrefix are what seed 000's manifest is called by: source
// "cfn-ab-critic", review_id "ab-critic-<ns>".
const (
	CFNSource       = "cfn-ab-critic"
	CFNReviewPrefix = "ab-critic-"
)

// CFN is the manifest as seed 000 emits it for its vote step, written ns (the nanosecond
// timestamp of the write): review_id "ab-critic-<ns>", source "cfn-ab-critic", and only
// the comparison statuses the seed defines, compared and blocked. A schema violation is
// recorded blocked, its violation in blocked_reason ("schema violation: ..."): the
// seed's vote step knows no third status, and a verdict that broke the schema is as
// unusable to it as a missing artifact. The exit code stays the batch's (3 for it);
// Outcomes of the returned manifest no longer tells a violation from a block.
func (m Manifest) CFN(ns string) Manifest {
	out := m
	out.ReviewID, out.Source = CFNReviewPrefix+ns, CFNSource
	out.Comparisons = make([]Comparison, len(m.Comparisons))
	for i, c := range m.Comparisons {
		switch c.Status {
		case StatusCompared, StatusBlocked:
		case StatusSchemaViolation:
			c.Status, c.BlockedReason = StatusBlocked, "schema violation: "+c.BlockedReason
		default:
			c.Status, c.BlockedReason = StatusBlocked, string(c.Status)+": "+c.BlockedReason
		}
		out.Comparisons[i] = c
	}
	return out
}

// suggestionFor writes the text of a suggestion. The wording depends only on the record,
// the threshold and the route, so it is as deterministic as the rest of the manifest.
func suggestionFor(c Comparison, threshold float64, tag Tag, impact Impact) Suggestion {
	conf := *c.Confidence
	var oneLiner, title string
	switch {
	case tag == TagBlock:
		oneLiner = fmt.Sprintf("Close the gap between %s and its reference before merging", c.ACID)
		title = fmt.Sprintf("%s: reference artifact clearly better (confidence %.2f)", c.ACID, conf)
	case tag == TagFix:
		oneLiner = fmt.Sprintf("Rework %s where its reference does better", c.ACID)
		title = fmt.Sprintf("%s: reference artifact preferred (confidence %.2f)", c.ACID, conf)
	case c.Winner == WinnerReference:
		oneLiner = fmt.Sprintf("Polish %s toward its reference", c.ACID)
		title = fmt.Sprintf("%s: reference artifact slightly preferred (confidence %.2f)", c.ACID, conf)
	case c.Winner == WinnerOurs:
		oneLiner = fmt.Sprintf("Make %s a convincing improvement on its reference", c.ACID)
		title = fmt.Sprintf("%s: ours preferred, but below the threshold (%.2f < %.2f)", c.ACID, conf, threshold)
	default:
		oneLiner = fmt.Sprintf("Make %s distinguishably better than its reference", c.ACID)
		title = fmt.Sprintf("%s: no winner against the reference (confidence %.2f)", c.ACID, conf)
	}
	gap := strings.TrimSpace(c.BiggestGap)
	return Suggestion{
		Category: SuggestionCategory,
		Tag:      tag,
		OneLiner: oneLiner,
		Title:    title,
		Description: fmt.Sprintf("Blind A/B comparison of %s: winner %s at confidence %.2f (threshold %.2f). Biggest gap%s: %s",
			c.ACID, c.Winner, conf, threshold, legendNote(c.LabelAssignment), gap),
		Files:             []string{c.ACID},
		Impact:            impact,
		Effort:            SuggestionEffort,
		SuggestedApproach: fmt.Sprintf("Compare %s with %s and address the biggest gap%s: %s", c.OursArtifact, c.ReferenceArtifact, legendNote(c.LabelAssignment), gap),
		Status:            SuggestionStatus,
	}
}

// legendNote is " (slot A was ours, slot B the reference)" for a gap the judge wrote in
// slot terms, which the suggestion quotes unchanged.
func legendNote(a Assignment) string {
	if l := a.Legend(); l != "" {
		return " (" + l + ")"
	}
	return ""
}

// naturalLess orders AC ids so that digit runs compare by value ("AC-2" < "AC-12").
// Ids that compare equal that way ("AC-7", "AC-07") fall back to byte order, so the
// order is total and deterministic.
func naturalLess(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si := i
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			sj := j
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na := strings.TrimLeft(a[si:i], "0")
			nb := strings.TrimLeft(b[sj:j], "0")
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			continue
		}
		if ca != cb {
			return ca < cb
		}
		i++
		j++
	}
	if len(a)-i != len(b)-j {
		return len(a)-i < len(b)-j
	}
	return a < b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
