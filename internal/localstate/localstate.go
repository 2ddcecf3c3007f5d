// Package localstate is the all-in-one mode's state folder on one machine: by default
// .tribunal/ in the current directory, holding the embedded NATS server's JetStream store
// (the event stream and the key-value buckets: job and batch records, the judge-call
// cache, rubric views) and the file blob store. `tribunal run` keeps it across runs, so a
// rerun is answered from the cache and a rubric view continues its loop; `tribunal view`
// opens it again after the runs.
//
// One NATS server may use a store folder at a time: two would corrupt it. A lock file
// (flock, so a process that dies releases it with its file descriptors and no stale lock
// is ever left behind) admits one process. A `tribunal run` that finds the folder in use
// waits for it; a `tribunal view` holding the folder steps aside for a waiting run and
// takes the folder back when the run is done (Wanted, WaitIdle). Who holds the folder is
// written beside the lock, so the waiting process can say whom it waits for.
package localstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/gofrs/flock"
)

// DirName is the default state folder, relative to the current directory.
const DirName = ".tribunal"

const (
	lockFile    = "lock"
	waitingFile = "waiting.lock"
	holderFile  = "holder.json"
	gitignore   = ".gitignore"
)

// poll is how often a waiting process tries the lock again.
const poll = 200 * time.Millisecond

// Holder says which process holds a state folder.
type Holder struct {
	PID     int       `json:"pid"`
	Command string    `json:"command"`
	Since   time.Time `json:"since"`
	// URL is where a `tribunal view` holding the folder serves its console.
	URL string `json:"url,omitempty"`
}

// String names the holder for a message: "tribunal run (pid 4242, since 14:03:05)".
func (h Holder) String() string {
	if h.PID == 0 {
		return "another tribunal process"
	}
	return fmt.Sprintf("tribunal %s (pid %d, since %s)", h.Command, h.PID, h.Since.Local().Format("15:04:05"))
}

// Me is the holder record of this process for command.
func Me(command string) Holder {
	return Holder{PID: os.Getpid(), Command: command, Since: time.Now().UTC().Truncate(time.Second)}
}

// Prepare makes dir a state folder: it creates it when it is missing, with a .gitignore
// that keeps all of it out of git, and reports whether it did.
func Prepare(dir string) (created bool, err error) {
	st, err := os.Stat(dir)
	switch {
	case err == nil && !st.IsDir():
		return false, fmt.Errorf("state folder %s: not a directory", dir)
	case err == nil:
		return false, nil
	case !errors.Is(err, os.ErrNotExist):
		return false, fmt.Errorf("state folder %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return false, fmt.Errorf("state folder %s: %w", dir, err)
	}
	// Everything in here is tribunal's own state, large and machine-specific.
	if err := os.WriteFile(filepath.Join(dir, gitignore), []byte("# tribunal's local state (tribunal run, tribunal view): never commit it\n*\n"), 0o644); err != nil {
		return true, fmt.Errorf("state folder %s: %w", dir, err)
	}
	return true, nil
}

// Exists reports whether dir holds tribunal state (a NATS store).
func Exists(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, "nats"))
	return err == nil && st.IsDir()
}

// Lock is a held state folder.
type Lock struct {
	dir    string
	f      *flock.Flock
	holder Holder
}

// Options say how to wait for a folder another process holds.
type Options struct {
	// Signal lets a holder that steps aside (a `tribunal view`) know that this process
	// waits. Only processes that do not step aside themselves signal, so two of them
	// never hand a folder back and forth.
	Signal bool
	// Waiting is called once, with the holder, when the folder is held by another
	// process and the call is about to wait.
	Waiting func(Holder)
}

// TryAcquire takes the folder's lock if it is free. When another process holds it, it
// returns a nil Lock and that process's holder record.
func TryAcquire(dir string, me Holder) (*Lock, *Holder, error) {
	f := flock.New(filepath.Join(dir, lockFile))
	ok, err := f.TryLock()
	if err != nil {
		return nil, nil, fmt.Errorf("lock state folder %s: %w", dir, err)
	}
	if !ok {
		h := ReadHolder(dir)
		return nil, &h, nil
	}
	l := &Lock{dir: dir, f: f, holder: me}
	if err := l.writeHolder(); err != nil {
		_ = f.Unlock()
		return nil, nil, err
	}
	return l, nil, nil
}

// Acquire takes the folder's lock, waiting while another process holds it, until ctx
// ends.
func Acquire(ctx context.Context, dir string, me Holder, o Options) (*Lock, error) {
	l, h, err := TryAcquire(dir, me)
	if err != nil || l != nil {
		return l, err
	}
	if o.Waiting != nil {
		o.Waiting(*h)
	}
	if o.Signal {
		w := flock.New(filepath.Join(dir, waitingFile))
		// A shared lock: any number may wait; Wanted's exclusive probe fails while one does.
		if _, err := w.TryRLockContext(ctx, poll); err != nil {
			return nil, fmt.Errorf("wait for state folder %s (held by %s): %w", dir, h, err)
		}
		defer func() { _ = w.Unlock() }()
	}
	f := flock.New(filepath.Join(dir, lockFile))
	if _, err := f.TryLockContext(ctx, poll); err != nil {
		return nil, fmt.Errorf("wait for state folder %s (held by %s): %w", dir, ReadHolder(dir), err)
	}
	l = &Lock{dir: dir, f: f, holder: me}
	if err := l.writeHolder(); err != nil {
		_ = f.Unlock()
		return nil, err
	}
	return l, nil
}

// Dir is the locked folder.
func (l *Lock) Dir() string { return l.dir }

// SetURL records where the holder serves its console, for a second `tribunal view`.
func (l *Lock) SetURL(url string) error {
	l.holder.URL = url
	return l.writeHolder()
}

func (l *Lock) writeHolder() error {
	data, err := json.Marshal(l.holder)
	if err != nil {
		return err
	}
	tmp := filepath.Join(l.dir, holderFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("state folder %s: %w", l.dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(l.dir, holderFile)); err != nil {
		return fmt.Errorf("state folder %s: %w", l.dir, err)
	}
	return nil
}

// Release gives the folder up.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = os.Remove(filepath.Join(l.dir, holderFile))
	err := l.f.Unlock()
	l.f = nil
	return err
}

// Wanted reports whether a process that signals (Options.Signal) waits for the folder.
func (l *Lock) Wanted() bool { return wanted(l.dir) }

func wanted(dir string) bool {
	w := flock.New(filepath.Join(dir, waitingFile))
	ok, err := w.TryLock()
	if err != nil {
		return false
	}
	if ok {
		_ = w.Unlock()
		return false
	}
	return true
}

// WaitIdle waits until no signalling process waits for dir any more: each has taken the
// folder in turn. A holder that stepped aside calls it before waiting for the folder
// again, so it does not snatch the folder back from the process it stepped aside for.
func WaitIdle(ctx context.Context, dir string) error {
	t := time.NewTicker(poll)
	defer t.Stop()
	for wanted(dir) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// ReadHolder reads who holds dir; the zero Holder when it cannot tell.
func ReadHolder(dir string) Holder {
	var h Holder
	data, err := os.ReadFile(filepath.Join(dir, holderFile))
	if err == nil {
		_ = json.Unmarshal(data, &h)
	}
	return h
}
