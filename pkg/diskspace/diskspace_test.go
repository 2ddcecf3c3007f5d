package diskspace

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&os.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC}, true},
		{fmt.Errorf("put: %w", &os.PathError{Op: "write", Path: "/x", Err: syscall.EDQUOT}), true},
		{&Error{Path: "/x"}, true},
		{errors.New("Filestore [KV_tribunal_jobs] Critical write error: write /x/2.blk: no space left on device"), true},
		{errors.New("JetStream out of file resources, will be DISABLED"), true},
		{errors.New("XMinioStorageFull: Storage backend has reached its minimum free drive threshold"), true},
		{errors.New("Storage full"), true},
		{errors.New("no ack: context deadline exceeded"), false},
		{nil, false},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("Is(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestGuard(t *testing.T) {
	dir := t.TempDir()
	free, err := Free(dir)
	if err != nil || free <= 0 {
		t.Fatalf("Free(%s) = %d, %v", dir, free, err)
	}
	if err := NewGuard(0, dir).Check(); err != nil {
		t.Errorf("a guard without a reserve tripped: %v", err)
	}
	g := NewGuard(free*2+1<<40, dir)
	err = g.Check()
	var e *Error
	if !errors.As(err, &e) || e.Path != dir || e.Free <= 0 || !strings.Contains(err.Error(), "below the reserve") {
		t.Fatalf("a reserve above the disk: %v", err)
	}
	select {
	case <-g.Done():
	default:
		t.Error("tripped guard's Done is open")
	}

	g = NewGuard(0, dir)
	if g.Report(dir, errors.New("timeout")) {
		t.Error("an unrelated error tripped the guard")
	}
	cause := &os.PathError{Op: "write", Path: dir + "/f", Err: syscall.ENOSPC}
	if !g.Report(dir, cause) || !errors.Is(g.Err(), syscall.ENOSPC) || !errors.Is(g.Err(), ErrNoSpace) {
		t.Fatalf("a failed write: %v", g.Err())
	}
	g.Trip(&Error{Path: "/elsewhere"})
	if !strings.Contains(g.Err().Error(), dir) {
		t.Errorf("the first trip does not stand: %v", g.Err())
	}
}

func TestBytes(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 16 << 20: "16.0 MiB", 3 << 30: "3.0 GiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
}
