//go:build unix

package localfile

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
)

// within runs f and fails the test if it has not returned after d: the failure these
// tests guard against is a call that never returns.
func within[T any](t *testing.T, d time.Duration, f func() T) T {
	t.Helper()
	done := make(chan T, 1)
	go func() { done <- f() }()
	select {
	case v := <-done:
		return v
	case <-time.After(d):
		t.Fatalf("still blocked after %s", d)
		panic("unreachable")
	}
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	regular := filepath.Join(dir, "a.txt")
	if err := os.WriteFile(regular, []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	link := filepath.Join(dir, "link")
	pipe := filepath.Join(dir, "pipe.png")
	fifotest.Make(t, pipe)
	if err := os.Symlink(pipe, link); err != nil {
		t.Fatal(err)
	}
	for path, kind := range map[string]string{
		pipe:        "a named pipe (FIFO)",
		link:        "a named pipe (FIFO)", // followed: what it reaches is what counts
		"/dev/null": "a character device",
		sock:        "a socket",
		dir:         "a directory",
	} {
		err := within(t, 10*time.Second, func() error { _, err := ReadFile(context.Background(), path); return err })
		var nr *NotRegularError
		if !errors.As(err, &nr) || nr.Kind != kind || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadFile(%s) = %v; want %q naming the path", path, err, kind)
		}
	}
	data, err := ReadFile(context.Background(), regular)
	if err != nil || string(data) != "hello" {
		t.Fatalf("ReadFile(regular) = %q, %v", data, err)
	}
	if _, err := ReadFile(context.Background(), filepath.Join(dir, "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ReadFile(missing) = %v; want ErrNotExist", err)
	}
}

// TestReadingStopsWithItsContext: a file is not read once its context has ended (a
// SIGTERM cancels the command's context).
func TestReadingStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := filepath.Join(t.TempDir(), "a")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadFile with an ended context: %v", err)
	}
}
