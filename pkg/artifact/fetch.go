package artifact

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/netguard"
)

// FetchOptions bound what the renderer fetches from the network.
type FetchOptions struct {
	Timeout      time.Duration
	MaxBytes     int64
	MaxRedirects int
	// AllowPrivate lets artifacts live on loopback, private-use (RFC 1918, IPv6 unique
	// local), shared (100.64.0.0/10) or link-local addresses. Off by default: a batch
	// must not turn the renderer into a probe of its own network. The other
	// special-purpose ranges (see pkg/netguard) are refused either way.
	AllowPrivate bool
}

func (o FetchOptions) withDefaults() FetchOptions {
	if o.Timeout <= 0 {
		o.Timeout = 15 * time.Second
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = 20 << 20
	}
	if o.MaxRedirects <= 0 {
		o.MaxRedirects = 5
	}
	return o
}

// ErrForbiddenAddress is returned for a URL that resolves to a refused address.
var ErrForbiddenAddress = netguard.ErrForbidden

// Fetcher fetches remote HTML artifacts.
type Fetcher struct {
	opts   FetchOptions
	client *http.Client
}

// NewFetcher builds a fetcher whose dialer checks every resolved address against the
// IANA special-purpose ranges (pkg/netguard), so a redirect or a DNS answer cannot reach
// a refused network either.
func NewFetcher(o FetchOptions) *Fetcher {
	o = o.withDefaults()
	dialer := &net.Dialer{Timeout: o.Timeout, Control: netguard.ForURLs(o.AllowPrivate).Control}
	transport := &http.Transport{DialContext: dialer.DialContext, Proxy: nil, TLSHandshakeTimeout: o.Timeout, ResponseHeaderTimeout: o.Timeout}
	client := &http.Client{Timeout: o.Timeout, Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) > o.MaxRedirects {
			return fmt.Errorf("more than %d redirects", o.MaxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to %s scheme refused", req.URL.Scheme)
		}
		return nil
	}}
	return &Fetcher{opts: o, client: client}
}

// Fetched is a remote artifact's bytes and classification.
type Fetched struct {
	Result
	Data []byte
}

// Fetch gets rawURL. Failures that are the artifact's fault (refused address, HTTP
// error, too large, not HTML) come back as a Blocked result; only a cancelled context
// is an error, because it says nothing about the artifact.
func (f *Fetcher) Fetch(ctx context.Context, rawURL string) (Fetched, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s: bad URL %q", CauseUnreadable, rawURL)}}, nil
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s: %v", CauseUnreadable, err)}}, nil
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml;q=0.9,*/*;q=0.1")
	req.Header.Set("User-Agent", "tribunal-renderer")
	resp, err := f.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return Fetched{}, ctx.Err()
		}
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s: fetch %s: %s", CauseUnreadable, u.Redacted(), conciseNetErr(err))}}, nil
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s: fetch %s: HTTP %d", CauseUnreadable, u.Redacted(), resp.StatusCode)}}, nil
	}
	ct := resp.Header.Get("Content-Type")
	data, err := io.ReadAll(io.LimitReader(resp.Body, f.opts.MaxBytes+1))
	if err != nil {
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s: read %s: %v", CauseUnreadable, u.Redacted(), err)}}, nil
	}
	if int64(len(data)) > f.opts.MaxBytes {
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s: %s is larger than %d bytes", CauseUnreadable, u.Redacted(), f.opts.MaxBytes)}}, nil
	}
	sniffed := http.DetectContentType(data)
	if !strings.HasPrefix(ct, "text/html") && !strings.HasPrefix(ct, "application/xhtml") && !(ct == "" && strings.HasPrefix(sniffed, "text/html")) {
		return Fetched{Result: Result{Blocked: fmt.Sprintf("%s (%s)", ReasonRemoteNonHT, cmp.Or(ct, sniffed))}}, nil
	}
	if LooksLikeDiff(data) {
		return Fetched{Result: Result{Blocked: ReasonDiff}}, nil
	}
	return Fetched{Result: Result{Class: ClassHTML, MediaType: "text/html"}, Data: data}, nil
}

func conciseNetErr(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return err.Error()
}
