package main

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
)

// TestServeNATSLogsJSON: `serve nats --log-format json` writes every stderr line as JSON,
// nats-server's own lines (its start, a client's connection at debug) included.
func TestServeNATSLogsJSON(t *testing.T) {
	addr := freeport.Addr(t)
	cmd := exec.Command(binary, "serve", "nats", "--listen", addr, "--store", t.TempDir(), "--log-format", "json", "--log-level", "debug")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	nc, err := nats.Connect("nats://"+addr, nats.RetryOnFailedConnect(true), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !nc.IsConnected() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	connected := nc.IsConnected()
	nc.Close()
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if !connected {
		t.Fatalf("serve nats never accepted a client:\n%s", stderr.String())
	}
	server := 0
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line is no JSON: %q", line)
			continue
		}
		if rec["component"] == "nats-server" {
			server++
		}
	}
	if server == 0 {
		t.Errorf("no nats-server line through slog:\n%s", stderr.String())
	}
}
