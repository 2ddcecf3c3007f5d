package stage

import (
	"context"
	"log/slog"
	"net/url"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kv"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// Paging is a kind with a section of its own on the console's job page (ab's un-blinded
// verdict, rubric's view and loop, ...): the console shows every job's common part and,
// below it, the section of the job's kind, so the console names no kind. A kind without
// it shows the common part only.
type Paging interface {
	// JobSection is a job's section: its value is the dot of the section's template and
	// the job's JSON (`/api/...`) carries it under the kind's name.
	JobSection(ctx context.Context, env PageEnv, rec *records.Job, req PageRequest) (PageSection, error)
	// JobTemplate is the section's html/template text. It defines the template named
	// "job-<kind>", which the console runs with the section's value; it may use the
	// console's partials ("artifact", "maybe-artifact", "diff", "status") and functions
	// (join, when, conf, score, deref, ...).
	JobTemplate() string
}

// PageSection is a kind's section of a job page.
type PageSection struct {
	// Data is the section's value (JobTemplate's dot; the JSON under the kind's name).
	Data any
	// Refresh reloads the page after this many seconds (0: no reload, unless the job is
	// still pending, which reloads the console's own way).
	Refresh int
}

// PageRequest is the request a job page answers, as a section reads it.
type PageRequest struct {
	// Batch is the job's batch record (its completion, when it has one).
	Batch *records.Batch
	// Query is the page's query (a form's answer redirects with what it sent).
	Query url.Values
	// CSRF is the caller's token for the forms of the page, which a form's post sends back.
	CSRF func() string
}

// PageEnv is what the console hands a kind's section and its forms' actions.
type PageEnv interface {
	// SourceArtifact shows one input of a job as the batch named it.
	SourceArtifact(ctx context.Context, tenant, label string, src events.Source) PageArtifact
	// BlobArtifact shows a stored blob (a render, a reference, a transcript); nil for nil.
	BlobArtifact(ctx context.Context, tenant, label string, b *events.Blob) *PageArtifact
	// Diff is two texts side by side, line by line (the console's "diff" partial shows it).
	Diff(ours, reference string) any
	// ReadBlob reads one of the tenant's blobs whole.
	ReadBlob(ctx context.Context, tenant, sha256 string) ([]byte, error)
	// Runs are the job records of every run of a looping job (its kind's Looping state
	// key), in any batch of its tenant.
	Runs(ctx context.Context, rec *records.Job) ([]*records.Job, error)
	// LoadJob reads one job record; nil when there is none.
	LoadJob(ctx context.Context, tenant, batch, job string) (*records.Job, error)
	// Buckets are the services' key-value buckets.
	Buckets() kv.Buckets
	// Publisher publishes a form's input; nil for a read-only console.
	Publisher() Publisher
	// AwaitApplied waits (a few seconds at most) until done reports a form's input
	// recorded, so the page the form answers with shows it.
	AwaitApplied(ctx context.Context, done func(context.Context) (bool, error))
	// Log receives what a page could not read.
	Log() *slog.Logger
}

// PageActing is a kind whose job page has forms of its own (rubric's HE-2 spot-check and
// loop reset): the console answers POST <job page>/<name> with the action of the job's
// kind by that name, once it has checked the caller's team, the job's name, that the form
// is the console's own (origin and CSRF token) and that the job exists.
type PageActing interface {
	JobActions() map[string]PageAction
}

// PageAction is a form's action on a job.
type PageAction struct {
	// What is what the form does, as the subject of the console's refusal of a form
	// posted from elsewhere ("A spot-check is recorded only from the console's own form").
	What string
	// Do acts on the job: form is the posted form, by who posted it ("console:<name>").
	Do func(ctx context.Context, env PageEnv, rec *records.Job, form url.Values, by string) (PageReply, error)
}

// PageReply is what a form's action answers: a redirect once it is done, or a page saying
// why it did nothing (Code, Title, Message; Code 404 is the console's not-found page).
// An error is the console's failure page.
type PageReply struct {
	Redirect string
	Code     int
	Title    string
	Message  string
}

// PageArtifact is one artifact as a page shows it: an image inline, text escaped in a
// <pre>, HTML as its escaped source beside a sandboxed frame, anything else as a link.
type PageArtifact struct {
	// Label is the artifact's role as reviewers know it: ours, reference, output, ...
	Label string `json:"label"`
	// Slot is the blind slot ("A" or "B") it was judged in, for a pairwise kind.
	Slot string `json:"slot,omitempty"`
	// Name is the path or URL the batch named.
	Name      string `json:"name,omitempty"`
	Class     string `json:"class"` // image, text, html, binary, url, missing
	MediaType string `json:"media_type,omitempty"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256,omitempty"`
	Href      string `json:"href,omitempty"`
	Text      string `json:"text,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
	// External is a URL source the renderer fetched.
	External string `json:"external,omitempty"`
	Note     string `json:"note,omitempty"`
}

// Textual reports whether the artifact is shown as text (plain or HTML source).
func (a PageArtifact) Textual() bool { return a.Class == "text" || a.Class == "html" }

// JobHref is a job page's path.
func JobHref(tenant, batch, job string) string { return "/t/" + tenant + "/b/" + batch + "/j/" + job }

// BlobHref is a blob's path on the console.
func BlobHref(tenant, sha string) string { return "/blob/" + tenant + "/" + sha }
