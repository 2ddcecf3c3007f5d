package client

import (
	"context"
	"fmt"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// DefaultMaxPayload is the NATS server's default max payload, the limit events are
// checked against when the publisher cannot say (tribunal validate has no connection).
const DefaultMaxPayload int64 = 1 << 20

// EventHeadroom is what a job.submitted must leave free of the max payload. The same spec
// travels on in render.requested, render.done and gates.done, each with a little more
// (the rendered artifacts' references, the gates, causation and trace headers), and an
// event that does not fit there would block the job later, after paying for its render.
const EventHeadroom int64 = 64 << 10

// checkBatch is a batch id of the greatest length a batch id may have: the events are
// measured under it, so the check holds whatever id the batch is submitted under.
var checkBatch = strings.Repeat("b", 128)

// RefusedError is a batch refused before anything was published, with every reason.
type RefusedError struct {
	// Batch names the batch: its file, or its id.
	Batch    string
	Problems []string
}

// Is makes a refused batch errclass.Refused: it is refused again until the batch changes.
func (e *RefusedError) Is(target error) bool { return target == errclass.Refused }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("%s refused, nothing was published:\n  %s", e.Batch, strings.Join(e.Problems, "\n  "))
}

// eventLimit is the largest job.submitted this submitter lets through.
func (s *Submitter) eventLimit() (limit, maxPayload int64) {
	maxPayload = s.MaxPayload
	if maxPayload <= 0 {
		if p, ok := s.Pub.(interface{ MaxPayload() int64 }); ok {
			maxPayload = p.MaxPayload()
		}
	}
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	return maxPayload - EventHeadroom, maxPayload
}

// check builds every job's job.submitted of a window before anything is published,
// validating and measuring it (at a batch of size jobs). A job whose event is invalid or
// too large costs only its AC, as a broken entry does: the AC is planned again as an
// entry carrying the problem (no criterion, no artifacts), so it is submitted blocked
// with the reason, naming the AC and the field, and the rest of the batch goes on. Only
// what cannot be submitted even blocked refuses the batch (c.refused): a job id that is
// not a valid id, or two jobs with one id (a rubric view's generated id cut to length, or
// equal to another AC's).
func (s *Submitter) check(ctx context.Context, c *checker, w *window, size int) error {
	prep := c.prep
	// out is the plans once one was planned again: until then they stand as they are,
	// and copying them (about 600 bytes a plan) doubled what a 1,000,000-AC batch's
	// plans hold at the submission's peak of memory.
	var out []planned
	copied := false
	for start := 0; start < len(w.plans); {
		end := start + 1
		for end < len(w.plans) && w.plans[end].ac.ID == w.plans[start].ac.ID {
			end++
		}
		group := w.plans[start:end]
		first := start
		start = end
		ac := group[0].ac
		problem := ""
		for k := range group {
			if problem = s.eventProblem(&group[k], prep, w.uploads, size, c.limit, c.maxPayload); problem != "" {
				break
			}
		}
		if problem == "" {
			if copied {
				out = append(out, group...)
			}
			continue
		}
		if !copied {
			copied = true
			out = append(make([]planned, 0, len(w.plans)), w.plans[:first]...)
		}
		problem = stage.Problem(ac, problem)
		prep.blocked[group[0].index] = problem
		ps, err := prep.planAC(ctx, group[0].index)
		if err != nil {
			return err
		}
		out = append(out, ps...)
		prep.Blocked = append(prep.Blocked, problem)
	}
	if copied {
		w.plans = out
	}
	for k := range w.plans {
		pl := &w.plans[k]
		if err := events.ValidateName(pl.JobID); err != nil {
			c.refused = append(c.refused, stage.Problem(pl.ac, "job id "+err.Error()))
			continue
		}
		if other, dup := c.owner[pl.JobID]; dup {
			c.refused = append(c.refused, stage.Problem(pl.ac, fmt.Sprintf("job id %q is also a job of %s", pl.JobID, prep.batch.ACs[other].ID)))
			continue
		}
		c.owner[pl.JobID] = pl.index
		if pl.ac.Problem() != "" {
			// Planned again as blocked: it must fit now, or it cannot be submitted at all.
			if p := s.eventProblem(pl, prep, w.uploads, size, c.limit, c.maxPayload); p != "" {
				c.refused = append(c.refused, stage.Problem(pl.ac, "even blocked: "+p))
			}
		}
	}
	return nil
}

// eventProblem builds a job's job.submitted as Submit will and says what keeps it from
// being published: the field it fails validation on, or, when it is too large, the field
// that makes it so. "" when it can be published.
func (s *Submitter) eventProblem(pl *planned, prep *Prepared, uploads map[string]events.Source, size int, limit, maxPayload int64) string {
	iteration := prep.batch.Iteration
	if pl.ac.Iteration() != nil {
		iteration = *pl.ac.Iteration()
	}
	spec := pl.Build(uploads)
	e := events.New(&events.JobSubmitted{Spec: spec, Index: 0, BatchSize: size, BatchSource: prep.batch.Path},
		prep.tenant, checkBatch, pl.JobID, iteration, "", nil)
	data, err := events.Encode(e)
	if err != nil {
		return err.Error()
	}
	if size := int64(len(data)); size > limit {
		field, fsize := heaviestField(spec)
		return fmt.Sprintf("%s: %d bytes make its job.submitted %d bytes, over the %d an event may carry (the bus's max payload of %d less %d for what later stages add)",
			field, fsize, size, limit, maxPayload, EventHeadroom)
	}
	return ""
}

// heaviestField names the part of a spec that makes it large, as the wire names it
// ("criterion", "critic.task", "equivalence.cases"): it descends from the whole spec into
// the largest part as long as that part is most of its parent.
func heaviestField(spec events.JobSpec) (string, int) {
	data, err := msgpack.Marshal(&spec)
	if err != nil {
		return "spec", 0
	}
	var tree any
	if err := msgpack.Unmarshal(data, &tree); err != nil {
		return "spec", len(data)
	}
	path, size := "spec", len(data)
	for {
		var bestPath string
		var best any
		bestSize := -1
		switch n := tree.(type) {
		case map[string]any:
			for k, v := range n {
				if sz := encodedSize(v); sz > bestSize {
					bestPath, best, bestSize = k, v, sz
				}
			}
			if path != "spec" {
				bestPath = path + "." + bestPath
			}
		case []any:
			for i, v := range n {
				if sz := encodedSize(v); sz > bestSize {
					bestPath, best, bestSize = fmt.Sprintf("%s[%d]", path, i), v, sz
				}
			}
		}
		if bestSize < 0 || 2*bestSize < size {
			if text, ok := tree.(string); ok {
				size = len(text) // a text's own length, not its encoding's
			}
			return path, size
		}
		path, tree, size = bestPath, best, bestSize
	}
}

func encodedSize(v any) int {
	data, err := msgpack.Marshal(v)
	if err != nil {
		return 0
	}
	return len(data)
}
