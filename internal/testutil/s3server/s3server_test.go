package s3server

import (
	"context"
	"net/http"
	"regexp"
	"testing"
	"time"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if s.external {
		t.Skip("lifecycle test needs a local versitygw")
	}
	t.Logf("command: %s", s.Command())
	get := func() (int, error) {
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://" + s.Endpoint + "/")
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// Unsigned requests are refused: the server enforces credentials.
	if code, err := get(); err != nil || code != http.StatusForbidden {
		t.Fatalf("anonymous GET / = %d, %v; want 403", code, err)
	}

	s.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("server still accepts connections after Stop")
	}
	s.Stop() // idempotent

	s.Restart()
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("server down after Restart: %v", err)
	}
	if code, err := get(); err != nil || code != http.StatusForbidden {
		t.Fatalf("GET / after Restart = %d, %v", code, err)
	}
	s.Restart() // no-op while running
}

func TestBucket(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$`)
	seen := map[string]bool{}
	for range 5 {
		b := Bucket(t)
		if !valid.MatchString(b) {
			t.Fatalf("Bucket() = %q is not a valid bucket name", b)
		}
		if seen[b] {
			t.Fatalf("Bucket() repeated %q", b)
		}
		seen[b] = true
	}
	t.Run("A_very/long name that goes on and on and on and on and on and on and on", func(t *testing.T) {
		if b := Bucket(t); !valid.MatchString(b) {
			t.Fatalf("Bucket() = %q is not a valid bucket name", b)
		}
	})
}

func TestSkipMessage(t *testing.T) {
	want := "versitygw not installed: .ci/run installs it with `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`"
	if SkipMessage != want {
		t.Fatalf("SkipMessage = %q", SkipMessage)
	}
}
