package main

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTargetURL(t *testing.T) {
	for _, tc := range []struct{ arg, addr, want string }{
		{"", "", "http://127.0.0.1:8080/readyz"},
		{"", ":8081", "http://127.0.0.1:8081/readyz"},
		{"/healthz", "0.0.0.0:9000", "http://127.0.0.1:9000/healthz"},
		{"", "[::]:8080", "http://127.0.0.1:8080/readyz"},
		{"", "10.1.2.3:8080", "http://10.1.2.3:8080/readyz"},
		{"http://nats:8222/healthz", ":8080", "http://nats:8222/healthz"},
	} {
		got, err := targetURL(tc.arg, tc.addr)
		if err != nil || got != tc.want {
			t.Errorf("targetURL(%q, %q) = %q, %v; want %q", tc.arg, tc.addr, got, err, tc.want)
		}
	}
	for _, tc := range []struct{ arg, addr string }{{"readyz", ""}, {"", "8080"}, {"ftp://x/", ""}} {
		if got, err := targetURL(tc.arg, tc.addr); err == nil {
			t.Errorf("targetURL(%q, %q) = %q, want an error", tc.arg, tc.addr, got)
		}
	}
}

func TestRun(t *testing.T) {
	ready := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/readyz" && !ready {
			http.Error(w, "judge: not subscribed", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok\n"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	env := func(k string) string {
		if k == "TRIBUNAL_HEALTH_ADDR" {
			return addr
		}
		return ""
	}

	var stderr bytes.Buffer
	if code := run(nil, env, &stderr); code != 0 {
		t.Fatalf("ready server: exit %d, stderr %q", code, stderr.String())
	}
	ready = false
	stderr.Reset()
	if code := run([]string{"/readyz"}, env, &stderr); code != 1 || !strings.Contains(stderr.String(), "503") || !strings.Contains(stderr.String(), "not subscribed") {
		t.Fatalf("unready server: exit %d, stderr %q; want 1 naming the status and the reason", code, stderr.String())
	}
	stderr.Reset()
	if code := run([]string{srv.URL + "/healthz"}, env, &stderr); code != 0 {
		t.Fatalf("liveness on unready server: exit %d, stderr %q", code, stderr.String())
	}
	srv.Close()
	stderr.Reset()
	if code := run([]string{"-timeout", "500ms"}, env, &stderr); code != 1 {
		t.Fatalf("closed server: exit %d, want 1", code)
	}
	if code := run([]string{"a", "b"}, env, &stderr); code != 2 {
		t.Fatalf("two arguments: exit %d, want 2", code)
	}
}
