// Package ingress is the one door teams have into a shared tribunal: an HTTP service that
// authenticates each team by a bearer token and holds the services' NATS and blob-store
// credentials itself, so no team holds a credential that reaches shared state.
//
// A team stores its artifacts (PUT /v1/blobs, content-addressed under the token's tenant),
// publishes the few events a team originates (POST /v1/events: job.submitted and
// spotcheck.recorded, review.recorded), and reads its batches (GET /v1/batches/{batch},
// /v1/batches/{batch}/results, and the review queue: /v1/batches/{batch}/review and its
// blind export /v1/batches/{batch}/review/export). The ingress decodes and validates every event, refuses
// one of another tenant or of a type a team may not publish, derives its id itself, checks
// that every blob it references is the team's, and publishes it on its own connection.
// Client implements the client side over HTTP (client.Publisher and blob.Store), so
// `tribunal submit --ingress` runs the very Submitter a direct submission runs.
package ingress

import (
	"encoding/json"

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
	Tenant string           `json:"tenant"`
	Spend  *spend.Allowance `json:"spend,omitempty"`
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
}

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

// ReviewQueue is GET /v1/batches/{batch}/review: the batch's review queue as the team
// sees it (never a reviewer: each entry names its AC and why it is queued), each entry
// with its job record, so a client checks the answers it imports against the kind's
// contract and builds their review.recorded events as on the state folder.
type ReviewQueue struct {
	Tenant  string       `json:"tenant"`
	BatchID string       `json:"batch_id"`
	Entries []QueueEntry `json:"entries"`
}

// QueueEntry is one entry of ReviewQueue.
type QueueEntry struct {
	client.ReviewEntry
	Record *records.Job `json:"job"`
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
