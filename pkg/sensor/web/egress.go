package web

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/elazarl/goproxy"
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

// hostAllowlist is the set of hosts the browser may reach.
type hostAllowlist struct {
	hosts     map[string]bool // "app.example.com": any port
	hostPorts map[string]bool // "localhost:3000": that port only
	suffixes  []string        // ".preview.example.com" from "*.preview.example.com"
}

// parseAllowHosts reads entries of the form host, host:port or *.domain. Hosts compare
// case-insensitively; IP literals are allowed like names (bracket IPv6 with a port).
func parseAllowHosts(entries []string) (*hostAllowlist, error) {
	a := &hostAllowlist{hosts: map[string]bool{}, hostPorts: map[string]bool{}}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "":
			continue
		case strings.HasPrefix(e, "*."):
			rest := e[1:]
			if strings.ContainsAny(rest[1:], "*:/") || len(rest) < 2 {
				return nil, fmt.Errorf("allowed host %q: want *.domain", e)
			}
			a.suffixes = append(a.suffixes, rest)
		case strings.ContainsAny(e, "*/?#@ "):
			return nil, fmt.Errorf("allowed host %q: want host, host:port or *.domain", e)
		default:
			if h, p, err := net.SplitHostPort(e); err == nil {
				if h == "" || p == "" {
					return nil, fmt.Errorf("allowed host %q: want host:port", e)
				}
				a.hostPorts[net.JoinHostPort(h, p)] = true
				continue
			}
			a.hosts[strings.Trim(e, "[]")] = true
		}
	}
	if len(a.hosts)+len(a.hostPorts)+len(a.suffixes) == 0 {
		return nil, errors.New("allowed hosts: the list is empty")
	}
	return a, nil
}

// allows reports whether hostport ("host:port", or a bare host with defaultPort)
// may be reached.
func (a *hostAllowlist) allows(hostport, defaultPort string) bool {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, defaultPort
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
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

// egressProxy is the only way out of the browser when hosts are restricted: Chromium
// sends every request (every frame, worker, redirect and WebSocket, loopback included)
// through it, and it forwards only those to allowed hosts. A proxy rather than
// DevTools request interception, because interception misses out-of-process frames,
// service workers and WebSockets.
type egressProxy struct {
	ln      net.Listener
	srv     *http.Server
	refused atomic.Int64
}

func startEgressProxy(allow *hostAllowlist, log *slog.Logger) (*egressProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("web sensor: egress proxy: %w", err)
	}
	p := &egressProxy{ln: ln}
	gp := goproxy.NewProxyHttpServer()
	// goproxy's default transport skips TLS verification; this one verifies, and never
	// goes through another proxy the environment names.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	gp.Tr = tr
	refuse := func(what, host string) {
		p.refused.Add(1)
		if log != nil {
			log.Info("web sensor: refused a request to a host not allowed", "kind", what, "host", host)
		}
	}
	gp.OnRequest().DoFunc(func(r *http.Request, _ *goproxy.ProxyCtx) (*http.Request, *http.Response) {
		if allow.allows(r.URL.Host, defaultPort(r.URL.Scheme)) {
			return r, nil
		}
		refuse("http", r.URL.Host)
		resp := goproxy.NewResponse(r, "text/plain; charset=utf-8", http.StatusForbidden,
			fmt.Sprintf("tribunal: %s is not among the renderer's allowed hosts\n", r.URL.Host))
		resp.Header.Set(RefusedHeader, r.URL.Host)
		return r, resp
	})
	gp.OnRequest().HandleConnectFunc(func(host string, _ *goproxy.ProxyCtx) (*goproxy.ConnectAction, string) {
		if allow.allows(host, "443") {
			return goproxy.OkConnect, host
		}
		refuse("connect", host)
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
