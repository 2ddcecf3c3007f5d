// Package diskspace tells when a store is out of space, before and after a write fails.
//
// JetStream disables itself on the first write that finds its disk full ("JetStream out
// of file resources, will be DISABLED"), after which every publish and key-value write
// times out: a run whose state folder filled up logged a thousand "no ack" lines, never
// said "disk", and stranded answers it had paid for. A Guard watches the free space of
// the filesystems a process writes to and trips while a reserve is still free, so the
// work in flight can be stored and the process can stop on purpose, saying where; a
// write that fails for lack of space anyway (another process filled the disk) trips it
// too.
package diskspace

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"golang.org/x/sys/unix"
)

// ErrNoSpace is wrapped by every *Error.
var ErrNoSpace = errclass.New(errclass.Unavailable, "no space left")

// Error is a store out of space: where, and what is known of the space there.
type Error struct {
	// Path is the folder (or the store, "s3://bucket") that is full.
	Path string
	// Free and Reserve are in bytes; Free is -1 when the store cannot say (a write
	// failed, or the store is remote).
	Free, Reserve int64
	// Cause is the failed write, when one failed.
	Cause error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "no space left on device: %s", e.Path)
	switch {
	case e.Free >= 0 && e.Reserve > 0:
		fmt.Fprintf(&b, " (%s free, below the reserve of %s kept for the work in flight)", Bytes(e.Free), Bytes(e.Reserve))
	case e.Free >= 0:
		fmt.Fprintf(&b, " (%s free)", Bytes(e.Free))
	}
	if e.Cause != nil {
		fmt.Fprintf(&b, ": %v", e.Cause)
	}
	return b.String()
}

// Unwrap implements errors.Unwrap: ErrNoSpace and the cause.
func (e *Error) Unwrap() []error {
	if e.Cause == nil {
		return []error{ErrNoSpace}
	}
	return []error{ErrNoSpace, e.Cause}
}

// Is reports whether err says a store is out of space: ENOSPC or EDQUOT from the
// system, an *Error, or the words nats-server and S3 servers use for it.
func Is(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrNoSpace) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return true
	}
	return IsMessage(err.Error())
}

// IsMessage reports whether a log line or error text says a store is out of space, as
// nats-server's (which logs "no space left" and "out of ... resources") and S3 servers'
// ("storage full") do.
func IsMessage(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "no space left") || strings.Contains(s, "disk quota exceeded") ||
		strings.Contains(s, "storage full") || strings.Contains(s, "storagefull") ||
		strings.Contains(s, "jetstream out of") && strings.Contains(s, "resources")
}

// Free is the space an unprivileged writer may still use on the filesystem holding path.
func Free(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}

// Bytes formats a size for people: 3.9 MiB.
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// Guard trips once, when the free space of any of its paths falls under the reserve or
// a write is reported to have failed for lack of space.
type Guard struct {
	paths   []string
	reserve int64

	once sync.Once
	done chan struct{}
	err  *Error
}

// NewGuard watches the filesystems of paths, keeping reserve bytes free.
func NewGuard(reserve int64, paths ...string) *Guard {
	return &Guard{paths: paths, reserve: reserve, done: make(chan struct{})}
}

// Reserve is the space the guard keeps free.
func (g *Guard) Reserve() int64 { return g.reserve }

// Check measures every path once and trips the guard if one is under the reserve; it
// returns the guard's error once tripped. A path whose space cannot be measured is
// skipped: the writes there report for themselves.
func (g *Guard) Check() error {
	for _, p := range g.paths {
		free, err := Free(p)
		if err != nil {
			continue
		}
		if free < g.reserve {
			g.Trip(&Error{Path: p, Free: free, Reserve: g.reserve})
		}
	}
	return g.Err()
}

// Watch checks every interval until ctx ends or the guard trips.
func (g *Guard) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for g.Check() == nil {
		select {
		case <-ctx.Done():
			return
		case <-g.done:
			return
		case <-t.C:
		}
	}
}

// Trip records that a store is out of space; the first trip wins.
func (g *Guard) Trip(e *Error) {
	g.once.Do(func() {
		g.err = e
		close(g.done)
	})
}

// Report trips the guard when err says a store at path is out of space, and reports
// whether it did.
func (g *Guard) Report(path string, err error) bool {
	if !Is(err) {
		return false
	}
	var e *Error
	if !errors.As(err, &e) {
		e = &Error{Path: path, Free: -1, Cause: err}
		if free, ferr := Free(path); ferr == nil {
			e.Free = free
		}
	}
	g.Trip(e)
	return true
}

// Done is closed when the guard trips.
func (g *Guard) Done() <-chan struct{} { return g.done }

// Err is why the guard tripped, nil until it has.
func (g *Guard) Err() error {
	select {
	case <-g.done:
		return g.err
	default:
		return nil
	}
}
