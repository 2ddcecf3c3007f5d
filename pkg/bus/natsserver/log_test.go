package natsserver_test

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
)

// lockedBuffer is a buffer the server's goroutines and the test share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestEmbeddedLogsThroughSlog: with its log on (`serve nats`), the server's own lines go
// through the process's slog handler, so a JSON handler (--log-format json) makes every
// one of them JSON, at the handler's level; the fatal error of a taken port still ends
// natsserver.Start, logged the same way. Not parallel: it sets slog's default.
func TestEmbeddedLogsThroughSlog(t *testing.T) {
	var buf lockedBuffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})))
	t.Cleanup(func() { slog.SetDefault(prev) })

	ns, err := natsserver.Start(natsserver.Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Log: true, ServerName: "log-test"})
	if err != nil {
		t.Fatal(err)
	}
	taken := ns.Addr().(*net.TCPAddr).String()
	if second, err := natsserver.Start(natsserver.Options{StoreDir: t.TempDir(), Listen: taken, Log: true}); err == nil {
		second.Shutdown()
		t.Fatalf("a second server started on %s", taken)
	}
	ns.Shutdown()
	ns.WaitForShutdown()

	var ready, refused bool
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for _, line := range lines {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("a line is no JSON: %q (%v)", line, err)
		}
		if rec["component"] != "nats-server" {
			t.Errorf("line without component nats-server: %q", line)
		}
		msg, _ := rec["msg"].(string)
		ready = ready || (rec["level"] == "INFO" && rec["server_name"] == "log-test" && strings.Contains(msg, "Server is ready"))
		refused = refused || (rec["level"] == "ERROR" && strings.Contains(msg, "listening"))
		if rec["level"] == "DEBUG" {
			t.Errorf("a debug line at level info: %q", line)
		}
	}
	if !ready || !refused {
		t.Errorf("server ready logged %v, taken port logged %v, among %d lines:\n%s", ready, refused, len(lines), buf.String())
	}
}
