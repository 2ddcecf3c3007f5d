package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

func TestAllowHosts(t *testing.T) {
	a, err := parseAllowHosts([]string{"App.Example.com", "localhost:3000", "*.preview.example.com", "10.0.0.7", "[::1]:8080"})
	if err != nil {
		t.Fatal(err)
	}
	for hostport, want := range map[string]bool{
		"app.example.com":          true,
		"APP.example.com:8443":     true, // a bare host allows every port
		"app.example.com.":         true,
		"evil.app.example.com":     false,
		"localhost:3000":           true,
		"localhost:3001":           false,
		"localhost":                false, // port 80
		"pr-1.preview.example.com": true,
		"a.b.preview.example.com":  true,
		"preview.example.com":      false, // the wildcard covers subdomains only
		"xpreview.example.com":     false,
		"10.0.0.7:80":              true,
		"169.254.169.254":          false,
		"[::1]:8080":               true,
		"[::1]:80":                 false,
	} {
		if got := a.allows(hostport, "80"); got != want {
			t.Errorf("allows(%q) = %v; want %v", hostport, got, want)
		}
	}
	for _, bad := range [][]string{{"*"}, {"*.com:80"}, {"a/b"}, {"http://a"}, {""}, {":80"}} {
		if _, err := parseAllowHosts(bad); err == nil {
			t.Errorf("parseAllowHosts(%q) accepted", bad)
		}
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
	page := fmt.Sprintf(`<!doctype html><html><body><h1 id="title">Allowed</h1>
<img src="%[1]s/pixel.png" width="1" height="1" alt="">
<iframe src="%[1]s/frame"></iframe>
<script>
const x = new XMLHttpRequest();
x.open("GET", "%[1]s/xhr", false);
try { x.send(); document.getElementById("title").textContent = x.responseText; } catch (e) {}
</script></body></html>`, secret.URL)
	mux := http.NewServeMux()
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
	if strings.Contains(string(c.Probe), "internal secret") {
		t.Errorf("the page read the other host's answer: %s", c.Probe)
	}
	for name, route := range map[string]string{"direct": secret.URL + "/", "redirect": app.URL + "/redirect"} {
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
}
