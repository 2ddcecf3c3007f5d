package equivalence

import (
	"fmt"
	"strconv"
	"strings"
)

// Runner variants. The variant decides how the runner is told to treat the document, so
// it is part of the runner prompt (and thereby of the baseline-cache key).
const (
	// VariantSkill: the document is invoked on demand against the case input, the way a
	// skill or a prompt template is used.
	VariantSkill = "skill"
	// VariantInstructionFile: the document is an always-loaded agent instruction file
	// (AGENTS.md, CLAUDE.md, .cursor/rules, ...) and the case input is a realistic task in
	// a repository. The runner only states the actions it would take; nothing is executed,
	// so a test run can never change a repository.
	VariantInstructionFile = "instruction-file"
)

// Transcript is one runner's account of applying one version of a document to one case
// input. The equivalence judge compares two of these and never the documents themselves,
// so everything the judge may rely on has to be in here.
type Transcript struct {
	// Text is the run itself, step by step, ending with what was handed back.
	Text string `json:"transcript"`
	// SelfReport is the runner's structured account of how it used the document.
	SelfReport SelfReport `json:"self_report"`
}

// SelfReport is the runner's account of how closely it could follow the document. The
// judge reads it to score directness: every ambiguity, improvisation and suppressed urge
// to deviate is interpretive work the document forced on the runner.
//
// The six fields:
//
//   - steps_followed: the document's steps the runner carried out, in order.
//   - steps_skipped: the document's steps it did not carry out, each with the reason.
//   - ambiguities: every place the document could be read more than one way, each with
//     the reading the runner chose (question / resolution).
//   - improvisation: what the runner did that the document did not ask for, i.e. where it
//     filled a gap on its own judgement.
//   - deviation_urges: points where the runner wanted to depart from the document but
//     followed it literally anyway; they show friction the final output hides.
//   - final_output: what the run handed back at the end (for the instruction-file
//     variant, the summary of the actions it would take).
//
// The lists are never nil after parsing: "nothing to report" is an empty list, which the
// runner must write as [] so that a silent omission cannot pass for a clean run.
type SelfReport struct {
	StepsFollowed  []string    `json:"steps_followed"`
	StepsSkipped   []string    `json:"steps_skipped"`
	Ambiguities    []Ambiguity `json:"ambiguities"`
	Improvisation  []string    `json:"improvisation"`
	DeviationUrges []string    `json:"deviation_urges"`
	FinalOutput    string      `json:"final_output"`
}

// Ambiguity is one place where the document admitted more than one reading, and the
// reading the runner went with. Both halves are required: an ambiguity without its
// resolution says nothing about the behaviour that followed.
type Ambiguity struct {
	Question   string `json:"question"`
	Resolution string `json:"resolution"`
}

var (
	runnerFields     = []string{"transcript", "self_report"}
	selfReportFields = []string{"steps_followed", "steps_skipped", "ambiguities", "improvisation", "deviation_urges", "final_output"}
	ambiguityFields  = []string{"question", "resolution"}
	runnerHints      = map[string]string{
		"final_output":    "unknown field (final_output belongs inside self_report)",
		"steps_followed":  "unknown field (steps_followed belongs inside self_report)",
		"deviation_urges": "unknown field (deviation_urges belongs inside self_report)",
	}
)

// Validate checks a transcript and returns the first violation as a *FieldError. The
// transcript and final_output must say something, and no list entry may be blank: a blank
// entry is a claim with no content, which the judge could not weigh.
func (t Transcript) Validate() error {
	if blank(t.Text) {
		return &FieldError{Doc: fieldDoc, Field: "transcript", Value: strconv.Quote(t.Text), Reason: "must describe the run"}
	}
	r := t.SelfReport
	for _, l := range []struct {
		name  string
		items []string
	}{
		{"steps_followed", r.StepsFollowed},
		{"steps_skipped", r.StepsSkipped},
	} {
		if err := nonBlankItems("self_report."+l.name, l.items); err != nil {
			return err
		}
	}
	for i, a := range r.Ambiguities {
		if blank(a.Question) {
			return &FieldError{Doc: fieldDoc, Field: fmt.Sprintf("self_report.ambiguities[%d].question", i), Value: strconv.Quote(a.Question), Reason: "must not be empty"}
		}
		if blank(a.Resolution) {
			return &FieldError{Doc: fieldDoc, Field: fmt.Sprintf("self_report.ambiguities[%d].resolution", i), Value: strconv.Quote(a.Resolution), Reason: "must say how the ambiguity was resolved"}
		}
	}
	for _, l := range []struct {
		name  string
		items []string
	}{
		{"improvisation", r.Improvisation},
		{"deviation_urges", r.DeviationUrges},
	} {
		if err := nonBlankItems("self_report."+l.name, l.items); err != nil {
			return err
		}
	}
	if blank(r.FinalOutput) {
		return &FieldError{Doc: fieldDoc, Field: "self_report.final_output", Value: strconv.Quote(r.FinalOutput), Reason: "must state what the run handed back"}
	}
	return nil
}

func nonBlankItems(field string, items []string) error {
	for i, s := range items {
		if blank(s) {
			return &FieldError{Doc: fieldDoc, Field: fmt.Sprintf("%s[%d]", field, i), Value: strconv.Quote(s), Reason: "must not be empty"}
		}
	}
	return nil
}

// ParseRunnerOutput parses and validates what a runner model returned: exactly one JSON
// object {"transcript": string, "self_report": {the six fields}}, optionally in one ```json
// fence. Lists must be JSON arrays (never null), ambiguities entries exactly
// {"question", "resolution"}. Unknown, duplicate or missing keys at any level are
// *FieldErrors naming the path; text that is not one JSON object wraps strictjson.ErrNotObject.
//
// Strictness matters here even though no verdict is at stake yet: the teacher transcript
// is cached and reused for every later round, so a malformed one would poison every
// comparison made against it.
func ParseRunnerOutput(data []byte) (Transcript, error) {
	o, err := decodeTop(data, runnerFields, runnerHints)
	if err != nil {
		return Transcript{}, err
	}
	var t Transcript
	if t.Text, err = o.str("transcript"); err != nil {
		return Transcript{}, err
	}
	sr, err := o.obj("self_report")
	if err != nil {
		return Transcript{}, err
	}
	if err := sr.only(selfReportFields, nil); err != nil {
		return Transcript{}, err
	}
	r := &t.SelfReport
	if r.StepsFollowed, err = sr.strs("steps_followed"); err != nil {
		return Transcript{}, err
	}
	if r.StepsSkipped, err = sr.strs("steps_skipped"); err != nil {
		return Transcript{}, err
	}
	items, err := sr.array("ambiguities")
	if err != nil {
		return Transcript{}, err
	}
	r.Ambiguities = make([]Ambiguity, 0, len(items))
	for i, raw := range items {
		ao, err := decodeObject(raw, fmt.Sprintf("self_report.ambiguities[%d].", i), false)
		if err != nil {
			return Transcript{}, err
		}
		if err := ao.only(ambiguityFields, nil); err != nil {
			return Transcript{}, err
		}
		var a Ambiguity
		if a.Question, err = ao.str("question"); err != nil {
			return Transcript{}, err
		}
		if a.Resolution, err = ao.str("resolution"); err != nil {
			return Transcript{}, err
		}
		r.Ambiguities = append(r.Ambiguities, a)
	}
	if r.Improvisation, err = sr.strs("improvisation"); err != nil {
		return Transcript{}, err
	}
	if r.DeviationUrges, err = sr.strs("deviation_urges"); err != nil {
		return Transcript{}, err
	}
	if r.FinalOutput, err = sr.str("final_output"); err != nil {
		return Transcript{}, err
	}
	if err := t.Validate(); err != nil {
		return t, err
	}
	return t, nil
}

// Render lays a transcript out as plain text for the equivalence judge: the run first,
// then each self-report field under its contract name, so the judge can cite fields by
// the names its instructions use. The output is deterministic, so the same transcript
// always yields the same prompt (and the same judge-call cache key).
func (t Transcript) Render() string {
	var b strings.Builder
	b.WriteString("TRANSCRIPT:\n")
	b.WriteString(strings.TrimRight(t.Text, "\n"))
	b.WriteString("\n\nSELF-REPORT:\n")
	list := func(name string, items []string) {
		b.WriteString(name + ":")
		if len(items) == 0 {
			b.WriteString(" (none)\n")
			return
		}
		b.WriteByte('\n')
		for _, s := range items {
			b.WriteString("  - " + s + "\n")
		}
	}
	r := t.SelfReport
	list("steps_followed", r.StepsFollowed)
	list("steps_skipped", r.StepsSkipped)
	amb := make([]string, len(r.Ambiguities))
	for i, a := range r.Ambiguities {
		amb[i] = a.Question + " -> resolved: " + a.Resolution
	}
	list("ambiguities", amb)
	list("improvisation", r.Improvisation)
	list("deviation_urges", r.DeviationUrges)
	b.WriteString("final_output:\n")
	b.WriteString(strings.TrimRight(r.FinalOutput, "\n"))
	b.WriteByte('\n')
	return b.String()
}
