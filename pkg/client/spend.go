package client

import (
	"fmt"

	"github.com/tribunal-dev/tribunal/pkg/spend"
)

// maxSpendProblems bounds the spending problems a refusal lists: a panel of thousands of
// unlisted models gets a readable refusal, not one line per model.
const maxSpendProblems = 20

// allowance is what the batch may spend: the Submitter's, else its publisher's (the
// ingress client reports its team's), nil when neither says.
func (s *Submitter) allowance() *spend.Allowance {
	if s.Spend != nil {
		return s.Spend
	}
	if p, ok := s.Pub.(interface{ SpendAllowance() *spend.Allowance }); ok {
		return p.SpendAllowance()
	}
	return nil
}

// spendProblems checks every planned job with the rules the ingress and the judge service
// apply (spend.Allowance.Check), naming each refused field as the batch file names it:
// "batch.yaml:12: acs[3].judges[2]: model ...", or "batch.yaml: judges[2]: ..." for the
// batch's own panel, once for all the ACs that use it.
// It checks one window at a time, c keeping the problems and their count.
func (s *Submitter) spendProblems(c *checker, w *window) {
	a := s.allowance()
	if a == nil {
		return
	}
	b := c.prep.batch
	seen := c.spendSeen
	for _, pl := range w.plans {
		if pl.ac.Problem() != "" {
			continue // blocked before any judge: it spends nothing
		}
		for _, r := range a.Check(pl.Build(w.uploads)) {
			at := fmt.Sprintf("%s:%d", b.Path, pl.ac.Line)
			field := r.Field
			switch r.Part {
			case spend.PartJudges:
				field = fmt.Sprintf("acs[%d].judges", pl.ac.Index)
				if len(pl.ac.Judges()) == 0 {
					at, field = b.Path, "judges"
				}
				if r.Reason == spend.ReasonModel {
					field += fmt.Sprintf("[%d]", r.Index)
				}
			case spend.PartRunnerModel:
				field = fmt.Sprintf("acs[%d].runner_model", pl.ac.Index)
				if !pl.ac.Sets("runner_model") {
					at, field = b.Path, "runner_model"
				}
			}
			p := at + ": " + r.At(field)
			if r.Reason == spend.ReasonCalls {
				// The cap is the AC's, whichever field set its panel.
				p = fmt.Sprintf("%s:%d: %s", b.Path, pl.ac.Line, r.What())
			}
			if at == b.Path {
				// The batch's own field, met again with every AC that uses it.
				if seen[p] {
					continue
				}
				seen[p] = true
			}
			if len(c.spendOut) == maxSpendProblems {
				c.spendMore++
				continue
			}
			c.spendOut = append(c.spendOut, p)
		}
	}
}
