package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// status GETs url and returns its status code and body (0 when nothing answers).
func status(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestConsoleWaitsForBuckets: `serve console` started before any service has created
// tribunal's state stays up, live but not ready, with its metrics served; once the
// buckets exist it becomes ready and serves its pages.
func TestConsoleWaitsForBuckets(t *testing.T) {
	ns := natstest.Start(t)
	consoleAddr, health := freeport.Addr(t), freeport.Addr(t)
	start(t, "serve", "console", "--nats", ns.URL, "--blob", "file://"+filepath.Join(t.TempDir(), "blobs"),
		"--console-addr", consoleAddr, "--health", health)
	waitHTTP(t, "http://"+health+"/healthz")

	// Not ready, and the pages say why, for several seconds: it does not give up.
	for range 3 {
		if code, _ := status("http://" + health + "/readyz"); code != http.StatusServiceUnavailable {
			t.Fatalf("/readyz %d before the buckets exist, want 503", code)
		}
		if code, body := status("http://" + consoleAddr + "/"); code != http.StatusServiceUnavailable || !strings.Contains(body, "waiting") {
			t.Fatalf("console page %d %q before the buckets exist, want 503 saying it waits", code, body)
		}
		time.Sleep(time.Second)
	}
	if code, body := status("http://" + health + "/metrics"); code != 200 || !strings.Contains(body, "tribunal_build_info{") {
		t.Fatalf("/metrics %d:\n%s", code, body)
	}

	// A service starts and provisions: the console becomes ready.
	_, js := ns.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	waitHTTP(t, "http://"+health+"/readyz")
	if code, body := status("http://" + consoleAddr + "/"); code != 200 {
		t.Fatalf("console page %d after provisioning:\n%s", code, body)
	}
}
