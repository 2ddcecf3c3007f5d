//go:build unix

package localfile

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
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

// fifo makes a named pipe nobody writes to. At cleanup it is opened for writing once,
// so a reader blocked in open (the bug) is released rather than leaked.
func fifo(t *testing.T, dir, name string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := syscall.Mkfifo(p, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	return p
}

func TestOpenRefusesWhatIsNotARegularFile(t *testing.T) {
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
	pipe := fifo(t, dir, "pipe.png")
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

// TestReadingStopsWithItsContext: a read already under way ends when its context does
// (a SIGTERM cancels the command's context).
func TestReadingStopsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := Reader(ctx, bytes.NewReader(make([]byte, 1<<20)))
	buf := make([]byte, 1024)
	if _, err := r.Read(buf); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := io.Copy(io.Discard, r); !errors.Is(err, context.Canceled) {
		t.Fatalf("copy after cancel: %v; want context.Canceled", err)
	}
	p := filepath.Join(t.TempDir(), "a")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(ctx, p); !errors.Is(err, context.Canceled) {
		t.Fatalf("ReadFile with an ended context: %v", err)
	}
}
