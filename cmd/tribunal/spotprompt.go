package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	rubriccommands "github.com/tribunal-dev/tribunal/pkg/kind/rubric/commands"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// spotcheckPrompt is the HE-2 question `tribunal run` asks on its terminal: the first
// sign-off of an interactive run waits for a person, and so do the run's other
// interactive views (the aggregator holds their next steps until the answer, see
// pkg/rulebook's Park). It is stepped from the progress report, so the run keeps showing
// what waits while the question is open; answers are read from standing input by a
// goroutine of their own.
type spotcheckPrompt struct {
	buckets        bus.Buckets
	store          blob.Store
	pub            client.Publisher
	tenant, batch  string
	out            io.Writer
	lines          <-chan string
	asked          map[string]bool
	current        *records.Job
	rubric         *argus.Rubric
	held           int
	ended, toldEnd bool
}

func newSpotcheckPrompt(in io.Reader, out io.Writer, buckets bus.Buckets, store blob.Store, pub client.Publisher, tenant, batch string) *spotcheckPrompt {
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		r := bufio.NewReader(in)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	return &spotcheckPrompt{buckets: buckets, store: store, pub: pub, tenant: tenant, batch: batch, out: out, lines: lines, asked: map[string]bool{}}
}

// step asks about the next sign-off waiting for a person, says how many views wait with
// it, and takes an answer that has come in.
func (p *spotcheckPrompt) step(ctx context.Context) {
	if p.current == nil {
		p.drain()
		if !p.ask(ctx) {
			return
		}
	}
	if held, err := client.HeldBy(ctx, p.buckets, p.tenant, p.batch, p.current.ACID); err == nil && len(held) != p.held {
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
			approved, dim, err := rubriccommands.SpotcheckAnswer(p.rubric, line)
			if err != nil {
				fmt.Fprintf(p.out, "%v\nspot-check: ", err)
				continue
			}
			if err := rubriccommands.Spotcheck(p.pub, p.tenant, p.batch, p.current.ACID, approved, dim, "terminal"); err != nil {
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
func (p *spotcheckPrompt) ask(ctx context.Context) bool {
	if p.ended {
		return false
	}
	waiting, err := rubriccommands.AwaitingSpotcheck(ctx, p.buckets, p.tenant, p.batch)
	if err != nil {
		return false
	}
	for _, r := range waiting {
		if p.asked[r.ACID] {
			continue
		}
		p.asked[r.ACID] = true
		rubric, err := rubriccommands.ViewRubric(ctx, p.store, p.tenant, r)
		if err != nil {
			fmt.Fprintln(p.out, "spot-check:", err)
			p.asked[r.ACID] = false
			continue
		}
		iterations := 0
		if st, _ := rubricState(r); st != nil {
			iterations = st.Loop.Iteration
		}
		fmt.Fprintf(p.out, "\nspot-check (HE-2): %s signed off after %d iterations. The run's other views wait for your answer.\n"+
			"Compare its render with the reference, then type y to approve, or the dimension the judge got wrong (%s): ",
			r.ACID, iterations, strings.Join(rubric.DimensionNames(), ", "))
		p.current, p.rubric, p.held = r, rubric, 0
		return true
	}
	return false
}

// drain drops what was typed while no question was open: it answered nothing.
func (p *spotcheckPrompt) drain() {
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
func (p *spotcheckPrompt) end() {
	p.ended = true
	if !p.toldEnd {
		p.toldEnd = true
		fmt.Fprintf(p.out, "\nstandard input ended: %s stays pending, and the views waiting with it wait for `tribunal spotcheck` (after stopping this run)\n", p.current.ACID)
	}
	p.current = nil
}
