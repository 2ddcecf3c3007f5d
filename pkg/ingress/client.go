package ingress

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bounds"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spend"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// Client is a team's side of the ingress. It implements client.Publisher and blob.Store
// over HTTP, so the Submitter that submits straight to NATS and a blob store submits
// through the ingress unchanged, and reads batches for `tribunal watch` and `results`.
type Client struct {
	base   *url.URL
	token  string
	http   *http.Client
	tenant string
	role   string
	spend  *spend.Allowance
	// PublishTimeout bounds one Publish (client.Publisher has no context).
	PublishTimeout time.Duration
	// PageItems is the ?limit= the review reads ask a page for (default MaxReviewPage).
	PageItems int
}

// Chunking of Publish: events per request and the body size a request stays under.
const (
	chunkEvents = 2000
	chunkBytes  = DefaultMaxRequestBytes / 4
)

// Dial connects to the ingress at baseURL with a team's token and learns the token's
// tenant (GET /v1/whoami), so a wrong token or address fails before any upload.
func Dial(ctx context.Context, baseURL, token string, hc *http.Client) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("ingress URL %q: want http(s)://host[:port]", baseURL)
	}
	if token == "" {
		return nil, errors.New("ingress: no token (--token or --token-file)")
	}
	if hc == nil {
		hc = &http.Client{Timeout: 10 * time.Minute}
	}
	c := &Client{base: u, token: token, http: hc, PublishTimeout: 5 * time.Minute}
	var who Whoami
	if err := c.do(ctx, http.MethodGet, PathWhoami, nil, "", nil, &who); err != nil {
		return nil, err
	}
	c.tenant, c.role, c.spend = who.Tenant, cmp.Or(who.Role, string(tokens.RoleTeam)), who.Spend
	return c, nil
}

// Role is the token's role (tokens.Role): "team", or "reviewer" for a token that only
// reads the team's review queue blind and answers it.
func (c *Client) Role() string { return c.role }

// Tenant is the tenant the token stands for: every blob and event of this client is its.
func (c *Client) Tenant() string { return c.tenant }

// SpendAllowance is what the ingress lets the token's team spend, nil when it did not say
// (an older ingress). A Submitter publishing through the client checks every job with it
// before anything is published.
func (c *Client) SpendAllowance() *spend.Allowance { return c.spend }

// Error is an answer of the ingress other than success.
type Error struct {
	Status  int
	Problem Problem
}

// Is reports the answer's class (Problem.Class) as errclass's: errclass.Of of an
// ingress error is what the ingress said of it.
func (e *Error) Is(target error) bool {
	if target == ErrQuota {
		return e.Problem.Quota != ""
	}
	c, ok := classes[e.Problem.Class]
	return ok && target == c
}

// classes are errclass's classes by their Problem.Class word.
var classes = map[string]error{ClassRefused: errclass.Refused, ClassNotFound: errclass.NotFound,
	ClassConflict: errclass.Conflict, ClassUnavailable: errclass.Unavailable, ClassInternal: errclass.Internal}

func (e *Error) Error() string {
	msg := e.Problem.Error
	if e.Problem.Quota != "" {
		// The quota by its name, as the refusal metric counts it.
		msg += " (quota " + e.Problem.Quota + ")"
	}
	if len(e.Problem.Refusals) <= 1 {
		return fmt.Sprintf("ingress: %d %s: %s", e.Status, http.StatusText(e.Status), msg)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ingress: %d %s: %s", e.Status, http.StatusText(e.Status), msg)
	for _, r := range e.Problem.Refusals[1:] {
		fmt.Fprintf(&b, "\n  event %d: %s", r.Index, r.Message)
	}
	return b.String()
}

// ErrQuota is a request the ingress refused because the team is at one of its quotas
// (Problem.Quota): a submission stops on it, naming the quota. An *Error carrying a
// quota is ErrQuota (errors.Is), a refused window of events as much as a refused blob.
var ErrQuota = errclass.New(errclass.Refused, "the team's quota is reached")

// Bounds of the answers the client reads. Every answer is read within its bound and an
// answer over it is an error saying so, never decoded in part.
const (
	// maxAnswerBytes bounds a small answer (whoami, a batch's progress, an acceptance,
	// an answers file's record).
	maxAnswerBytes = 4 << 20
	// maxPageBytes bounds a page of the review endpoints: the ingress ends a page before
	// MaxReviewPageBytes, so only an item alone over it comes near this.
	maxPageBytes = 2 * MaxReviewPageBytes
	// maxResultsBytes bounds a completed batch's results, the largest answer there is
	// (a row per AC of a batch of up to 1,000,000, and the kinds' files beside them); it
	// is decoded as it is read, never held as bytes.
	maxResultsBytes = 1 << 30
)

// answerLimits bound the shape of a small answer or a review page before it is decoded,
// as every document from outside is (pkg/bounds): a page of MaxReviewPage items, each
// with the parts of one judge call, is well within them.
var answerLimits = bounds.Limits{Depth: 32, Items: 1 << 16, Total: 1 << 20}

// do sends one request and decodes a JSON answer into out (when not nil), read within
// maxAnswerBytes.
func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, header http.Header, out any) error {
	return c.doWithin(ctx, maxAnswerBytes, method, path, body, contentType, header, out)
}

// doWithin is do with an answer of at most limit bytes, checked against answerLimits
// before it is decoded.
func (c *Client) doWithin(ctx context.Context, limit int64, method, path string, body io.Reader, contentType string, header http.Header, out any) error {
	resp, err := c.send(ctx, method, path, body, contentType, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, limit))
		return nil
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return fmt.Errorf("ingress %s %s: answer: %w", method, path, err)
	}
	if int64(len(data)) > limit {
		return fmt.Errorf("ingress %s %s: the answer is over %d bytes, more than this client reads", method, path, limit)
	}
	if err := bounds.JSON(data, answerLimits); err != nil {
		return fmt.Errorf("ingress %s %s: answer: %w", method, path, err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("ingress %s %s: answer: %w", method, path, err)
	}
	return nil
}

// doStreamed is do for the one answer too large to hold twice (Results): decoded as it
// is read, at most limit bytes, an answer over it an error saying so.
func (c *Client) doStreamed(ctx context.Context, limit int64, method, path string, out any) error {
	resp, err := c.send(ctx, method, path, nil, "", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	lr := &io.LimitedReader{R: resp.Body, N: limit + 1}
	if err := json.NewDecoder(lr).Decode(out); err != nil {
		if lr.N <= 0 {
			return fmt.Errorf("ingress %s %s: the answer is over %d bytes, more than this client reads", method, path, limit)
		}
		return fmt.Errorf("ingress %s %s: answer: %w", method, path, err)
	}
	return nil
}

// send sends one request; an answer other than 2xx is an *Error.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string, header http.Header) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, body)
	if err != nil {
		return nil, fmt.Errorf("ingress %s %s: %w", method, path, err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("ingress %s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		e := &Error{Status: resp.StatusCode}
		if method == http.MethodHead || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&e.Problem) != nil {
			e.Problem.Error = http.StatusText(resp.StatusCode)
		}
		return nil, e
	}
	return resp, nil
}

// Publish implements client.Publisher: the messages' payloads (encoded events) go to
// POST /v1/events, in requests of at most chunkEvents events and about chunkBytes. The
// ingress derives every id itself; the topic and the messages' metadata are not sent.
func (c *Client) Publish(_ string, msgs ...*message.Message) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.PublishTimeout)
	defer cancel()
	for start := 0; start < len(msgs); {
		end, size := start, 0
		for end < len(msgs) && end-start < chunkEvents && (end == start || size+len(msgs[end].Payload) <= chunkBytes) {
			size += len(msgs[end].Payload)
			end++
		}
		raw := make([][]byte, 0, end-start)
		for _, m := range msgs[start:end] {
			raw = append(raw, m.Payload)
		}
		body, err := msgpack.Marshal(raw)
		if err != nil {
			return fmt.Errorf("ingress: encode events: %w", err)
		}
		var acc Accepted
		if err := c.do(ctx, http.MethodPost, PathEvents, bytes.NewReader(body), MediaMsgpack, nil, &acc); err != nil {
			return err
		}
		if acc.Accepted != end-start {
			return fmt.Errorf("ingress: %d of %d events accepted", acc.Accepted, end-start)
		}
		start = end
	}
	return nil
}

// refuseTenant is the error of a blob call for another tenant than the token's.
func (c *Client) refuseTenant(tenant string) error {
	return fmt.Errorf("%w: tenant %q: this ingress token is tenant %q's", blob.ErrInvalidRef, tenant, c.tenant)
}

// Put implements blob.Store: PUT /v1/blobs under the token's tenant.
func (c *Client) Put(ctx context.Context, tenant string, r io.Reader, opts blob.PutOptions) (blob.Attrs, error) {
	if tenant != c.tenant {
		return blob.Attrs{}, c.refuseTenant(tenant)
	}
	var h http.Header
	if opts.ExpectedSHA256 != "" {
		h = http.Header{HeaderExpectedSHA256: {opts.ExpectedSHA256}}
	}
	var got BlobAttrs
	err := c.do(ctx, http.MethodPut, PathBlobs, r, opts.MediaType, h, &got)
	var e *Error
	if errors.As(err, &e) {
		switch {
		case e.Problem.Quota != "":
			return blob.Attrs{}, fmt.Errorf("%w: %v", ErrQuota, err)
		case e.Status == http.StatusRequestEntityTooLarge:
			return blob.Attrs{}, fmt.Errorf("%w: %v", blob.ErrTooLarge, err)
		case e.Status == http.StatusUnprocessableEntity:
			return blob.Attrs{}, fmt.Errorf("%w: %v", blob.ErrDigestMismatch, err)
		}
	}
	if err != nil {
		// An error of the body's reader (a file too large for the submitter's limit)
		// comes back wrapped by the HTTP client: keep it reachable.
		return blob.Attrs{}, err
	}
	return blob.Attrs{Ref: blob.Ref{Tenant: c.tenant, SHA256: got.SHA256}, Size: got.Size, MediaType: got.MediaType}, nil
}

// Stat implements blob.Store: HEAD /v1/blobs/{sha256}.
func (c *Client) Stat(ctx context.Context, ref blob.Ref) (blob.Attrs, error) {
	resp, err := c.blob(ctx, http.MethodHead, ref)
	if err != nil {
		return blob.Attrs{}, err
	}
	resp.Body.Close()
	return attrsOf(ref, resp)
}

// Open implements blob.Store: GET /v1/blobs/{sha256}, verified as it is read.
func (c *Client) Open(ctx context.Context, ref blob.Ref) (io.ReadCloser, blob.Attrs, error) {
	resp, err := c.blob(ctx, http.MethodGet, ref)
	if err != nil {
		return nil, blob.Attrs{}, err
	}
	attrs, err := attrsOf(ref, resp)
	if err != nil {
		resp.Body.Close()
		return nil, blob.Attrs{}, err
	}
	return blob.NewVerifyingReader(resp.Body, attrs), attrs, nil
}

func (c *Client) blob(ctx context.Context, method string, ref blob.Ref) (*http.Response, error) {
	if err := ref.Validate(); err != nil {
		return nil, err
	}
	if ref.Tenant != c.tenant {
		return nil, c.refuseTenant(ref.Tenant)
	}
	resp, err := c.send(ctx, method, PathBlobs+"/"+ref.SHA256, nil, "", nil)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil, fmt.Errorf("%w: %s", blob.ErrNotFound, ref)
	}
	return resp, err
}

func attrsOf(ref blob.Ref, resp *http.Response) (blob.Attrs, error) {
	size, err := strconv.ParseInt(resp.Header.Get("Content-Length"), 10, 64)
	if err != nil {
		return blob.Attrs{}, fmt.Errorf("ingress: blob %s: no size in the answer", ref)
	}
	return blob.Attrs{Ref: ref, Size: size, MediaType: resp.Header.Get("Content-Type")}, nil
}

// Close implements blob.Store.
func (c *Client) Close() error { return nil }

// Progress is a batch's progress (GET /v1/batches/{batch}), nil while the batch is not
// recorded yet: the source client.Poll reads for `tribunal watch`.
func (c *Client) Progress(ctx context.Context, batchID string) (*client.Progress, error) {
	var st BatchStatus
	err := c.do(ctx, http.MethodGet, PathBatches+"/"+url.PathEscape(batchID), nil, "", nil, &st)
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &client.Progress{Total: st.Total, Done: st.Done, Completion: st.Completion}, nil
}

// Results reads a completed batch's results (GET /v1/batches/{batch}/results): what
// client.Load returns.
func (c *Client) Results(ctx context.Context, batchID string) (*client.Results, error) {
	var w Results
	err := c.doStreamed(ctx, maxResultsBytes, http.MethodGet, PathBatches+"/"+url.PathEscape(batchID)+"/results", &w)
	var e *Error
	if errors.As(err, &e) {
		switch e.Status {
		case http.StatusNotFound:
			return nil, fmt.Errorf("batch %s/%s: %w", c.tenant, batchID, client.ErrNotFound)
		case http.StatusConflict:
			return nil, fmt.Errorf("batch %s/%s: %w", c.tenant, batchID, client.ErrNotComplete)
		}
	}
	if err != nil {
		return nil, err
	}
	return w.results(), nil
}

// batchErr is an answer about a batch: the ingress's 404 for the batch itself is
// client.ErrNotFound, as it answers another team's batch exactly as one never
// submitted; another 404 (an item's judge call gone from the store) stays itself.
func (c *Client) batchErr(batchID string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound && e.Problem.Error == fmt.Sprintf("batch %s/%s: %v", c.tenant, batchID, client.ErrNotFound) {
		return fmt.Errorf("batch %s/%s: %w", c.tenant, batchID, client.ErrNotFound)
	}
	return err
}

// pages reads every page of a review endpoint of a batch (path after the batch), each
// within maxPageBytes, handing each decoded page to add, which returns the page's Next.
func (c *Client) pages(ctx context.Context, batchID, path string, newPage func() any, add func(any) (string, error)) error {
	after := ""
	for n := 0; ; n++ {
		limit := c.PageItems
		if limit <= 0 {
			limit = MaxReviewPage
		}
		q := url.Values{"limit": {strconv.Itoa(limit)}}
		if after != "" {
			q.Set("after", after)
		}
		p := newPage()
		sep := "?"
		if strings.Contains(path, "?") {
			sep = "&"
		}
		if err := c.doWithin(ctx, maxPageBytes, http.MethodGet, PathBatches+"/"+url.PathEscape(batchID)+path+sep+q.Encode(), nil, "", nil, p); err != nil {
			return c.batchErr(batchID, err)
		}
		next, err := add(p)
		if err != nil {
			return err
		}
		if next == "" {
			return nil
		}
		if next == after {
			return fmt.Errorf("ingress: %s of %s: page %d names itself as the next", path, batchID, n+1)
		}
		after = next
	}
}

// ReviewQueue reads a batch's review queue as a reviewer is shown it, blind (GET
// /v1/batches/{batch}/review, every page): each item's blind material, whether it was
// reviewed and the token holder's own answer.
func (c *Client) ReviewQueue(ctx context.Context, batchID string) ([]QueueItem, error) {
	return c.reviewQueue(ctx, batchID, "")
}

// ReviewStatus is ReviewQueue without the items' blind material (?fields=status): each
// item's id, kind, status and the token holder's own answer, which the ingress answers
// without reading the blob store.
func (c *Client) ReviewStatus(ctx context.Context, batchID string) ([]QueueItem, error) {
	return c.reviewQueue(ctx, batchID, FieldsStatus)
}

func (c *Client) reviewQueue(ctx context.Context, batchID, fields string) ([]QueueItem, error) {
	out := []QueueItem{}
	path := "/review"
	if fields != "" {
		path += "?fields=" + url.QueryEscape(fields)
	}
	err := c.pages(ctx, batchID, path, func() any { return &ReviewQueue{} }, func(p any) (string, error) {
		q := p.(*ReviewQueue)
		out = append(out, q.Items...)
		return q.Next, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReviewExport reads a batch's queue as reviewers are shown it, blind (GET
// /v1/batches/{batch}/review/export, every page), and the images its items show, each
// through GET /v1/batches/{batch}/review/items/{item}/images/{sha256} (which serves only
// what the item shows, so a reviewer's token reads it too): the same file `tribunal
// review --export` writes on the state folder.
func (c *Client) ReviewExport(ctx context.Context, batchID string) (*client.ReviewExport, error) {
	ex := client.ExportOf(nil)
	err := c.pages(ctx, batchID, "/review/export", func() any { return &ExportPage{} }, func(p any) (string, error) {
		pg := p.(*ExportPage)
		ex.Merge(&pg.ReviewExport)
		return pg.Next, nil
	})
	if err != nil {
		return nil, err
	}
	if ex.Images == nil {
		ex.Images = map[string]client.ReviewExportImage{}
	}
	for _, it := range ex.Items {
		for _, p := range it.Shown {
			if p.Image == nil {
				continue
			}
			if _, ok := ex.Images[p.Image.SHA256]; ok {
				continue
			}
			data, mt, err := c.reviewImage(ctx, batchID, it.Item, p.Image.SHA256)
			if err != nil {
				return nil, c.batchErr(batchID, fmt.Errorf("%s: image %s: %w", it.Item, p.Image.SHA256, err))
			}
			ex.Images[p.Image.SHA256] = client.ReviewExportImage{MediaType: mt, Data: base64.StdEncoding.EncodeToString(data)}
		}
	}
	return ex, nil
}

// reviewImage reads one image an item shows, within the blob bound, and checks it hashes
// to its digest.
func (c *Client) reviewImage(ctx context.Context, batchID, item, sha string) ([]byte, string, error) {
	path := PathBatches + "/" + url.PathEscape(batchID) + "/review/items/" + url.PathEscape(item) + "/images/" + url.PathEscape(sha)
	resp, err := c.send(ctx, http.MethodGet, path, nil, "", nil)
	if err != nil {
		return nil, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, blob.ArtifactMaxSize+1))
	if err != nil {
		return nil, "", fmt.Errorf("ingress GET %s: %w", path, err)
	}
	if int64(len(data)) > blob.ArtifactMaxSize {
		return nil, "", fmt.Errorf("ingress GET %s: the image is over %d bytes", path, blob.ArtifactMaxSize)
	}
	if h := sha256.Sum256(data); hex.EncodeToString(h[:]) != sha {
		return nil, "", fmt.Errorf("ingress GET %s: the image does not hash to its digest", path)
	}
	return data, resp.Header.Get("Content-Type"), nil
}

// ReviewGold reads the queue's reviewed ACs as a gold set is written from them (GET
// /v1/batches/{batch}/review/gold, every page): the team's, with no judge in them.
func (c *Client) ReviewGold(ctx context.Context, batchID string) ([]*records.Job, error) {
	var out []*records.Job
	err := c.pages(ctx, batchID, "/review/gold", func() any { return &GoldPage{} }, func(p any) (string, error) {
		g := p.(*GoldPage)
		for i, j := range g.Jobs {
			if j == nil || j.Tenant != c.tenant {
				return "", fmt.Errorf("ingress: review gold of %s: job %d is not team %s's", batchID, len(out)+i, c.tenant)
			}
		}
		out = append(out, g.Jobs...)
		return g.Next, nil
	})
	return out, err
}

// RecordAnswers posts an answers file (client.ReviewAnswers) to POST
// /v1/batches/{batch}/review/answers: the ingress checks every answer and records them
// by the token's holder; what it leaves for later (Answers.Later) is the caller's to send
// once the listing shows the recorded ones.
func (c *Client) RecordAnswers(ctx context.Context, batchID string, answers []byte) (*Answers, error) {
	var a Answers
	if err := c.do(ctx, http.MethodPost, PathBatches+"/"+url.PathEscape(batchID)+"/review/answers", bytes.NewReader(answers), "application/json", nil, &a); err != nil {
		return nil, c.batchErr(batchID, err)
	}
	return &a, nil
}

// Reviewer names the token's holder as the ingress records their reviews (Reviewer):
// the by a review.recorded event through c must carry.
func (c *Client) Reviewer() string { return Reviewer(c.tenant, c.token) }
