package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// trap is a loopback TCP listener that counts the connections it accepts. It answers
// each with an empty 200, so that a browser that does reach it (the control) finishes
// its requests.
type trap struct {
	ln       net.Listener
	accepted atomic.Int64
}

func newTrap(t *testing.T) *trap {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &trap{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tr.accepted.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				r := bufio.NewReader(c)
				if b, err := r.Peek(1); err != nil || b[0] == 0x16 { // a TLS handshake: nothing to answer
					return
				}
				for {
					line, err := r.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
			}()
		}
	}()
	return tr
}

func (tr *trap) port() string {
	_, p, _ := net.SplitHostPort(tr.ln.Addr().String())
	return p
}

func (tr *trap) wantNone(t *testing.T) {
	t.Helper()
	if n := tr.accepted.Load(); n != 0 {
		t.Fatalf("the loopback listener accepted %d connections; want 0", n)
	}
}

// wantRefused checks that err is the policy's refusal and names everything an operator
// needs: the route and each of want (hosts, addresses, settings).
func wantRefused(t *testing.T, name string, err error, want ...string) {
	t.Helper()
	if !errors.Is(err, sensor.ErrRefused) {
		t.Errorf("%s: err = %v; want sensor.ErrRefused", name, err)
		return
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not name %q", name, err, w)
		}
	}
	t.Logf("%s: %v", name, err)
}

// TestSharedRendererRefusesEveryRoute: the renderer as `tribunal serve` ships it (teams
// share it, no host allowed) refuses a route to the cloud metadata address, to another
// service's /metrics on loopback and to loopback under every other name, each with the
// host and the setting that would allow it; the loopback listener is never connected to.
func TestSharedRendererRefusesEveryRoute(t *testing.T) {
	tr := newTrap(t)
	s := newSensor(t, Options{Shared: true})
	for _, route := range []string{
		"http://169.254.169.254/latest/meta-data/",
		"http://127.0.0.1:" + tr.port() + "/metrics",
		"http://localhost:" + tr.port() + "/",
		"http://[::ffff:127.0.0.1]:" + tr.port() + "/",
		"http://0.0.0.0:" + tr.port() + "/",
		"https://127.0.0.1:" + tr.port() + "/",
	} {
		u, _ := url.Parse(route)
		host := u.Host
		_, err := s.Sense(context.Background(), sensor.View{Route: route})
		wantRefused(t, route, err, route, "host "+host, "allows none", AllowHostsFlag+"="+host, AllowHostsEnv)
	}
	tr.wantNone(t)
}

// subresourceApp serves a page that reaches for the trap every way a page can: image,
// script, style sheet, frame, fetch, synchronous XHR, WebSocket and https, by address
// and by name, plus redirects to it. The page's load waits until its fetches and
// WebSockets have settled (/hold waits for /settled), so a render has tried them all,
// and /settled records that each was tried. How each ended says nothing (the proxy's
// refusal is an answer too; the listener's lacks CORS headers): the listener's count is
// what tells a leak.
type subresourceApp struct {
	srv *httptest.Server
	mu  sync.Mutex
	// settled are the pages' reports, by run: "fetch=answered,failed&ws=..."
	settled map[string]url.Values
	done    map[string]chan struct{}
}

func newSubresourceApp(t *testing.T, trapHosts ...string) *subresourceApp {
	t.Helper()
	a := &subresourceApp{settled: map[string]url.Values{}, done: map[string]chan struct{}{}}
	var bases []string
	var tags strings.Builder
	for _, h := range trapHosts {
		for _, scheme := range []string{"http", "https"} {
			b := scheme + "://" + h
			bases = append(bases, b)
			fmt.Fprintf(&tags, `<img src="%[1]s/img.png" width="1" height="1" alt=""><script src="%[1]s/s.js"></script>`+
				`<link rel="stylesheet" href="%[1]s/c.css"><iframe src="%[1]s/frame"></iframe>`+"\n", b)
		}
	}
	basesJSON, _ := json.Marshal(bases)
	page := `<!doctype html><html><head>` + tags.String() + `</head><body><h1 id="title">Allowed</h1>
<script>
const run = location.pathname.split("/").pop();
const bases = ` + string(basesJSON) + `;
const got = {fetch: [], ws: [], xhr: []};
const waits = [];
for (const b of bases) {
  waits.push(fetch(b + "/fetch", {mode: "no-cors"}).then(() => "answered", () => "failed").then((h) => got.fetch.push(h)));
  waits.push(new Promise((res) => {
    const ws = new WebSocket(b.replace(/^http/, "ws") + "/ws");
    ws.onopen = () => res("open");
    ws.onerror = () => res("failed");
  }).then((h) => got.ws.push(h)));
  try { const x = new XMLHttpRequest(); x.open("GET", b + "/xhr", false); x.send(); got.xhr.push("answered"); } catch (e) { got.xhr.push("failed"); }
}
Promise.all(waits).then(() => {
  const img = new Image();
  img.src = "/settled/" + run + "?" + new URLSearchParams(Object.entries(got).map(([k, v]) => [k, v.join(",")]));
  document.body.appendChild(img);
});
</script>
<img src="/hold/` + "RUN" + `" width="1" height="1" alt=""></body></html>`
	mux := http.NewServeMux()
	mux.HandleFunc("/page/{run}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		a.done[r.PathValue("run")] = make(chan struct{})
		a.mu.Unlock()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, strings.Replace(page, "RUN", r.PathValue("run"), 1))
	})
	mux.HandleFunc("/hold/{run}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		done := a.done[r.PathValue("run")]
		a.mu.Unlock()
		select {
		case <-done:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("/plain", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><h1 id="title">Plain</h1>`)
	})
	mux.HandleFunc("/settled/{run}", func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		if _, ok := a.settled[r.PathValue("run")]; !ok {
			a.settled[r.PathValue("run")] = r.URL.Query()
			close(a.done[r.PathValue("run")])
		}
	})
	for name, to := range map[string]string{"by-address": "http://" + trapHosts[0] + "/", "by-name": "http://" + trapHosts[len(trapHosts)-1] + "/",
		"https": "https://" + trapHosts[0] + "/", "metadata": "http://169.254.169.254/latest/meta-data/"} {
		mux.HandleFunc("/redirect/"+name, func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, to, http.StatusFound) })
	}
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *subresourceApp) report(run string) url.Values {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.settled[run]
}

// TestSharedRendererRefusesRedirectsAndSubresources: a shared renderer that allows one
// app renders its page, but nothing the page loads from the loopback listener (by
// address or by a name resolving there) and no redirect to it is ever connected; every
// fetch and WebSocket the page tried failed. The same page on an unrestricted browser
// does reach the listener, so the test would see a leak.
func TestSharedRendererRefusesRedirectsAndSubresources(t *testing.T) {
	tr := newTrap(t)
	trapHosts := []string{"127.0.0.1:" + tr.port(), "[::ffff:127.0.0.1]:" + tr.port(), "localhost:" + tr.port()}
	a := newSubresourceApp(t, trapHosts...)
	s := newSensor(t, Options{Shared: true, AllowHosts: []string{strings.TrimPrefix(a.srv.URL, "http://")}})
	ctx := context.Background()
	vp := sensor.Viewport{Width: 320, Height: 240}

	if _, err := s.Sense(ctx, sensor.View{Route: a.srv.URL + "/page/shared", Viewport: vp}); err != nil {
		t.Fatalf("the allowed page: %v", err)
	}
	a.wantTried(t, "shared", 2*len(trapHosts))
	for _, r := range []struct{ name, want string }{
		{"by-address", trapHosts[0]}, {"by-name", trapHosts[2]}, {"https", trapHosts[0]}, {"metadata", "169.254.169.254"},
	} {
		route := a.srv.URL + "/redirect/" + r.name
		_, err := s.Sense(ctx, sensor.View{Route: route, Viewport: vp})
		wantRefused(t, "redirect "+r.name, err, route, "host "+r.want, AllowHostsFlag+"="+r.want, AllowHostsEnv)
	}
	tr.wantNone(t)

	// Control: without the policy the same page reaches the listener.
	if _, err := sharedSensor(t).Sense(ctx, sensor.View{Route: a.srv.URL + "/page/control", Viewport: vp}); err != nil {
		t.Fatal(err)
	}
	if n := tr.accepted.Load(); n == 0 {
		t.Fatal("control: the listener got no connection without the policy; the test cannot see a leak")
	}
	a.wantTried(t, "control", 2*len(trapHosts))
}

// wantTried checks that the page of run tried n fetches, WebSockets and XHRs.
func (a *subresourceApp) wantTried(t *testing.T, run string, n int) {
	t.Helper()
	rep := a.report(run)
	for _, kind := range []string{"fetch", "ws", "xhr"} {
		if got := strings.Split(rep.Get(kind), ","); rep.Get(kind) == "" || len(got) != n {
			t.Errorf("%s page: %s %q; want %d tried", run, kind, rep.Get(kind), n)
		}
	}
}

// dnsServer answers A and AAAA queries from a table of its own, counting them, for
// names the test controls: a team's wildcard subdomain it can point anywhere, and change
// between two lookups.
type dnsServer struct {
	pc net.PacketConn
	// answers are the addresses of each name, "evil.rebind.test." -> lookups: the n-th
	// query of a type gets the n-th entry (the last once they run out), so a name can
	// be rebound.
	answers map[string][][]netip.Addr
	queries atomic.Int64
	mu      sync.Mutex
	asked   map[string]int // name and type -> queries so far
}

func newDNSServer(t *testing.T, answers map[string][][]netip.Addr) *dnsServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &dnsServer{pc: pc, answers: answers, asked: map[string]int{}}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			if msg, err := d.answer(buf[:n]); err == nil {
				_, _ = pc.WriteTo(msg, from)
			}
		}
	}()
	return d
}

func (d *dnsServer) answer(query []byte) ([]byte, error) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil {
		return nil, err
	}
	q, err := p.Question()
	if err != nil {
		return nil, err
	}
	d.queries.Add(1)
	name := strings.ToLower(q.Name.String())
	lookups, known := d.answers[name]
	var addrs []netip.Addr
	if known {
		d.mu.Lock()
		n := d.asked[name+q.Type.String()]
		d.asked[name+q.Type.String()]++
		d.mu.Unlock()
		addrs = lookups[min(n, len(lookups)-1)]
	}
	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired}
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	if err := b.StartQuestions(); err != nil {
		return nil, err
	}
	if err := b.Question(q); err != nil {
		return nil, err
	}
	if err := b.StartAnswers(); err != nil {
		return nil, err
	}
	for _, a := range addrs {
		res := dnsmessage.ResourceHeader{Name: q.Name, Class: dnsmessage.ClassINET}
		switch {
		case q.Type == dnsmessage.TypeA && a.Is4():
			err = b.AResource(res, dnsmessage.AResource{A: a.As4()})
		case q.Type == dnsmessage.TypeAAAA && a.Is6():
			err = b.AAAAResource(res, dnsmessage.AAAAResource{AAAA: a.As16()})
		}
		if err != nil {
			return nil, err
		}
	}
	return b.Finish()
}

// resolver sends every query to d.
func (d *dnsServer) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "udp", d.pc.LocalAddr().String())
	}}
}

// TestSharedRendererChecksAddressAtConnect: the name is allowed, the address it resolves
// to when the proxy connects is not. A team that controls an allowed name's DNS (a
// wildcard's subdomain) points it at loopback, or at 0.0.0.0 (which Linux connects to
// loopback): the route and the page's requests are refused at connect time, naming the
// address, and the loopback listener is never connected to. Nothing resolves a name
// before the proxy dials it, so there is no earlier answer for a rebinding to get past.
// The allowed app's address being listed does not let a name resolving there through.
func TestSharedRendererChecksAddressAtConnect(t *testing.T) {
	tr := newTrap(t)
	loop := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}
	zero := []netip.Addr{netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("::")}
	dns := newDNSServer(t, map[string][][]netip.Addr{
		"evil.rebind.test.": {loop},
		"app.rebind.test.":  {loop},
		"zero.rebind.test.": {zero},
		// Loopback at first (the app, allowed with private addresses), then 0.0.0.0.
		"flip.rebind.test.": {loop, zero},
	})
	trapPort := tr.port()
	a := newSubresourceApp(t, "evil.rebind.test:"+trapPort, "zero.rebind.test:"+trapPort)
	appHost := strings.TrimPrefix(a.srv.URL, "http://")
	_, appPort, _ := net.SplitHostPort(appHost)
	ctx := context.Background()
	vp := sensor.Viewport{Width: 320, Height: 240}

	strict := newSensor(t, Options{Shared: true, AllowHosts: []string{appHost, "*.rebind.test", "localhost"}, resolver: dns.resolver()})
	for route, want := range map[string][]string{
		"http://evil.rebind.test:" + trapPort + "/":  {"127.0.0.1", AllowPrivateFlag, AllowPrivateEnv},
		"https://evil.rebind.test:" + trapPort + "/": {"127.0.0.1", AllowPrivateFlag},
		"http://zero.rebind.test:" + trapPort + "/":  {"0.0.0.0", "no setting allows"},
		"http://localhost:" + trapPort + "/":         {"127.0.0.1", AllowPrivateFlag}, // the system's resolver
	} {
		mustAllow(t, strict, route)
		_, err := strict.Sense(ctx, sensor.View{Route: route, Viewport: vp})
		wantRefused(t, route, err, append([]string{route}, want...)...)
	}
	// The allowed page's requests to the rebound names fail the same way.
	if _, err := strict.Sense(ctx, sensor.View{Route: a.srv.URL + "/page/strict", Viewport: vp}); err != nil {
		t.Fatalf("the allowed page: %v", err)
	}
	a.wantTried(t, "strict", 4)
	tr.wantNone(t)
	if dns.queries.Load() == 0 {
		t.Fatal("the test's DNS server was never asked: the names were not resolved by it")
	}

	// With private addresses allowed, loopback behind an allowed name is reached (the
	// DNS answers do reach the proxy), and 0.0.0.0 is refused still.
	private := newSensor(t, Options{Shared: true, AllowHosts: []string{"*.rebind.test"}, AllowPrivate: true, resolver: dns.resolver()})
	if _, err := private.Sense(ctx, sensor.View{Route: "http://app.rebind.test:" + appPort + "/page/private", Viewport: vp}); err != nil {
		t.Fatalf("an allowed name on loopback with private addresses allowed: %v", err)
	}
	before := tr.accepted.Load()
	_, err := private.Sense(ctx, sensor.View{Route: "http://zero.rebind.test:" + trapPort + "/", Viewport: vp})
	wantRefused(t, "0.0.0.0 with private addresses allowed", err, "0.0.0.0", "no setting allows")
	// A name whose first answer was allowed is checked again on its next connection:
	// rebound to 0.0.0.0, it is refused.
	if _, err := private.Sense(ctx, sensor.View{Route: "http://flip.rebind.test:" + appPort + "/plain", Viewport: vp}); err != nil {
		t.Fatalf("the rebinding name's first answer (loopback, allowed): %v", err)
	}
	_, err = private.Sense(ctx, sensor.View{Route: "http://flip.rebind.test:" + trapPort + "/", Viewport: vp})
	wantRefused(t, "the rebound name", err, "0.0.0.0")
	if n := tr.accepted.Load() - before; n != 0 {
		t.Fatalf("0.0.0.0 reached the loopback listener %d times", n)
	}
}

// mustAllow fails the test unless s's list allows route's host, so that a refusal of
// route comes from the address the host resolves to.
func mustAllow(t *testing.T, s *Sensor, route string) {
	t.Helper()
	u, _ := url.Parse(route)
	if !s.policy.allow.allows(u.Host, defaultPort(u.Scheme)) {
		t.Fatalf("%s is not allowed by the list; the test would not reach the address check", route)
	}
}
