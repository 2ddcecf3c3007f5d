package web

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/idna"

	"github.com/tribunal-dev/tribunal/pkg/netguard"
)

// RefusedHeader marks the egress proxy's own refusals, so a navigation that was refused
// (directly or through a redirect) is told apart from the app answering 403 itself.
const RefusedHeader = "X-Tribunal-Refused"

// How the tribunal command names the settings a refusal can be lifted with. A refusal
// quotes them, because the person who reads it (a team, in a blocked AC) must be able
// to tell the operator exactly what to change.
const (
	AllowHostsFlag   = "--web-allow-host"
	AllowHostsEnv    = "TRIBUNAL_WEB_ALLOW_HOSTS"
	AllowPrivateFlag = "--web-allow-private"
	AllowPrivateEnv  = "TRIBUNAL_WEB_ALLOW_PRIVATE"
)

// CheckAllowHosts reports the first malformed entry of an Options.AllowHosts list, so
// a command can refuse a bad flag at startup rather than on the first web job.
func CheckAllowHosts(entries []string) error {
	_, err := parseAllowHosts(entries)
	return err
}

// hostAllowlist is the set of hosts the browser may reach. Every host in it, and every
// host checked against it, is in the form Chromium sends: lower case, punycode for
// international names, no trailing dot, IP addresses in their canonical form. The zero
// value allows nothing.
type hostAllowlist struct {
	anyHost   bool            // "*": every host, its addresses still held to the guard
	hosts     map[string]bool // "app.example.com": any port
	hostPorts map[string]bool // "localhost:3000": that port only
	suffixes  []string        // ".preview.example.com" from "*.preview.example.com"
	ips       map[netip.Addr]bool
}

// parseAllowHosts reads entries of the form host, host:port, *.domain or * (any host).
// IP literals are allowed like names (bracket IPv6 with a port).
func parseAllowHosts(entries []string) (*hostAllowlist, error) {
	a := &hostAllowlist{hosts: map[string]bool{}, hostPorts: map[string]bool{}, ips: map[netip.Addr]bool{}}
	for _, raw := range entries {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		bad := func(want string) error { return fmt.Errorf("allowed host %q: want %s", raw, want) }
		if e == "*" {
			a.anyHost = true
			continue
		}
		if rest, ok := strings.CutPrefix(e, "*."); ok {
			domain, err := canonicalName(rest)
			// A wildcard names subdomains of a registered domain: "*.com" would allow the
			// web, and "*.0.1" would match IP addresses.
			if err != nil || !strings.Contains(domain, ".") || isNumericLabel(domain[strings.LastIndexByte(domain, '.')+1:]) {
				return nil, bad("*.domain, with a domain of two labels or more")
			}
			a.suffixes = append(a.suffixes, "."+domain)
			continue
		}
		if strings.ContainsAny(e, "*/?#@ ") {
			return nil, bad("host, host:port or *.domain")
		}
		host, port, err := net.SplitHostPort(e)
		if err != nil {
			host, port = strings.TrimSuffix(strings.TrimPrefix(e, "["), "]"), ""
		} else if !validPort(port) {
			return nil, bad("host:port with a port number")
		}
		h, err := canonicalHost(host)
		if err != nil {
			return nil, fmt.Errorf("allowed host %q: %w", raw, err)
		}
		if ip, err := netip.ParseAddr(h); err == nil {
			// Chromium and the kernel take the unspecified address for this host, so
			// listing it would open loopback under another name.
			if ip.IsUnspecified() {
				return nil, bad("a host: the unspecified address names none")
			}
			a.ips[ip] = true
		}
		if port == "" {
			a.hosts[h] = true
		} else {
			a.hostPorts[net.JoinHostPort(h, port)] = true
		}
	}
	if !a.anyHost && len(a.hosts)+len(a.hostPorts)+len(a.suffixes) == 0 {
		return nil, errors.New("allowed hosts: the list is empty")
	}
	return a, nil
}

// canonicalHost is host as Chromium sends it, or an error for a host it never sends.
func canonicalHost(host string) (string, error) {
	if host == "" {
		return "", errors.New("empty host")
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return ip.Unmap().WithZone("").String(), nil
	}
	name, err := canonicalName(host)
	if err != nil {
		return "", err
	}
	// Chromium rewrites shorthand like "127.1" to "127.0.0.1" before anything sees it, so
	// such an entry could never match.
	if isNumericLabel(name[strings.LastIndexByte(name, '.')+1:]) {
		return "", fmt.Errorf("%q is neither a host name nor an IP address", host)
	}
	return name, nil
}

// canonicalName lower-cases a DNS name, encodes international labels as punycode and
// drops a trailing dot.
func canonicalName(name string) (string, error) {
	n, err := idna.Lookup.ToASCII(strings.TrimSuffix(name, "."))
	if err != nil || n == "" {
		return "", fmt.Errorf("%q is not a host name", name)
	}
	return strings.ToLower(n), nil
}

func isNumericLabel(l string) bool {
	if l == "" {
		return false
	}
	if strings.HasPrefix(l, "0x") {
		return true
	}
	return strings.Trim(l, "0123456789") == ""
}

func validPort(p string) bool {
	n, err := strconv.ParseUint(p, 10, 16)
	return err == nil && n > 0
}

// allows reports whether hostport ("host:port", or a bare host with defaultPort) may be
// reached.
func (a *hostAllowlist) allows(hostport, defaultPort string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defaultPort
	}
	host, err = canonicalHost(host)
	if err != nil {
		return false
	}
	if a.anyHost || a.hosts[host] || a.hostPorts[net.JoinHostPort(host, port)] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// empty reports whether the list allows no host at all: a shared renderer whose
// operator has allowed none yet.
func (a *hostAllowlist) empty() bool {
	return !a.anyHost && len(a.hosts)+len(a.hostPorts)+len(a.suffixes) == 0
}

// egressPolicy is what a restricted browser may reach: the hosts it may ask for, and the
// addresses those may be dialled at. The addresses follow the rule of artifact URLs
// (netguard.ForURLs): every special-purpose address is refused unless allowPrivate opens
// the private ones, or the request names, as its host, an address the list names.
type egressPolicy struct {
	allow        *hostAllowlist
	allowPrivate bool
	guard        *netguard.Guard
	// resolver resolves the names the browser asks for; nil is the system's. Tests
	// point it at a DNS server of their own to rebind a name.
	resolver *net.Resolver
}

func newEgressPolicy(allow *hostAllowlist, allowPrivate bool) *egressPolicy {
	return &egressPolicy{allow: allow, allowPrivate: allowPrivate, guard: netguard.ForURLs(allowPrivate)}
}

// checkDial returns nil when a request for host may be dialled at ip, else the refusal
// with the setting that would allow it. A listed address is exempt from the rule only
// for a request that names it: were it exempt for any host, an allowed name whose DNS a
// team controls (a wildcard's subdomain) could be pointed at it, on any port.
func (p *egressPolicy) checkDial(host string, ip netip.Addr) error {
	ip = ip.Unmap().WithZone("")
	if named, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil && named.Unmap().WithZone("") == ip && p.allow.ips[ip] {
		return nil
	}
	err := p.guard.Check(ip)
	if err == nil {
		return nil
	}
	if !p.allowPrivate && netguard.IsPrivate(ip) {
		return fmt.Errorf("%w; allow loopback, private and link-local addresses with %s (%s=true), or list the address itself in %s (%s) and name it in the route",
			err, AllowPrivateFlag, AllowPrivateEnv, AllowHostsFlag, AllowHostsEnv)
	}
	if ip.IsUnspecified() {
		// Linux connects it to loopback; the list refuses it too (parseAllowHosts).
		return fmt.Errorf("%w; no setting allows the unspecified address", err)
	}
	return fmt.Errorf("%w; only listing the address itself in %s (%s) and naming it in the route allows it", err, AllowHostsFlag, AllowHostsEnv)
}

// dialContext is the proxy's way to every host. addr is the host the browser asked for,
// before resolution; checkDial runs on each address actually dialled, after it, so an
// allowed name that resolves (or is rebound) to a refused address is refused too.
func (p *egressPolicy) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: unexpected address %q", netguard.ErrForbidden, addr)
	}
	// A name may resolve to several addresses, each refused for its own reason; the
	// dialer reports one, the refusal names them all.
	var mu sync.Mutex
	var refused []string
	var first error
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Resolver: p.resolver,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: unexpected address %q", netguard.ErrForbidden, address)
			}
			if err := p.checkDial(host, ap.Addr()); err != nil {
				mu.Lock()
				defer mu.Unlock()
				refused = append(refused, ap.Addr().String())
				first = cmp.Or(first, err)
				return err
			}
			return nil
		}}
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil && errors.Is(err, netguard.ErrForbidden) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil {
			return nil, fmt.Errorf("resolved to %s: %w", strings.Join(refused, ", "), first)
		}
	}
	return conn, err
}

// hostRefusal is the reason a host outside the list is refused.
func (p *egressPolicy) hostRefusal(host string) string {
	if p.allow.empty() {
		return fmt.Sprintf("host %s is not among the web sensor's allowed hosts: this renderer serves teams and allows none until its operator lists them; allow it with %s=%s (%s)",
			host, AllowHostsFlag, host, AllowHostsEnv)
	}
	return fmt.Sprintf("host %s is not among the web sensor's allowed hosts; allow it with %s=%s (%s)", host, AllowHostsFlag, host, AllowHostsEnv)
}

// maxRefusals bounds the reasons a proxy keeps: a page can ask for thousands of refused
// URLs, and a blocked AC needs only the first few.
const maxRefusals = 8

// egressProxy is the only way out of the browser when hosts are restricted: Chromium
// sends every request (every frame, worker, redirect and WebSocket, loopback included)
// through it, and it forwards only those to allowed hosts, dialling only allowed
// addresses. A proxy rather than DevTools request interception, because interception
// misses out-of-process frames, service workers and WebSockets. Each view gets a proxy
// of its own (its browser context's proxy server), so the reasons it records are that
// view's, for its blocked AC; the browser's default proxy refuses everything.
type egressProxy struct {
	ln  net.Listener
	srv *http.Server
	tr  *http.Transport
	log *slog.Logger

	mu      sync.Mutex
	refused []string // the first maxRefusals reasons, in order
	dropped int
}

func startEgressProxy(policy *egressPolicy, log *slog.Logger) (*egressProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("web sensor: egress proxy: %w", err)
	}
	p := &egressProxy{ln: ln, log: log}
	gp := goproxy.NewProxyHttpServer()
	// goproxy warns on stderr about every refused dial and closed client; the refusals
	// that matter are logged (and recorded) below.
	gp.Logger = proxyLog{log}
	// goproxy's defaults skip TLS verification and send tunnels through the proxy the
	// environment names; this transport verifies, goes direct for every kind of request
	// and checks each address it dials.
	p.tr = http.DefaultTransport.(*http.Transport).Clone()
	p.tr.Proxy = nil
	p.tr.DialContext = policy.dialContext
	gp.Tr = p.tr
	gp.ConnectDial = nil // CONNECT tunnels then dial through tr.DialContext too
	refusal := func(r *http.Request, host, reason string) *http.Response {
		resp := goproxy.NewResponse(r, "text/plain; charset=utf-8", http.StatusForbidden, "tribunal: "+reason+"\n")
		resp.Header.Set(RefusedHeader, host)
		return resp
	}
	gp.OnRequest().DoFunc(func(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		if policy.allow.allows(r.URL.Host, defaultPort(r.URL.Scheme)) {
			return r, nil
		}
		reason := policy.hostRefusal(r.URL.Host)
		p.refuse(reason)
		return r, refusal(r, r.URL.Host, reason)
	})
	// A dial the guard refused: an answer saying so, rather than goproxy's 500.
	gp.OnResponse().DoFunc(func(resp *http.Response, ctx *goproxy.ProxyCtx) *http.Response {
		if resp != nil || !errors.Is(ctx.Error, netguard.ErrForbidden) {
			return resp
		}
		reason := fmt.Sprintf("host %s: %v", ctx.Req.URL.Host, ctx.Error)
		p.refuse(reason)
		return refusal(ctx.Req, ctx.Req.URL.Host, reason)
	})
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		// Chromium always names the port; a CONNECT without one would be dialled on a
		// port other than the one checked.
		if _, _, err := net.SplitHostPort(host); err == nil && policy.allow.allows(host, "") {
			return goproxy.OkConnect, host
		}
		reason := policy.hostRefusal(host)
		p.refuse(reason)
		// An answer rather than a bare close, so that Chromium reports a refused tunnel.
		ctx.Resp = refusal(ctx.Req, host, reason)
		return goproxy.RejectConnect, host
	})
	gp.ConnectionErrHandler = func(w io.Writer, ctx *goproxy.ProxyCtx, err error) {
		host := ctx.Req.URL.Host
		status := "502 Bad Gateway\r\n"
		if errors.Is(err, netguard.ErrForbidden) {
			p.refuse(fmt.Sprintf("host %s: %v", host, err))
			status = "403 Forbidden\r\n" + RefusedHeader + ": " + host + "\r\n"
		}
		_, _ = fmt.Fprintf(w, "HTTP/1.1 %sContent-Length: 0\r\nConnection: close\r\n\r\n", status)
	}
	p.srv = &http.Server{Handler: gp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// proxyLog hands goproxy's messages to slog as debug messages.
type proxyLog struct{ log *slog.Logger }

func (l proxyLog) Printf(format string, args ...any) {
	if l.log != nil {
		l.log.Debug(fmt.Sprintf(format, args...), "component", "egress proxy")
	}
}

// refuse records and logs one refusal. The log is for debugging: a view's refusals
// reach its blocked AC, or the log once it has rendered (Sense), and the browser's own
// requests (component updates Chromium sends despite its flags) concern nobody.
func (p *egressProxy) refuse(reason string) {
	if p.log != nil {
		p.log.Debug("web sensor: refused a request", "reason", reason)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if slices.Contains(p.refused, reason) {
		return
	}
	if len(p.refused) < maxRefusals {
		p.refused = append(p.refused, reason)
	} else {
		p.dropped++
	}
}

// refusals are the reasons recorded so far, with a count of those left out; none for a
// view without a proxy.
func (p *egressProxy) refusals() []string {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := append([]string(nil), p.refused...)
	if p.dropped > 0 {
		out = append(out, fmt.Sprintf("%d more refused", p.dropped))
	}
	return out
}

// URL is the proxy's address for Chromium's --proxy-server.
func (p *egressProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy, its tunnels and its connections to the allowed hosts.
func (p *egressProxy) Close() {
	_ = p.srv.Close()
	p.tr.CloseIdleConnections()
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "https", "wss":
		return "443"
	default:
		return "80"
	}
}
