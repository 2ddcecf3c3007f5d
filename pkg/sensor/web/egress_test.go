package web

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/netguard"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

func TestAllowHosts(t *testing.T) {
	a, err := parseAllowHosts([]string{"App.Example.com.", "localhost:3000", "*.preview.example.com", "10.0.0.7",
		"[0:0:0:0:0:0:0:1]:8080", "bücher.example", "169.254.169.254"})
	if err != nil {
		t.Fatal(err)
	}
	for hostport, want := range map[string]bool{
		"app.example.com":              true,
		"APP.example.com:8443":         true, // a bare host allows every port
		"app.example.com.":             true,
		"evil.app.example.com":         false,
		"localhost:3000":               true,
		"localhost:3001":               false,
		"localhost":                    false, // port 80
		"pr-1.preview.example.com":     true,
		"a.b.preview.example.com":      true,
		"preview.example.com":          false, // the wildcard covers subdomains only
		"xpreview.example.com":         false,
		"10.0.0.7:80":                  true,
		"[::1]:8080":                   true, // Chromium's form of the entry
		"[::1]:80":                     false,
		"xn--bcher-kva.example":        true, // Chromium sends punycode
		"169.254.169.254":              true,
		"169.254.169.253":              false,
		"app.example.com@evil.example": false,
	} {
		if got := a.allows(hostport, "80"); got != want {
			t.Errorf("allows(%q) = %v; want %v", hostport, got, want)
		}
	}
	if a, err := parseAllowHosts([]string{"*"}); err != nil || !a.allows("anything.example:8443", "443") || a.empty() {
		t.Errorf(`"*" = %+v, %v; want every host`, a, err)
	}
	if !(&hostAllowlist{}).empty() || (&hostAllowlist{}).allows("127.0.0.1:80", "80") {
		t.Error("the empty list allows a host")
	}
	for _, bad := range [][]string{{"**"}, {"*:80"}, {"0.0.0.0"}, {"[::]:80"}, {"*.com"}, {"*.0.1"}, {"*.com:80"}, {"a/b"}, {"http://a"}, {""}, {":80"},
		{"127.1"}, {"localhost:abc"}, {"localhost:0"}, {"localhost:70000"}} {
		if _, err := parseAllowHosts(bad); err == nil {
			t.Errorf("parseAllowHosts(%q) accepted", bad)
		}
	}
}

// TestEgressProxy checks the proxy on its own, with a Go client in Chromium's place.
func TestEgressProxy(t *testing.T) {
	app := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "app") }))
	t.Cleanup(app.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other") }))
	t.Cleanup(other.Close)
	appHost := strings.TrimPrefix(app.URL, "https://")
	allow, err := parseAllowHosts([]string{appHost})
	if err != nil {
		t.Fatal(err)
	}
	// Tunnels must go direct even where the environment names a proxy.
	t.Setenv("HTTPS_PROXY", "http://127.0.0.1:1")
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:1")
	p, err := startEgressProxy(newEgressPolicy(allow, false), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	pu, _ := url.Parse(p.URL())
	tr := app.Client().Transport.(*http.Transport).Clone()
	tr.Proxy = http.ProxyURL(pu)
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}

	resp, err := client.Get(app.URL + "/")
	if err != nil {
		t.Fatalf("allowed host through the tunnel: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "app" {
		t.Fatalf("allowed host answered %q", body)
	}
	resp, err = client.Get(other.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get(RefusedHeader) == "" {
		t.Fatalf("plain http to another host: %s %v", resp.Status, resp.Header)
	}
	if _, err := client.Get("https://" + strings.TrimPrefix(other.URL, "http://") + "/"); err == nil || !strings.Contains(err.Error(), "Forbidden") {
		t.Fatalf("tunnel to another host: err = %v; want the proxy's 403", err)
	}
	// A CONNECT without a port would be dialled on another port than the one checked.
	conn, err := net.Dial("tcp", pu.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	host, _, _ := net.SplitHostPort(appHost)
	fmt.Fprintf(conn, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", host, host)
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	line, _ := bufio.NewReader(conn).ReadString('\n')
	if !strings.Contains(line, "403") {
		t.Fatalf("CONNECT without a port: %q; want 403", line)
	}

	// The host is the app's address, named in the list: dialled. Link-local addresses
	// (cloud metadata) are refused after resolution unless listed and named.
	policy := newEgressPolicy(allow, false)
	if err := dial(policy, appHost, appHost); err != nil {
		t.Errorf("dialling the listed address: %v", err)
	}
	for _, addr := range []string{"169.254.169.254:80", "[fe80::1]:80"} {
		if err := dial(policy, "metadata.example:80", addr); err == nil {
			t.Errorf("dialling %s was allowed", addr)
		}
	}
	listed, _ := parseAllowHosts([]string{"169.254.169.254"})
	if err := dial(newEgressPolicy(listed, false), "169.254.169.254:80", "169.254.169.254:80"); err != nil {
		t.Errorf("a listed link-local address was refused: %v", err)
	}
}

// dial is p's check of a request for host dialled at addr, after resolution.
func dial(p *egressPolicy, host, addr string) error {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	return p.checkDial(h, netip.MustParseAddrPort(addr).Addr())
}

// TestEgressDialFollowsArtifactRule: an allowed name's addresses are held to the rule of
// artifact URLs (netguard.ForURLs): every special-purpose range refused after
// resolution, the private ones reached only with AllowPrivate, an address the list names
// only by a request that names it too. Each refusal names the setting that would allow
// it.
func TestEgressDialFollowsArtifactRule(t *testing.T) {
	allow, err := parseAllowHosts([]string{"app.example.com", "*", "127.0.0.1:3000", "100.100.100.200", "[64:ff9b::7f00:1]"})
	if err != nil {
		t.Fatal(err)
	}
	strict, private := newEgressPolicy(allow, false), newEgressPolicy(allow, true)
	for _, addr := range []string{
		"198.18.0.1:80", "240.0.0.1:80", "255.255.255.255:80", "0.1.2.3:80", "0.0.0.0:80",
		"[64:ff9b::7f00:1]:80", "[2002:7f00:1::1]:80", "[::127.0.0.1]:80", "[2001:db8::1]:443", "[ff02::1]:80", "[::]:80",
	} {
		for _, p := range []*egressPolicy{strict, private} {
			if err := dial(p, "app.example.com", addr); !errors.Is(err, netguard.ErrForbidden) {
				t.Errorf("dialling %s (private allowed: %v): %v; want refused", addr, p.allowPrivate, err)
			}
		}
	}
	for _, addr := range []string{"10.1.2.3:8080", "192.168.1.10:443", "[fd00::1]:80", "[::1]:3000", "[::ffff:127.0.0.1]:80",
		"127.0.0.1:3000", "169.254.169.254:80", "[fe80::1]:80", "100.64.0.1:443", "100.100.100.200:80"} {
		err := dial(strict, "app.example.com", addr)
		if !errors.Is(err, netguard.ErrForbidden) || !strings.Contains(err.Error(), AllowPrivateFlag) {
			t.Errorf("dialling %s: %v; want refused, naming %s", addr, err, AllowPrivateFlag)
		}
		if err := dial(private, "app.example.com", addr); err != nil {
			t.Errorf("dialling %s with private addresses allowed: %v", addr, err)
		}
	}
	if err := dial(strict, "app.example.com", "93.184.215.14:443"); err != nil {
		t.Errorf("dialling a public address: %v", err)
	}
	for host, addr := range map[string]string{"100.100.100.200": "100.100.100.200:80", "[64:ff9b::7f00:1]": "[64:ff9b::7f00:1]:80",
		"127.0.0.1:3000": "127.0.0.1:3000", "[::ffff:127.0.0.1]:3000": "[::ffff:127.0.0.1]:3000"} {
		if err := dial(strict, host, addr); err != nil {
			t.Errorf("a listed address %s, named by the request, was refused: %v", addr, err)
		}
	}
	// A listed address reached through a name (a rebound wildcard subdomain) is not.
	for _, addr := range []string{"127.0.0.1:3000", "127.0.0.1:8080", "100.100.100.200:80"} {
		if err := dial(strict, "evil.preview.example.com", addr); !errors.Is(err, netguard.ErrForbidden) {
			t.Errorf("a name resolving to the listed address %s: %v; want refused", addr, err)
		}
	}
	if err := dial(strict, "127.0.0.2", "127.0.0.2:3000"); err == nil {
		t.Error("a neighbour of a listed address was dialled")
	}
}

// TestSenseAllowHosts: with allowed hosts, the page renders, but nothing it embeds,
// loads or is redirected to on another host is reached; the same page in a browser
// without the list does reach it, so the test would see a leak.
func TestSenseAllowHosts(t *testing.T) {
	var hits atomic.Int64
	secret := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "internal secret")
	}))
	t.Cleanup(secret.Close)
	var datagrams atomic.Int64
	stun := stunServer(t, &datagrams)
	// The page reaches for the other host every way it can before its load event, which
	// the slow image holds back while WebRTC gathers its candidates.
	page := fmt.Sprintf(`<!doctype html><html><body><h1 id="title">Allowed</h1><p id="stun">none</p>
<img src="%[1]s/pixel.png" width="1" height="1" alt="">
<iframe src="%[1]s/frame"></iframe>
<script>
const x = new XMLHttpRequest();
x.open("GET", "%[1]s/xhr", false);
try { x.send(); document.getElementById("title").textContent = x.responseText; } catch (e) {}
const pc = new RTCPeerConnection({iceServers: [{urls: "stun:%[2]s"}]});
pc.createDataChannel("x");
pc.onicecandidate = (e) => {
  if (e.candidate && e.candidate.type === "srflx") document.getElementById("stun").textContent = "mapped " + e.candidate.address;
};
pc.createOffer().then((o) => pc.setLocalDescription(o));
</script><img src="/slow" width="1" height="1" alt=""></body></html>`, secret.URL, stun)
	_, secretPort, _ := net.SplitHostPort(strings.TrimPrefix(secret.URL, "http://"))
	mux := http.NewServeMux()
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) { time.Sleep(time.Second) })
	mux.HandleFunc("/navigates", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<h1>here</h1><script>onload = () => { location = %q }</script>`, secret.URL+"/")
	})
	mux.HandleFunc("/redirect-https", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "https://127.0.0.1:"+secretPort+"/", http.StatusFound)
	})
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, secret.URL+"/", http.StatusFound)
	})
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)

	s := newSensor(t, Options{AllowHosts: []string{strings.TrimPrefix(app.URL, "http://")}})
	ctx := context.Background()
	c, err := s.Sense(ctx, sensor.View{Route: app.URL + "/page", Viewport: sensor.Viewport{Width: 320, Height: 240}})
	if err != nil {
		t.Fatalf("allowed page: %v", err)
	}
	if strings.Contains(string(c.Probe), "internal secret") || strings.Contains(string(c.Probe), "mapped") {
		t.Errorf("the page read the other hosts' answers: %s", c.Probe)
	}
	for name, route := range map[string]string{"direct": secret.URL + "/", "redirect": app.URL + "/redirect",
		"https redirect": app.URL + "/redirect-https", "navigation after load": app.URL + "/navigates"} {
		_, err := s.Sense(ctx, sensor.View{Route: route})
		if !errors.Is(err, sensor.ErrRefused) {
			t.Errorf("%s: err = %v; want sensor.ErrRefused", name, err)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if n := hits.Load(); n != 0 {
		t.Fatalf("the host outside the list got %d requests", n)
	}
	if n := datagrams.Load(); n != 0 {
		t.Fatalf("the STUN host outside the list got %d datagrams", n)
	}

	// Control: without the list the same page reaches the other host.
	if _, err := sharedSensor(t).Sense(ctx, sensor.View{Route: app.URL + "/page", Viewport: sensor.Viewport{Width: 320, Height: 240}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for hits.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := hits.Load(); n < 2 {
		t.Fatalf("control: the other host got %d requests without the list; the test cannot see a leak", n)
	}
	if n := datagrams.Load(); n == 0 {
		t.Fatal("control: the STUN host got no datagram without the list; the test cannot see a WebRTC leak")
	}
}

// stunServer answers STUN binding requests on a loopback UDP port with a made-up mapped
// address, counting the datagrams it gets; it returns its host:port.
func stunServer(t *testing.T, got *atomic.Int64) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			n, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			got.Add(1)
			if n < 20 || binary.BigEndian.Uint16(buf[0:2]) != 0x0001 { // binding request
				continue
			}
			const cookie = 0x2112A442
			resp := make([]byte, 32)
			binary.BigEndian.PutUint16(resp[0:2], 0x0101) // binding success
			binary.BigEndian.PutUint16(resp[2:4], 12)
			copy(resp[4:20], buf[4:20])                     // cookie and transaction id
			binary.BigEndian.PutUint16(resp[20:22], 0x0020) // XOR-MAPPED-ADDRESS
			binary.BigEndian.PutUint16(resp[22:24], 8)
			resp[25] = 0x01 // IPv4
			binary.BigEndian.PutUint16(resp[26:28], 4242^(cookie>>16))
			binary.BigEndian.PutUint32(resp[28:32], 0x0A0D252A^cookie) // 10.13.37.42
			_, _ = pc.WriteTo(resp, from)
		}
	}()
	return pc.LocalAddr().String()
}
