// Package equivalence holds the deterministic half of the `equivalence` judge kind: does a
// rewritten (candidate) version of an LLM-directed document still make a model behave the
// way the original (teacher) version did, across a transfer set of cases?
//
// The model-facing work happens elsewhere: a runner applies each version to each case
// input and returns a Transcript, and a judge compares the two transcripts of one case.
// This package owns everything that must be re-derivable without trusting either model:
//
//   - ParseRunnerOutput and ParseAnswer accept only well-formed runner output and judge
//     answers; anything else is a *FieldError or wraps strictjson.ErrNotObject, never a salvaged value.
//   - Summarize applies the gate: pass iff no case regressed and every case has a valid
//     verdict. Efficiency reports how directly the runner could act on each version, and
//     Coverage reports how much of the test taxonomy the transfer set spans; neither gates.
//   - NewReport joins a transfer set with the per-case results into the output document.
//
// Like pkg/ab, the package reads no clock, does no I/O and uses no randomness, so a replay
// of the event log reproduces every summary.
package equivalence
