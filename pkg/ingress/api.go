// Package ingress is the one door teams have into a shared tribunal: an HTTP service that
// authenticates each team by a bearer token and holds the services' NATS and blob-store
// credentials itself, so no team holds a credential that reaches shared state.
//
// A team stores its artifacts (PUT /v1/blobs, content-addressed under the token's tenant),
// publishes the few events a team originates (POST /v1/events: job.submitted and
// spotcheck.recorded, review.recorded), and reads its batches (GET /v1/batches/{batch},
// /v1/batches/{batch}/results, and the review queue: /v1/batches/{batch}/review, blind,
// its export /v1/batches/{batch}/review/export, the reviewed ACs a gold set is made of,
// /review/gold, each paged, the images an item shows, /review/items/{item}/images/{sha256},
// and POST /review/answers to record answers by item). A reviewer's token of a team
// (tokens.RoleReviewer) may use only the blind queue, its export, its images and the
// answers (Routes). The ingress decodes and validates every event, refuses
// one of another tenant or of a type a team may not publish, derives its id itself, checks
// that every blob it references is the team's, and publishes it on its own connection.
// Client implements the client side over HTTP (client.Publisher and blob.Store), so
// `tribunal submit --ingress` runs the very Submitter a direct submission runs.
package ingress

import (
	"encoding/json"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress/body"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

// The API's paths and media types.
const (
	PathWhoami  = "/v1/whoami"
	PathBlobs   = "/v1/blobs"
	PathEvents  = "/v1/events"
	PathBatches = "/v1/batches"

	// MediaMsgpack is a POST /v1/events body: a msgpack array of events, each the wire
	// bytes events.Encode writes (a msgpack bin).
	MediaMsgpack = body.MediaMsgpack
	// MediaJSON is a POST /v1/events body {"events": [...]}: each event a JSON object
	// with the wire form's field names ({"v": 1, "id", "type", "tenant", "batch", "job",
	// "iter", "data": {payload}}). The ingress stamps the time itself.
	MediaJSON = body.MediaJSON

	// HeaderExpectedSHA256 on PUT /v1/blobs makes the write fail unless the body hashes
	// to it (blob.PutOptions.ExpectedSHA256).
	HeaderExpectedSHA256 = "X-Tribunal-Expected-Sha256"
)

// Whoami is GET /v1/whoami: the tenant a token stands for, and what it may spend on the
// provider, so the team's client refuses a batch the ingress would refuse before it
// publishes any of it (an older ingress says nothing: nil).
type Whoami struct {
	Tenant string `json:"tenant"`
	// Role is the token's role (tokens.Role: "team" or "reviewer"); an older ingress
	// says nothing, and knew only teams.
	Role  string           `json:"role,omitempty"`
	Spend *spend.Allowance `json:"spend,omitempty"`
}

// BlobAttrs is a stored blob, the answer of PUT /v1/blobs.
type BlobAttrs struct {
	SHA256    string `json:"sha256"`
	Size      int64  `json:"size"`
	MediaType string `json:"media_type"`
}

// Accepted is the answer of POST /v1/events: every event was published.
type Accepted struct {
	Accepted int `json:"accepted"`
	// IDs are the published events' ids, as the ingress derived them, in request order.
	IDs []string `json:"ids"`
}

// Problem is every error answer: what went wrong and, for refused events, each refusal.
// Nothing of a refused request was published.
type Problem struct {
	Error    string    `json:"error"`
	Refusals []Refusal `json:"refusals,omitempty"`
	// Quota names the team's quota a request would pass (quota_stored, quota_batches,
	// quota_acs): the request is refused whole, and the client says so rather than
	// taking it for a problem of one artifact.
	Quota string `json:"quota,omitempty"`
	// Class is the error's class (pkg/errclass), what a caller can do about it:
	// "refused" (the request is wrong and stays so), "not_found", "conflict",
	// "unavailable" (try again later) or "internal" (the ingress's own failure, told
	// only in its log). Client errors report it to errors.Is against errclass's classes.
	Class string `json:"class,omitempty"`
	// Role is the role of a token refused for it (RefusedRole): the endpoint is not that
	// role's (Routes).
	Role string `json:"role,omitempty"`
}

// The words of Problem.Class.
const (
	ClassRefused     = "refused"
	ClassNotFound    = "not_found"
	ClassConflict    = "conflict"
	ClassUnavailable = "unavailable"
	ClassInternal    = "internal"
)

// Refusal is one event the ingress refused, and why.
type Refusal struct {
	// Index is the event's position in the request.
	Index int    `json:"index"`
	Type  string `json:"type,omitempty"`
	// AC is the job the event is for, when it could be read.
	AC string `json:"ac,omitempty"`
	// Field names the refused field ("envelope.tenant", "spec.ab.ours.blob.sha256").
	Field string `json:"field,omitempty"`
	// Reason is a fixed word (the label of tribunal_refusals_total{service="ingress"}).
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// BatchStatus is GET /v1/batches/{batch}: the header and progress of a batch.
type BatchStatus struct {
	Tenant     string              `json:"tenant"`
	BatchID    string              `json:"batch_id"`
	Total      int                 `json:"total"`
	Done       int                 `json:"done"`
	Complete   bool                `json:"complete"`
	Completion *records.Completion `json:"completion,omitempty"`
}

// Paging of the review endpoints (GET /v1/batches/{batch}/review, /review/export and
// /review/gold): ?limit=N items a page (DefaultReviewPage unless asked, at most
// MaxReviewPage), from the item after ?after=<item> (the page's Next), in queue order. A
// page also ends before its answer passes MaxReviewPageBytes, so a client reads every
// page under its own bound (maxPageBytes); an item alone over it is served alone. A page
// reads the job records of its own items alone, over an index of the queue drawn once
// per completed batch (queueIndex).
const (
	DefaultReviewPage  = 100
	MaxReviewPage      = 500
	MaxReviewPageBytes = 32 << 20
)

// ReviewQueue is a page of GET /v1/batches/{batch}/review: the batch's review queue as a
// reviewer is shown it, blind. Each item is what the judge was shown (client.ReviewItem:
// its instructions and messages, slots A and B as the judge had them, the shape to
// answer in), whether anyone reviewed it, and the token holder's own recorded answer.
// Nothing says which AC, case, path or role an item is, or what the judge answered: a
// reviewer reading the raw listing is as blind as one reading the export.
type ReviewQueue struct {
	Tenant  string      `json:"tenant"`
	BatchID string      `json:"batch_id"`
	Items   []QueueItem `json:"items"`
	// Next is the ?after= of the next page; "" on the last.
	Next string `json:"next,omitempty"`
}

// FieldsStatus is GET /v1/batches/{batch}/review?fields=status: each item's id, kind,
// status and the token holder's answer only, without its blind material (nothing is read
// from the blob store), for a client waiting until its answers are applied.
const FieldsStatus = "status"

// The statuses of a QueueItem.
const (
	StatusReviewed   = "reviewed"
	StatusUnreviewed = "unreviewed"
)

// QueueItem is one item of ReviewQueue.
type QueueItem struct {
	client.ReviewItem
	// Status is StatusReviewed once anyone answered the item, else StatusUnreviewed.
	Status string `json:"status"`
	// Yours is the token holder's own recorded answer, nil until they answered.
	Yours *YourAnswer `json:"yours,omitempty"`
}

// YourAnswer is a reviewer's own recorded answer to an item.
type YourAnswer struct {
	// Answer is the answer as recorded (compacted JSON in the kind's verdict shape).
	Answer json.RawMessage `json:"answer"`
	At     time.Time       `json:"at"`
	// Changes counts the earlier answers of theirs this one replaced.
	Changes int `json:"changes,omitempty"`
}

// ExportPage is a page of GET /v1/batches/{batch}/review/export: the blind export's items
// of the page and their answers template, without images (Client.ReviewExport reads every
// page and each image through GET /v1/blobs).
type ExportPage struct {
	client.ReviewExport
	Next string `json:"next,omitempty"`
}

// Answers is the answer of POST /v1/batches/{batch}/review/answers, whose body is an
// answers file (client.ReviewAnswers: item id, or AC id, to an answer in the kind's
// verdict shape). The ingress checks every answer against its item's kind before any is
// published, and records each as a review.recorded event by the token's holder.
type Answers struct {
	// Recorded are the keys of the answers published by this request, in the file's
	// order. Later is an answers file of what is left for a later request, keyed by item:
	// each a further case of an AC this request already answers (an AC's reviews are
	// applied one at a time, in the order sent). Send it once the listing shows the
	// recorded ones.
	Recorded []string        `json:"recorded"`
	Later    json.RawMessage `json:"later,omitempty"`
	// Items are the recorded answers by item, as the listing names them, each answer as
	// recorded (compacted): the listing's Yours shows it once the answer is applied.
	Items []AnswerItem `json:"items"`
}

// AnswerItem is one answer Answers recorded.
type AnswerItem struct {
	Item   string          `json:"item"`
	Answer json.RawMessage `json:"answer"`
}

// GoldPage is a page of GET /v1/batches/{batch}/review/gold: the queue's reviewed ACs as
// `tribunal review --export-gold` writes a calibration set from them. A page looks at
// ?limit= items of the queue (each AC at its first item) and holds those reviewed, so it
// may hold fewer, or none, and still name a Next. This is the team's,
// not a reviewer's: each record carries its spec (the criterion, the artifacts and which
// is ours) and the people's answers, and nothing of the judge (its calls, verdicts and
// the judge's side of each review are left out).
type GoldPage struct {
	Jobs []*records.Job `json:"jobs"`
	Next string         `json:"next,omitempty"`
}

// Results is GET /v1/batches/{batch}/results: what client.Load returns. Results is
// results.json as `tribunal results` writes it; the rest are the files beside it.
type Results struct {
	Results *client.Results `json:"results"`
	// Manifest is the ab manifest (manifest.json).
	Manifest *ab.Manifest `json:"manifest,omitempty"`
	// Manifests are the other kinds' manifests, raw, by kind.
	Manifests map[string]json.RawMessage `json:"manifests,omitempty"`
	// Lists and Blobs are the kinds' files beside the results, by path.
	Lists map[string][]any  `json:"lists,omitempty"`
	Blobs map[string][]byte `json:"blobs,omitempty"`
}

func toWire(r *client.Results) Results {
	return Results{Results: r, Manifest: r.Manifest, Manifests: r.Manifests, Lists: r.Lists, Blobs: r.Blobs}
}

func (w Results) results() *client.Results {
	r := w.Results
	if r == nil {
		r = &client.Results{}
	}
	r.Manifest, r.Manifests, r.Lists, r.Blobs = w.Manifest, w.Manifests, w.Lists, w.Blobs
	return r
}
