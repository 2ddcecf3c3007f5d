package kind

// Exit codes of an ab run, as the seed defines them.
const (
	// ExitClean: every comparison was won by ours at or above the threshold; no
	// suggestions. (Phase 1, which only prints the blinded prompt, also exits 0.)
	ExitClean = 0
	// ExitFindings: the manifest needs a human: at least one suggestion, or some (but not
	// all) comparisons blocked.
	ExitFindings = 1
	// ExitUsage: bad arguments. ExitCode also returns it for an empty batch.
	ExitUsage = 2
	// ExitSchemaViolation: at least one verdict violated the schema.
	ExitSchemaViolation = 3
	// ExitBlocked: every comparison was blocked.
	ExitBlocked = 4
)

// Outcome is what one comparison contributes to the exit code.
type Outcome string

const (
	// OutcomeClean: ours won at or above the threshold.
	OutcomeClean Outcome = "clean"
	// OutcomeFinding: the comparison produced a suggestion.
	OutcomeFinding Outcome = "finding"
	// OutcomeBlocked: no comparison could be made (missing, unreadable or unsupported
	// artifact).
	OutcomeBlocked Outcome = "blocked"
	// OutcomeSchemaViolation: the judge's verdict violated the schema.
	OutcomeSchemaViolation Outcome = "schema_violation"
)

// ExitCode folds a batch's outcomes into the process exit code. Precedence, first match
// wins:
//
//  1. Empty batch -> 2. The only way to have no comparisons is to ask for no ACs, which
//     the CLI treats as a usage error; and nothing verified must never read as clean.
//  2. Any schema violation -> 3. A verdict that broke the schema means the judging itself
//     is broken (prompt, model or verdict file), so the other results in the batch are
//     not trustworthy either, and fixing the judge comes before reading findings.
//     Unknown outcome values count here too: a record this function cannot classify is
//     itself a schema problem.
//  3. Every comparison blocked -> 4. Nothing was compared, which is almost always set-up
//     (no verify map, wrong paths, an unsupported artifact kind) rather than a quality
//     problem, and CI users want to tell those apart.
//  4. Any finding or any blocked comparison -> 1. A partially blocked batch must not
//     exit 0, because blocked is never success; it is not 4 either, because the seed
//     reserves 4 for a batch where every comparison was blocked and a CI user reading 4
//     would look for a global set-up fault. 1 means "open the manifest, something in it
//     needs a person", which holds both for suggestions and for per-AC blocked records
//     (each carries its blocked_reason).
//  5. Otherwise every comparison was clean -> 0.
func ExitCode(results []Outcome) int {
	if len(results) == 0 {
		return ExitUsage
	}
	blocked, attention := 0, false
	for _, r := range results {
		switch r {
		case OutcomeClean:
		case OutcomeFinding:
			attention = true
		case OutcomeBlocked:
			blocked++
			attention = true
		default:
			return ExitSchemaViolation
		}
	}
	switch {
	case blocked == len(results):
		return ExitBlocked
	case attention:
		return ExitFindings
	}
	return ExitClean
}
