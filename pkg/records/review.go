package records

import (
	"encoding/json"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/review"
)

// Review is one person's review of a job, as the rules applied it (pkg/rulebook): their
// answer, what it and the judge's verdict mean in the kind's terms, and whether it
// decided the job's outcome. A person has one review per job (per case, for a kind
// reviewed per case): answering again replaces theirs and counts the change.
type Review struct {
	By  string    `json:"by"`
	At  time.Time `json:"at"`
	Via string    `json:"via,omitempty"`
	// Event is the review.recorded event's id, Link its link of the job's digest chain.
	Event string `json:"event"`
	Link  string `json:"link,omitempty"`
	// Iteration is the judged iteration reviewed.
	Iteration int `json:"iteration"`
	// Case is the case reviewed, for a kind reviewed per case (equivalence); a person
	// has one review per case there.
	Case string `json:"case,omitempty"`
	// Answer is the person's answer as given, in the kind's verdict shape.
	Answer json.RawMessage `json:"answer"`
	// Person and Judge are the person's answer and the judge's verdict as the kind reads
	// them (kind.Reviewing); Model names the judge ("provider/model", a panel's models).
	Person review.Verdict `json:"person"`
	Judge  review.Verdict `json:"judge"`
	Model  string         `json:"model"`
	// Decides says the batch let the person's answer decide the outcome, which it did.
	Decides bool `json:"decides,omitempty"`
	// Changes counts the earlier answers of this person this one replaced; Replaced is
	// the event id of the one it replaced last.
	Changes  int    `json:"changes,omitempty"`
	Replaced string `json:"replaced,omitempty"`
	// Seqs are where the stream holds this person's answers (this one and those it
	// replaced, earliest first), as far as they are known: the batch's completion names
	// the answers it folded by them (events.BatchCompleted.ReviewSeqs), so the audit
	// folds the same ones whichever order the aggregator handled them in.
	Seqs []uint64 `json:"seqs,omitempty"`
}
