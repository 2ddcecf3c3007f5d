package artifact

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const page = "<!DOCTYPE html><html><head><title>t</title></head><body><p>hello</p></body></html>"

// fetchServer is a loopback server with a few routes used by the fetch tests. hits counts
// requests that reached a handler.
func fetchServer(t *testing.T, png []byte) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var hits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("/page", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/xhtml", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/xhtml+xml")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/untyped-html", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // suppress net/http's own sniffing
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/untyped-text", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil
		fmt.Fprint(w, "just some words")
	})
	mux.HandleFunc("/png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write(png)
	})
	mux.HandleFunc("/json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"a":1}`)
	})
	mux.HandleFunc("/missing", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such page", http.StatusNotFound)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/html")
		body := "<html><body>" + strings.Repeat("x", n) + "</body></html>"
		fmt.Fprint(w, body)
	})
	mux.HandleFunc("/exact", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Type", "text/html")
		prefix := "<html>"
		fmt.Fprint(w, prefix+strings.Repeat("y", n-len(prefix)))
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		// /redirect?n=K answers with K redirects in a row before the page.
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		if n <= 0 {
			w.Header().Set("Content-Type", "text/html")
			fmt.Fprint(w, page)
			return
		}
		http.Redirect(w, r, "/redirect?n="+strconv.Itoa(n-1), http.StatusFound)
	})
	mux.HandleFunc("/to-scheme", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Location", r.URL.Query().Get("target"))
		w.WriteHeader(http.StatusFound)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
		}
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/diff-as-html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, unifiedDiff)
	})
	mux.HandleFunc("/git-diff-as-html", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, gitDiff)
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func TestFetchRefusesLoopbackByDefault(t *testing.T) {
	t.Parallel()
	srv, hits := fetchServer(t, pngBytes(t))
	u, _ := url.Parse(srv.URL)
	host := u.Hostname() // 127.0.0.1
	_, port, _ := strings.Cut(u.Host, ":")

	tests := []struct {
		name, url, wantAddr string
	}{
		{"IPv4 loopback", srv.URL + "/page", host},
		{"localhost name", "http://localhost:" + port + "/page", ""},
		{"IPv6 loopback", "http://[::1]:" + port + "/page", "::1"},
		{"unspecified address", "http://0.0.0.0:" + port + "/page", "0.0.0.0"},
		// The dialer refuses these before any packet leaves: no network is touched.
		{"private 10/8", "http://10.1.2.3:" + port + "/page", "10.1.2.3"},
		{"private 192.168/16", "http://192.168.0.10/page", "192.168.0.10"},
		{"link-local metadata address", "http://169.254.169.254/latest/meta-data/", "169.254.169.254"},
		{"IPv6 unique local", "http://[fd00::1]/page", "fd00::1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := NewFetcher(FetchOptions{Timeout: 2 * time.Second})
			got, err := f.Fetch(context.Background(), tt.url)
			if err != nil {
				t.Fatalf("Fetch returned error %v; want a blocked result", err)
			}
			if got.Blocked == "" {
				t.Fatalf("Fetch(%s) = %+v; want blocked", tt.url, got.Result)
			}
			if !strings.Contains(got.Blocked, ErrForbiddenAddress.Error()) {
				t.Errorf("Blocked = %q; want it to say %q", got.Blocked, ErrForbiddenAddress.Error())
			}
			if tt.wantAddr != "" && !strings.Contains(got.Blocked, tt.wantAddr) {
				t.Errorf("Blocked = %q; want it to name the refused address %s", got.Blocked, tt.wantAddr)
			}
			if got.Data != nil {
				t.Errorf("blocked fetch returned %d bytes of data", len(got.Data))
			}
		})
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the loopback server was reached %d times; the dialer must refuse before connecting", n)
	}
}

// TestFetchRefusesSpecialPurposeRanges: the addresses an SSRF probe tried, in ranges
// outside loopback/private/link-local (carrier NAT and a cloud metadata address in it,
// NAT64 and 6to4 of loopback, IPv4-compatible loopback, benchmarking, reserved,
// broadcast, "this network"), are refused by the dialer before it connects, with or
// without AllowPrivate (which is for internal addresses, not these).
func TestFetchRefusesSpecialPurposeRanges(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, url, addr string
		internal        bool // allowed with AllowPrivate (not dialled here)
	}{
		{"this network 0/8", "http://0.1.2.3/page", "0.1.2.3", false},
		{"reserved 240/4", "http://240.0.0.1/page", "240.0.0.1", false},
		{"limited broadcast", "http://255.255.255.255/page", "255.255.255.255", false},
		{"benchmarking 198.18/15", "http://198.18.0.1/page", "198.18.0.1", false},
		{"NAT64 of loopback", "http://[64:ff9b::7f00:1]/page", "64:ff9b::7f00:1", false},
		{"6to4 of loopback", "http://[2002:7f00:1::1]/page", "2002:7f00:1::1", false},
		{"IPv4-compatible loopback", "http://[::127.0.0.1]/page", "::7f00:1", false},
		{"shared address space 100.64/10", "http://100.64.0.1/page", "100.64.0.1", true},
		{"cloud metadata in 100.64/10", "http://100.100.100.200/latest/meta-data/", "100.100.100.200", true},
	}
	for _, tt := range tests {
		for _, allowPrivate := range []bool{false, true} {
			if allowPrivate && tt.internal {
				continue
			}
			t.Run(fmt.Sprintf("%s/allow-private=%v", tt.name, allowPrivate), func(t *testing.T) {
				f := NewFetcher(FetchOptions{Timeout: 2 * time.Second, AllowPrivate: allowPrivate})
				got, err := f.Fetch(context.Background(), tt.url)
				if err != nil {
					t.Fatalf("Fetch returned error %v; want a blocked result", err)
				}
				if !strings.Contains(got.Blocked, ErrForbiddenAddress.Error()) || !strings.Contains(got.Blocked, tt.addr) {
					t.Fatalf("Blocked = %q; want %q naming %s", got.Blocked, ErrForbiddenAddress.Error(), tt.addr)
				}
			})
		}
	}
}

func TestFetch(t *testing.T) {
	pngData := pngBytes(t)
	srv, _ := fetchServer(t, pngData)

	tests := []struct {
		name string
		opts FetchOptions
		path string
		// wantData is the body of an accepted fetch; blocked lists substrings of a
		// blocked result (empty: the fetch must be accepted).
		wantData string
		blocked  []string
	}{
		{name: "html page allowed with AllowPrivate", path: "/page", wantData: page},
		{name: "xhtml accepted", path: "/xhtml", wantData: page},
		{name: "untyped html sniffed", path: "/untyped-html", wantData: page},
		{name: "untyped text refused", path: "/untyped-text", blocked: []string{ReasonRemoteNonHT, "text/plain"}},
		{name: "png is remote non-HTML", path: "/png", blocked: []string{ReasonRemoteNonHT, "image/png"}},
		{name: "json is remote non-HTML", path: "/json", blocked: []string{ReasonRemoteNonHT, "application/json"}},
		{name: "404 names status", path: "/missing", blocked: []string{"unreadable artifact", "HTTP 404"}},
		{name: "500 names status", path: "/broken", blocked: []string{"HTTP 500"}},
		{name: "body over MaxBytes", opts: FetchOptions{MaxBytes: 1024}, path: "/big?n=2048", blocked: []string{"larger than 1024 bytes"}},
		{name: "body of exactly MaxBytes accepted", opts: FetchOptions{MaxBytes: 1024}, path: "/exact?n=1024", wantData: "<html>" + strings.Repeat("y", 1024-6)},
		{name: "body one over MaxBytes", opts: FetchOptions{MaxBytes: 1024}, path: "/exact?n=1025", blocked: []string{"larger than 1024 bytes"}},
		{name: "fewer redirects than the bound", opts: FetchOptions{MaxRedirects: 3}, path: "/redirect?n=2", wantData: page},
		{name: "more redirects than the bound", opts: FetchOptions{MaxRedirects: 3}, path: "/redirect?n=4", blocked: []string{"unreadable artifact", "redirects"}},
		{name: "many more redirects than the bound", opts: FetchOptions{MaxRedirects: 2}, path: "/redirect?n=20", blocked: []string{"more than 2 redirects"}},
		{name: "redirect to ftp refused", path: "/to-scheme?target=" + url.QueryEscape("ftp://example.com/x.html"), blocked: []string{"ftp scheme refused"}},
		{name: "redirect to file refused", path: "/to-scheme?target=" + url.QueryEscape("file:///etc/passwd"), blocked: []string{"file scheme refused"}},
		{name: "unified diff served as html", path: "/diff-as-html", blocked: []string{ReasonDiff}},
		{name: "git diff served as html", path: "/git-diff-as-html", blocked: []string{ReasonDiff}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := tt.opts
			opts.AllowPrivate = true
			if opts.Timeout == 0 {
				opts.Timeout = 5 * time.Second
			}
			got, err := NewFetcher(opts).Fetch(context.Background(), srv.URL+tt.path)
			if err != nil {
				t.Fatalf("Fetch returned error %v; only a cancelled context may", err)
			}
			if len(tt.blocked) == 0 {
				if got.Blocked != "" {
					t.Fatalf("Fetch blocked: %q; want accepted", got.Blocked)
				}
				if got.Class != ClassHTML || got.MediaType != "text/html" {
					t.Errorf("accepted fetch = %s %s; want html text/html", got.Class, got.MediaType)
				}
				if string(got.Data) != tt.wantData {
					t.Errorf("Data = %q; want %q", got.Data, tt.wantData)
				}
				return
			}
			if got.Blocked == "" {
				t.Fatalf("Fetch = %+v; want blocked with %q", got.Result, tt.blocked)
			}
			for _, s := range tt.blocked {
				if !strings.Contains(got.Blocked, s) {
					t.Errorf("Blocked = %q; want it to contain %q", got.Blocked, s)
				}
			}
			if got.Data != nil {
				t.Errorf("blocked fetch returned %d bytes of data", len(got.Data))
			}
			if got.Class != "" {
				t.Errorf("blocked fetch has class %q", got.Class)
			}
		})
	}
}

func TestFetchTimeout(t *testing.T) {
	srv, _ := fetchServer(t, nil)
	f := NewFetcher(FetchOptions{AllowPrivate: true, Timeout: 200 * time.Millisecond})
	start := time.Now()
	got, err := f.Fetch(context.Background(), srv.URL+"/slow")
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Fetch returned error %v; a timeout is the artifact's fault, so want a blocked result", err)
	}
	if !strings.HasPrefix(got.Blocked, "unreadable artifact") {
		t.Fatalf("Blocked = %q; want an unreadable-artifact block", got.Blocked)
	}
	if elapsed > 2*time.Second {
		t.Errorf("Fetch took %v with a 200ms timeout", elapsed)
	}
}

func TestFetchCancelledContextIsAnError(t *testing.T) {
	srv, _ := fetchServer(t, nil)
	f := NewFetcher(FetchOptions{AllowPrivate: true, Timeout: 5 * time.Second})

	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, err := f.Fetch(ctx, srv.URL+"/page")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v; want context.Canceled", err)
		}
		if got.Blocked != "" || got.Data != nil {
			t.Errorf("cancelled fetch returned a result %+v; want the zero value", got)
		}
	})
	t.Run("cancelled during", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(50*time.Millisecond, cancel)
		start := time.Now()
		got, err := f.Fetch(ctx, srv.URL+"/slow")
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v (result %+v); want context.Canceled", err, got.Result)
		}
		if got.Blocked != "" {
			t.Errorf("cancelled fetch was blocked %q; a shutdown says nothing about the artifact", got.Blocked)
		}
		if time.Since(start) > 2*time.Second {
			t.Errorf("cancel took %v to take effect", time.Since(start))
		}
	})
	t.Run("deadline exceeded", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := f.Fetch(ctx, srv.URL+"/slow")
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v; want context.DeadlineExceeded", err)
		}
	})
}

func TestFetchBadURL(t *testing.T) {
	t.Parallel()
	f := NewFetcher(FetchOptions{})
	for _, u := range []string{"ftp://example.com/x.html", "file:///etc/passwd", "not a url", "http://", "//example.com/x", "javascript:alert(1)"} {
		got, err := f.Fetch(context.Background(), u)
		if err != nil {
			t.Errorf("Fetch(%q) error %v; want blocked", u, err)
			continue
		}
		if !strings.Contains(got.Blocked, "bad URL") {
			t.Errorf("Fetch(%q) Blocked = %q; want a bad-URL block", u, got.Blocked)
		}
	}
}

func TestFetchOptionDefaults(t *testing.T) {
	t.Parallel()
	o := FetchOptions{}.withDefaults()
	if o.Timeout <= 0 || o.MaxBytes <= 0 || o.MaxRedirects <= 0 {
		t.Fatalf("withDefaults left a bound unset: %+v", o)
	}
	if o.AllowPrivate {
		t.Fatal("AllowPrivate must default to false")
	}
	set := FetchOptions{Timeout: time.Second, MaxBytes: 7, MaxRedirects: 1}.withDefaults()
	if set.Timeout != time.Second || set.MaxBytes != 7 || set.MaxRedirects != 1 {
		t.Fatalf("withDefaults overrode explicit values: %+v", set)
	}
}
