package commands

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Prompt is the HE-2 question `tribunal run` asks on its terminal (stage.Prompting): the
// first sign-off of an interactive run waits for a person, and so do the run's other
// interactive views (the aggregator holds their next steps until the answer, see
// pkg/rulebook's Park). The run steps it from its progress report, so it keeps showing
// what waits while the question is open; answers come as lines of standard input, read by
// the run.
type Prompt struct {
	st             stage.CommandState
	tenant, batch  string
	out            io.Writer
	lines          <-chan string
	asked          map[string]bool
	current        *records.Job
	rubric         *argus.Rubric
	held           int
	ended, toldEnd bool
}

// NewPrompt opens the run's HE-2 prompt over the batch's state st, asking on out and
// taking answers from lines (closed when standard input ends).
func NewPrompt(lines <-chan string, out io.Writer, st stage.CommandState, tenant, batch string) *Prompt {
	return &Prompt{st: st, tenant: tenant, batch: batch, out: out, lines: lines, asked: map[string]bool{}}
}

// Step asks about the next sign-off waiting for a person, says how many views wait with
// it, and takes an answer that has come in. It never waits for one.
func (p *Prompt) Step(ctx context.Context) {
	if p.current == nil {
		p.drain()
		if !p.ask(ctx) {
			return
		}
	}
	if held, err := heldBy(ctx, p.st, p.tenant, p.batch, p.current.ACID); err == nil && len(held) != p.held {
		p.held = len(held)
		if p.held > 0 {
			fmt.Fprintf(p.out, "\n(%s wait for this answer: %s)\nspot-check: ", plural(p.held, "other view"), strings.Join(held, ", "))
		}
	}
	for {
		select {
		case line, ok := <-p.lines:
			if !ok {
				p.end()
				return
			}
			if strings.TrimSpace(line) == "" {
				continue
			}
			approved, dim, err := SpotcheckAnswer(p.rubric, line)
			if err != nil {
				fmt.Fprintf(p.out, "%v\nspot-check: ", err)
				continue
			}
			if err := Spotcheck(p.st.Pub, p.tenant, p.batch, p.current.ACID, approved, dim, "terminal"); err != nil {
				fmt.Fprintln(p.out, "spot-check not recorded:", err)
				p.asked[p.current.ACID] = false
			}
			p.current = nil
			return
		default:
			return
		}
	}
}

// ask opens the question about the next sign-off waiting for a person that has not been
// asked about yet, and reports whether it did.
func (p *Prompt) ask(ctx context.Context) bool {
	if p.ended {
		return false
	}
	waiting, err := AwaitingSpotcheck(ctx, p.st.Buckets, p.tenant, p.batch)
	if err != nil {
		return false
	}
	for _, r := range waiting {
		if p.asked[r.ACID] {
			continue
		}
		p.asked[r.ACID] = true
		rb, err := ViewRubric(ctx, p.st.Store, p.tenant, r)
		if err != nil {
			fmt.Fprintln(p.out, "spot-check:", err)
			p.asked[r.ACID] = false
			continue
		}
		iterations := 0
		if st, _ := rubric.StateOf(r); st != nil {
			iterations = st.Loop.Iteration
		}
		fmt.Fprintf(p.out, "\nspot-check (HE-2): %s signed off after %d iterations. The run's other views wait for your answer.\n"+
			"Compare its render with the reference, then type y to approve, or the dimension the judge got wrong (%s): ",
			r.ACID, iterations, strings.Join(rb.DimensionNames(), ", "))
		p.current, p.rubric, p.held = r, rb, 0
		return true
	}
	return false
}

// drain drops what was typed while no question was open: it answered nothing.
func (p *Prompt) drain() {
	for {
		select {
		case _, ok := <-p.lines:
			if !ok {
				p.ended = true
				return
			}
		default:
			return
		}
	}
}

// end is standard input closing with a question open: no answer can come, so the
// sign-off stays pending and the views it holds keep waiting.
func (p *Prompt) end() {
	p.ended = true
	if !p.toldEnd {
		p.toldEnd = true
		fmt.Fprintf(p.out, "\nstandard input ended: %s stays pending, and the views waiting with it wait for `tribunal spotcheck` (after stopping this run)\n", p.current.ACID)
	}
	p.current = nil
}

// heldBy lists the jobs whose next steps wait for job's spot-check (the HE-2 hold, see
// pkg/rulebook's Park), in the order they began to wait; none once job has its outcome.
func heldBy(ctx context.Context, st stage.CommandState, tenant, batchID, job string) ([]string, error) {
	rec, _, err := records.New(st.Buckets).Job(ctx, tenant, batchID, job)
	if err != nil {
		return nil, err
	}
	if rec.Final() {
		return nil, nil
	}
	seen := map[string]bool{}
	var out []string
	for _, h := range rec.Held {
		if !seen[h.Job] {
			seen[h.Job] = true
			out = append(out, h.Job)
		}
	}
	return out, nil
}

// askSpotcheck reads HE-2 answers until one is y or a dimension of the rubric, asking
// again after anything else; ok is false when the input ends first.
func askSpotcheck(in *bufio.Reader, out io.Writer, rb *argus.Rubric) (approved bool, dimension string, ok bool) {
	for {
		line, err := in.ReadString('\n')
		if strings.TrimSpace(line) != "" {
			a, d, aerr := SpotcheckAnswer(rb, line)
			if aerr == nil {
				return a, d, true
			}
			fmt.Fprintf(out, "%v\nspot-check: ", aerr)
		}
		if err != nil {
			return false, "", false
		}
	}
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
