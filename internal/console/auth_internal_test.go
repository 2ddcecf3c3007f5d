package console

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestSameOrigin(t *testing.T) {
	for name, c := range map[string]struct {
		h    map[string]string
		want bool
	}{
		"origin matches":         {map[string]string{"Origin": "http://console.test"}, true},
		"origin differs":         {map[string]string{"Origin": "http://evil.test"}, false},
		"null origin":            {map[string]string{"Origin": "null"}, false},
		"fetch same-origin":      {map[string]string{"Sec-Fetch-Site": "same-origin"}, true},
		"fetch same-site":        {map[string]string{"Sec-Fetch-Site": "same-site"}, false},
		"referer matches":        {map[string]string{"Referer": "http://console.test/t/a/b/x"}, true},
		"referer differs":        {map[string]string{"Referer": "http://evil.test/"}, false},
		"nothing vouches for it": {nil, false},
	} {
		r := httptest.NewRequest(http.MethodPost, "http://console.test/x", nil)
		for k, v := range c.h {
			r.Header.Set(k, v)
		}
		if got := sameOrigin(r); got != c.want {
			t.Errorf("%s: %v", name, got)
		}
	}
}

func TestSafeNextAndServedType(t *testing.T) {
	for in, want := range map[string]string{"/t/a/": "/t/a/", "//evil.test/": "/", "https://evil.test": "/", "/\\evil": "/", "": "/"} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q", in, got)
		}
	}
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	for _, c := range []struct {
		stored   string
		head     []byte
		want     string
		download bool
	}{
		{"image/png", png, "image/png", false},
		{"application/octet-stream", png, "image/png", false},
		{"", []byte("<!doctype html><script>x</script>"), "text/plain; charset=utf-8", false},
		{"application/octet-stream", []byte("\x00\x01\x02binary"), "application/octet-stream", true},
		{"text/html", []byte("<p>"), "text/html", false},
	} {
		got, dl := servedType(c.stored, c.head)
		if got != c.want || dl != c.download {
			t.Errorf("servedType(%q, %q) = %q %v", c.stored, c.head, got, dl)
		}
	}
}

// TestOpenConsole: without tokens every page is open (the all-in-one mode) and the
// login form is not needed.
func TestOpenConsole(t *testing.T) {
	h := New(Config{})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/login", nil))
	if rec.Code != http.StatusSeeOther || rec.Header().Get("Location") != "/" {
		t.Fatalf("open console /login: %d %s", rec.Code, rec.Header().Get("Location"))
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/t/Not_A_Tenant/b/x", nil))
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "nothing you may see") {
		t.Fatalf("malformed tenant: %d", rec.Code)
	}
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
		t.Fatalf("page policy %q", csp)
	}
}
