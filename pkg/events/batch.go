package events

import (
	"fmt"
	"strconv"
	"unicode"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/ident"
)

// PlanPageSize is how many jobs one page of a batch's plan lists: page k holds the jobs
// of indexes k*PlanPageSize up to the next page's first. Pages bound what one step of a
// cancel reads and publishes, however large the batch.
const PlanPageSize = 4096

// MaxBatchSize bounds a batch's size wherever an event states one (batch.opened's size,
// a job's batch_size and index): the aggregator sizes a batch's completion tree from it,
// and a claimed size of 2^31 once made it panic and left a dead letter too large to
// record. It is the most ACs one batch file may hold (batch.MaxACs); larger work is
// several batches.
const MaxBatchSize = 1_000_000

// checkSize refuses a batch size outside 1..MaxBatchSize, naming field.
func checkSize(field string, size int) error {
	switch {
	case size <= 0:
		return invalid(field, "must be positive")
	case size > MaxBatchSize:
		return invalid(field, fmt.Sprintf("%d jobs; a batch holds at most %d", size, MaxBatchSize))
	}
	return nil
}

// PlanPages is the number of plan pages of a batch of size jobs.
func PlanPages(size int) int { return (size + PlanPageSize - 1) / PlanPageSize }

// maxBy bounds who a cancel names: it ends up in every cancelled job's reason.
const maxBy = 200

// BatchOpened announces a batch before any of its jobs: how many there are and where its
// plan (every job's id, kind and iteration, in index order) is stored. The aggregator keeps
// both on the batch header, so a cancel can block jobs that were never submitted, and a
// resumed submission can tell whether the batch file changed since.
type BatchOpened struct {
	Size int `msgpack:"size"`
	// Source is the batch file, for the manifest.
	Source string `msgpack:"source,omitempty"`
	// Digest is the SHA-256 of the plan: every job's id, iteration and spec, in order. The
	// same batch file with the same artifacts always gives the same digest.
	Digest string `msgpack:"digest"`
	// Pages are the plan's pages in blob storage under the envelope's tenant, PlanPages(Size)
	// of them (see records.PlanPage).
	Pages []Blob `msgpack:"pages"`
}

// EventType implements Payload.
func (*BatchOpened) EventType() Type { return TypeBatchOpened }

// Validate implements Payload.
func (p *BatchOpened) Validate() error {
	if err := checkSize("size", p.Size); err != nil {
		return err
	}
	if !ident.HexDigest(p.Digest) {
		return invalid("digest", fmt.Sprintf("want 64 lowercase hex characters, got %q", p.Digest))
	}
	if want := PlanPages(p.Size); len(p.Pages) != want {
		return invalid("pages", fmt.Sprintf("a batch of %d jobs has %d plan pages of %d, got %d", p.Size, want, PlanPageSize, len(p.Pages)))
	}
	for i, b := range p.Pages {
		if err := b.validate(fmt.Sprintf("pages[%d]", i)); err != nil {
			return err
		}
	}
	return nil
}

// BatchCancelRequested ends a batch: every job of its plan that has no outcome yet is
// blocked as cancelled, including jobs never submitted. The client publishes page 0 (the
// envelope names the batch and no job); the aggregator cancels one plan page per step and
// publishes the next page's request itself (step CancelStep(page)).
type BatchCancelRequested struct {
	// By names who cancelled: every job it blocks gets the reason "cancelled by <By>".
	By string `msgpack:"by"`
	// Page is the plan page this step cancels.
	Page int `msgpack:"page,omitempty"`
}

// EventType implements Payload.
func (*BatchCancelRequested) EventType() Type { return TypeBatchCancelRequested }

// Validate implements Payload.
func (p *BatchCancelRequested) Validate() error {
	if err := validBy(p.By); err != nil {
		return err
	}
	if p.Page < 0 {
		return invalid("page", "negative")
	}
	return nil
}

// CancelStep is the id step of a batch.cancel.requested for page: the client's page 0 has
// none, every continuation one of its own.
func CancelStep(page int) string {
	if page == 0 {
		return ""
	}
	return "page-" + strconv.Itoa(page)
}

// JobCancelRequested cancels the job its envelope names. It carries what recording the
// job needs when it was never submitted: its kind, its place in the batch and the batch's
// size.
type JobCancelRequested struct {
	Kind      Kind   `msgpack:"kind"`
	Index     int    `msgpack:"index"`
	BatchSize int    `msgpack:"batch_size"`
	By        string `msgpack:"by"`
}

// EventType implements Payload.
func (*JobCancelRequested) EventType() Type { return TypeJobCancelRequested }

// Validate implements Payload.
func (p *JobCancelRequested) Validate() error {
	if _, err := wireOf(p.Kind); err != nil {
		return err
	}
	if err := checkSize("batch_size", p.BatchSize); err != nil {
		return err
	}
	if p.Index < 0 || p.Index >= p.BatchSize {
		return invalid("index", fmt.Sprintf("want 0 <= index < %d, got %d", p.BatchSize, p.Index))
	}
	return validBy(p.By)
}

func validBy(by string) error {
	switch {
	case by == "":
		return missing("by")
	case len(by) > maxBy:
		return invalid("by", fmt.Sprintf("%d bytes, at most %d", len(by), maxBy))
	case !utf8.ValidString(by):
		return invalid("by", "not UTF-8")
	}
	for _, r := range by {
		if unicode.IsControl(r) {
			return invalid("by", "control characters")
		}
	}
	return nil
}
