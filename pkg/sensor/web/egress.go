package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/elazarl/goproxy"
	"golang.org/x/net/idna"

	"github.com/tribunal-dev/tribunal/pkg/netguard"
)

// RefusedHeader marks the egress proxy's own refusals, so a navigation that was refused
// (directly or through a redirect) is told apart from the app answering 403 itself.
const RefusedHeader = "X-Tribunal-Refused"

// CheckAllowHosts reports the first malformed entry of an Options.AllowHosts list, so
// a command can refuse a bad flag at startup rather than on the first web job.
func CheckAllowHosts(entries []string) error {
	_, err := parseAllowHosts(entries)
	return err
}

// hostAllowlist is the set of hosts the browser may reach. Every host in it, and every
// host checked against it, is in the form Chromium sends: lower case, punycode for
// international names, no trailing dot, IP addresses in their canonical form.
type hostAllowlist struct {
	hosts     map[string]bool // "app.example.com": any port
	hostPorts map[string]bool // "localhost:3000": that port only
	suffixes  []string        // ".preview.example.com" from "*.preview.example.com"
	ips       map[netip.Addr]bool
}

// parseAllowHosts reads entries of the form host, host:port or *.domain. IP literals are
// allowed like names (bracket IPv6 with a port).
func parseAllowHosts(entries []string) (*hostAllowlist, error) {
	a := &hostAllowlist{hosts: map[string]bool{}, hostPorts: map[string]bool{}, ips: map[netip.Addr]bool{}}
	for _, raw := range entries {
		e := strings.TrimSpace(raw)
		if e == "" {
			continue
		}
		bad := func(want string) error { return fmt.Errorf("allowed host %q: want %s", raw, want) }
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
			a.ips[ip] = true
		}
		if port == "" {
			a.hosts[h] = true
		} else {
			a.hostPorts[net.JoinHostPort(h, port)] = true
		}
	}
	if len(a.hosts)+len(a.hostPorts)+len(a.suffixes) == 0 {
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
	if a.hosts[host] || a.hostPorts[net.JoinHostPort(host, port)] {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(host, s) {
			return true
		}
	}
	return false
}

// egressGuard refuses every special-purpose address but loopback and private-use ones,
// which an allowed host (a dev server, an internal staging app) may well resolve to.
var egressGuard = netguard.New(netguard.Loopback, netguard.PrivateUse)

// dialControl refuses connections to special-purpose addresses other than loopback and
// private-use ones (link-local and shared addresses, where cloud metadata services
// answer; NAT64, 6to4 and the other forms that reach an IPv4 address indirectly;
// reserved, benchmarking and documentation ranges) unless the list names that address
// itself. It runs on the address actually dialled, after name resolution, so an allowed
// name that resolves there is refused too.
func (a *hostAllowlist) dialControl(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("egress: unexpected address %q", address)
	}
	ip := ap.Addr().Unmap().WithZone("")
	if a.ips[ip] {
		return nil
	}
	if err := egressGuard.Check(ip); err != nil {
		return fmt.Errorf("egress: %w; the allowed hosts do not name it", err)
	}
	return nil
}

// egressProxy is the only way out of the browser when hosts are restricted: Chromium
// sends every request (every frame, worker, redirect and WebSocket, loopback included)
// through it, and it forwards only those to allowed hosts. A proxy rather than
// DevTools request interception, because interception misses out-of-process frames,
// service workers and WebSockets.
type egressProxy struct {
	ln  net.Listener
	srv *http.Server
}

func startEgressProxy(allow *hostAllowlist, log *slog.Logger) (*egressProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("web sensor: egress proxy: %w", err)
	}
	p := &egressProxy{ln: ln}
	gp := goproxy.NewProxyHttpServer()
	// goproxy's defaults skip TLS verification and send tunnels through the proxy the
	// environment names; this transport verifies, goes direct for every kind of request
	// and checks each address it dials.
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: allow.dialControl}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	tr.DialContext = dialer.DialContext
	gp.Tr = tr
	gp.ConnectDial = nil // CONNECT tunnels then dial through tr.DialContext too
	refuse := func(kind, host string) {
		if log != nil {
			log.Info("web sensor: refused a request to a host not allowed", "kind", kind, "host", host)
		}
	}
	refusal := func(r *http.Request, host string) *http.Response {
		resp := goproxy.NewResponse(r, "text/plain; charset=utf-8", http.StatusForbidden,
			fmt.Sprintf("tribunal: %s is not among the renderer's allowed hosts\n", host))
		resp.Header.Set(RefusedHeader, host)
		return resp
	}
	gp.OnRequest().DoFunc(func(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		if allow.allows(r.URL.Host, defaultPort(r.URL.Scheme)) {
			return r, nil
		}
		refuse("http", r.URL.Host)
		return r, refusal(r, r.URL.Host)
	})
	gp.OnRequest().HandleConnectFunc(func(host string, ctx *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		// Chromium always names the port; a CONNECT without one would be dialled on a
		// port other than the one checked.
		if _, _, err := net.SplitHostPort(host); err == nil && allow.allows(host, "") {
			return goproxy.OkConnect, host
		}
		refuse("connect", host)
		// An answer rather than a bare close, so that Chromium reports a refused tunnel.
		ctx.Resp = refusal(ctx.Req, host)
		return goproxy.RejectConnect, host
	})
	p.srv = &http.Server{Handler: gp, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// URL is the proxy's address for Chromium's --proxy-server.
func (p *egressProxy) URL() string { return "http://" + p.ln.Addr().String() }

// Close stops the proxy and its tunnels.
func (p *egressProxy) Close() { _ = p.srv.Close() }

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "https", "wss":
		return "443"
	default:
		return "80"
	}
}
