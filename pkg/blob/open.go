package blob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
)

// Services are configured with one string (a flag or an environment variable), so the
// driver is chosen by URL scheme at run time instead of by whoever builds the binary.
// Drivers register themselves from init, which is why a program must import a driver
// package (usually blank) for its scheme to be known.
var (
	registryMu sync.RWMutex
	openers    = map[string]func(ctx context.Context, u *url.URL) (Store, error){}
)

// schemeRe accepts RFC 3986 schemes of at least two characters. One-letter schemes are
// refused so that a Windows drive letter ("C:\data") is never mistaken for a scheme.
var schemeRe = regexp.MustCompile(`^[a-z][a-z0-9+.-]+$`)

// rawSchemeRe finds a scheme prefix in a raw URL, to tell URLs from bare paths.
var rawSchemeRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]+:`)

// Register makes a driver available to OpenURL under scheme. It panics on a malformed
// or duplicate scheme or a nil opener, because both are programming errors that must
// surface at startup rather than as a confusing "unknown scheme" later.
func Register(scheme string, opener func(ctx context.Context, u *url.URL) (Store, error)) {
	if !schemeRe.MatchString(scheme) {
		panic(fmt.Sprintf("blob: Register: invalid scheme %q (want lower case, at least two characters)", scheme))
	}
	if opener == nil {
		panic(fmt.Sprintf("blob: Register: nil opener for scheme %q", scheme))
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic(fmt.Sprintf("blob: Register called twice for scheme %q", scheme))
	}
	openers[scheme] = opener
}

// Schemes lists the registered schemes, sorted, for error messages and help text.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// OpenURL opens the Store that rawURL describes, e.g. "file:///var/lib/tribunal/blobs"
// or "s3://artifacts?endpoint=127.0.0.1:9000". A string without a scheme is a directory
// for the "file" driver, so the all-in-one default can be configured with a plain path.
// Errors name the URL with credentials redacted, since they end up in logs.
func OpenURL(ctx context.Context, rawURL string) (Store, error) {
	if rawURL == "" {
		return nil, errors.New("blob: open: empty store URL")
	}
	var u *url.URL
	if rawSchemeRe.MatchString(rawURL) {
		var err error
		u, err = url.Parse(rawURL)
		if err != nil {
			// url.Error repeats the raw URL, secrets included; report only its cause.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = ue.Err
			}
			return nil, fmt.Errorf("blob: open %s: parse URL: %v", redactRaw(rawURL), err)
		}
	} else {
		u = &url.URL{Scheme: "file", Path: rawURL}
	}

	registryMu.RLock()
	opener := openers[u.Scheme]
	registryMu.RUnlock()
	if opener == nil {
		return nil, fmt.Errorf("blob: open %s: unknown scheme %q (registered: %s; is the driver package imported?)",
			RedactURL(u), u.Scheme, strings.Join(Schemes(), ", "))
	}
	s, err := opener(ctx, u)
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", RedactURL(u), err)
	}
	return s, nil
}

// secretParamRe matches query parameter names whose values must never reach a log.
var secretParamRe = regexp.MustCompile(`(?i)secret|token|password|passwd|signature|credential`)

// RedactURL renders u for logs and errors with the userinfo password and any
// secret-looking query values replaced, so a store URL can be quoted safely.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	c := *u
	if c.User != nil {
		if _, has := c.User.Password(); has {
			c.User = url.UserPassword(c.User.Username(), "xxxxx")
		}
	}
	if c.RawQuery != "" {
		q := c.Query()
		changed := false
		for k := range q {
			if secretParamRe.MatchString(k) {
				q[k] = []string{"xxxxx"}
				changed = true
			}
		}
		if changed {
			c.RawQuery = q.Encode()
		}
	}
	return c.String()
}

// userinfoRe finds the userinfo of a raw URL that failed to parse.
var userinfoRe = regexp.MustCompile(`//[^/?#]*@`)

// redactRaw hides the userinfo and query of a URL that url.Parse rejected: RedactURL
// needs a parsed URL, and an unparsed query cannot be searched for secrets reliably.
func redactRaw(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		raw = raw[:i] + "?..."
	}
	return userinfoRe.ReplaceAllString(raw, "//xxxxx@")
}
