package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/localstate"
)

// After `tribunal run`, the questions a team asks next are "what was decided" (results),
// "can I trust it" (report) and "can it be re-derived" (audit). Their batches live in the
// state folder run keeps, not on a NATS server, so these commands read that folder when
// nothing names a server: a first user meets an answer, not "nats://127.0.0.1:4222: not
// reachable after 30s". They only read, so running no service is enough; commands that
// need services to act (submit, cancel, redrive, ...) keep dialling NATS.

// localReader is what a reading command needs to open the state folder instead of NATS.
type localReader struct {
	dataDir string
	// fs tells whether --nats or --blob were given (flag or environment), which names a
	// server and turns the local default off.
	fs *pflag.FlagSet
	// command names the process in the folder's lock ("audit"), for whoever waits on it.
	command string
}

// registerLocal adds --data-dir to a reading command whose connection flags are already
// on fs.
func (c *connFlags) registerLocal(fs *pflag.FlagSet, command string) {
	c.local = &localReader{fs: fs, command: command}
	fs.StringVar(&c.local.dataDir, "data-dir", "", "read the state folder tribunal run keeps (default "+localstate.DirName+" in the current folder when it exists and --nats is not given)")
}

// stateDir is the folder to read instead of NATS, or "" to dial NATS: --data-dir when
// given, else the default folder when it exists and neither --nats nor --blob was given.
func (l *localReader) stateDir() (string, error) {
	if l == nil {
		return "", nil
	}
	if l.dataDir != "" {
		if !localstate.Exists(l.dataDir) {
			return "", exitError{2, fmt.Errorf("no tribunal state in %s: `tribunal run <batch>` keeps it there", l.dataDir)}
		}
		return l.dataDir, nil
	}
	if l.fs.Changed("nats") || l.fs.Changed("blob") || !localstate.Exists(localstate.DirName) {
		return "", nil
	}
	return localstate.DirName, nil
}

// connectLocal opens the state folder dir as `tribunal view` does (the embedded server,
// no service), holding the folder while the command reads it.
func connectLocal(ctx context.Context, conn *connFlags, dir string) (*clientEnv, error) {
	fmt.Fprintf(os.Stderr, "state: reading %s (the folder tribunal run keeps; --nats URL reads a server instead)\n", dir)
	lock, err := lockState(ctx, dir, conn.local.command, true)
	if err != nil {
		return nil, err
	}
	blobURL := ""
	if conn.local.fs.Changed("blob") {
		blobURL = conn.blobURL
	}
	e, err := openState(ctx, dir, blobURL)
	if err != nil {
		lock.Release()
		return nil, exitError{2, err}
	}
	return &clientEnv{js: e.Running.JS, pub: e.Running.Pub, store: e.Store, close: func() {
		e.Close()
		lock.Release()
	}}, nil
}
