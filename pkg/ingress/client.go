package ingress

import (
	"bytes"
	"context"
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
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/spend"
)

// Client is a team's side of the ingress. It implements client.Publisher and blob.Store
// over HTTP, so the Submitter that submits straight to NATS and a blob store submits
// through the ingress unchanged, and reads batches for `tribunal watch` and `results`.
type Client struct {
	base   *url.URL
	token  string
	http   *http.Client
	tenant string
	spend  *spend.Allowance
	// PublishTimeout bounds one Publish (client.Publisher has no context).
	PublishTimeout time.Duration
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
	c.tenant, c.spend = who.Tenant, who.Spend
	return c, nil
}

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

func (e *Error) Error() string {
	if len(e.Problem.Refusals) <= 1 {
		return fmt.Sprintf("ingress: %d %s: %s", e.Status, http.StatusText(e.Status), e.Problem.Error)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "ingress: %d %s: %s", e.Status, http.StatusText(e.Status), e.Problem.Error)
	for _, r := range e.Problem.Refusals[1:] {
		fmt.Fprintf(&b, "\n  event %d: %s", r.Index, r.Message)
	}
	return b.String()
}

// do sends one request and decodes a JSON answer into out (when not nil).
// ErrQuota is a request the ingress refused because the team is at one of its quotas
// (Problem.Quota): a submission stops on it, naming the quota.
var ErrQuota = errclass.New(errclass.Refused, "the team's quota is reached")

// maxAnswerBytes bounds an answer the client reads; a large batch's results are the
// largest answer there is.
const maxAnswerBytes = 1 << 30

func (c *Client) do(ctx context.Context, method, path string, body io.Reader, contentType string, header http.Header, out any) error {
	resp, err := c.send(ctx, method, path, body, contentType, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxAnswerBytes)).Decode(out); err != nil {
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
	err := c.do(ctx, http.MethodGet, PathBatches+"/"+url.PathEscape(batchID)+"/results", nil, "", nil, &w)
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

// batchErr is an answer about a batch: a 404 is client.ErrNotFound, as the ingress
// answers another team's batch exactly as one never submitted.
func (c *Client) batchErr(batchID string, err error) error {
	var e *Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return fmt.Errorf("batch %s/%s: %w", c.tenant, batchID, client.ErrNotFound)
	}
	return err
}

// ReviewQueue reads a batch's review queue (GET /v1/batches/{batch}/review): each
// entry with its job record (client.ReviewEntryOf), so client.CheckReviewAnswer and
// client.RecordReview work on it as on the state folder, publishing through c.
func (c *Client) ReviewQueue(ctx context.Context, batchID string) ([]client.ReviewEntry, error) {
	var q ReviewQueue
	if err := c.do(ctx, http.MethodGet, PathBatches+"/"+url.PathEscape(batchID)+"/review", nil, "", nil, &q); err != nil {
		return nil, c.batchErr(batchID, err)
	}
	out := make([]client.ReviewEntry, 0, len(q.Entries))
	for _, e := range q.Entries {
		if e.Record == nil {
			return nil, fmt.Errorf("ingress: review queue of %s: %s has no job record", batchID, e.Item)
		}
		out = append(out, client.ReviewEntryOf(e.ReviewEntry, e.Record))
	}
	return out, nil
}

// ReviewExport reads a batch's queue as reviewers are shown it, blind (GET
// /v1/batches/{batch}/review/export), and the images its items show, each through GET
// /v1/blobs under the token's tenant: the same file `tribunal review --export` writes
// on the state folder.
func (c *Client) ReviewExport(ctx context.Context, batchID string) (*client.ReviewExport, error) {
	var ex client.ReviewExport
	if err := c.do(ctx, http.MethodGet, PathBatches+"/"+url.PathEscape(batchID)+"/review/export", nil, "", nil, &ex); err != nil {
		return nil, c.batchErr(batchID, err)
	}
	if err := ex.AddImages(ctx, c, c.tenant); err != nil {
		return nil, err
	}
	return &ex, nil
}

// Reviewer names the token's holder as the ingress records their reviews (Reviewer):
// the by a review.recorded event through c must carry.
func (c *Client) Reviewer() string { return Reviewer(c.tenant, c.token) }
