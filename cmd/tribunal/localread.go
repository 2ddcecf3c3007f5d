package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/localstate"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// After `tribunal run`, the questions a team asks next are "what was decided" (results),
// "can I trust it" (report) and "can it be re-derived" (audit). Their batches live in the
// state folder run keeps, not on a NATS server, so these commands read that folder when
// nothing names a server: a first user meets an answer, not "nats://127.0.0.1:4222: not
// reachable after 30s". They only read, so running no service is enough. A person's
// inputs about a past run (view-reset, spotcheck) are events too: on the folder they run
// the aggregator while they hold it, so the reset or spot-check is applied, and audited,
// before the command returns, as it would be by running services. Commands that need
// the other services to act (submit, cancel, redrive, ...) keep dialling NATS.

// localReader is what a reading command needs to open the state folder instead of NATS.
type localReader struct {
	dataDir string
	// fs tells whether --nats or --blob were given (flag or environment), which names a
	// server and turns the local default off.
	fs *pflag.FlagSet
	// command names the process in the folder's lock ("audit"), for whoever waits on it.
	command string
	// applies says the command publishes an input of the aggregator (a reset, a
	// spot-check): the folder is opened with the aggregator running (registerLocalInput).
	applies bool
}

// applyWait bounds how long a command on the state folder waits for the aggregator to
// apply what it published (and whatever an interrupted run left for it before that).
const applyWait = 60 * time.Second

// registerLocal adds --data-dir to a reading command whose connection flags are already
// on fs.
func (c *connFlags) registerLocal(fs *pflag.FlagSet, command string) {
	c.local = &localReader{fs: fs, command: command}
	fs.StringVar(&c.local.dataDir, "data-dir", "", "read the state folder tribunal run keeps (default "+localstate.DirName+" in the current folder when it exists and --nats is not given)")
}

// registerLocalInput adds --data-dir to a command that publishes an input of the
// aggregator about a past batch (view-reset, spotcheck), so it works on the state folder
// tribunal run keeps as on running services.
func (c *connFlags) registerLocalInput(fs *pflag.FlagSet, command string) {
	c.local = &localReader{fs: fs, command: command, applies: true}
	fs.StringVar(&c.local.dataDir, "data-dir", "", "the state folder tribunal run keeps, applied there with no server (default "+localstate.DirName+" in the current folder when it exists and --nats is not given)")
}

// stateDir is the folder to read instead of NATS, or "" to dial NATS: --data-dir when
// given, else the default folder unless --nats or --blob (flag or variable) names a
// server. Without either there is nothing to read: that is said at once, with what to do,
// rather than after --connect-timeout spent dialling a NATS server nobody started.
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
	if l.fs.Changed("nats") || l.fs.Changed("blob") {
		return "", nil
	}
	if !localstate.Exists(localstate.DirName) {
		wd, _ := os.Getwd()
		return "", exitError{2, fmt.Errorf("no tribunal state here: %s has no %s folder. `tribunal run <batch>` keeps its state there; "+
			"run it in this folder first, give --data-dir DIR to read a state folder elsewhere, or --nats URL to read running services", wd, localstate.DirName)}
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
	var services []string
	if conn.local.applies {
		services = []string{bus.Aggregator}
	}
	e, err := openState(ctx, dir, blobURL, services...)
	if err != nil {
		lock.Release()
		return nil, exitError{2, err}
	}
	env := &clientEnv{js: e.Running.JS, pub: e.Running.Pub, store: e.Store, close: func() {
		e.Close()
		lock.Release()
	}}
	if conn.local.applies {
		env.applied = func(ctx context.Context) error { return aggregatorIdle(ctx, e.Running.JS, applyWait) }
	}
	return env, nil
}

// aggregatorIdle waits, at most wait, until the aggregator has taken every input the
// local stream holds for it: nothing delivered but unacknowledged, and every consumer's
// ack floor at or past the last message its filters match. The aggregator acknowledges an
// input only once it has stored what the input decided, so the records read afterwards
// hold its effect (or, for an input the rules refused, hold none: the caller checks the
// record).
//
// A consumer's NumPending alone does not say this: the server acknowledges a publish
// before it counts the message into its consumers' pending (it signals them from a
// goroutine of its own), so right after a publish, under load, a consumer can report
// nothing pending for a message it was never given.
func aggregatorIdle(ctx context.Context, js jetstream.JetStream, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	stream, err := js.Stream(ctx, localStream)
	if err != nil {
		return fmt.Errorf("the stream %s: %w", localStream, err)
	}
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		busy := uint64(0)
		for _, name := range bus.ConsumerNames(bus.Aggregator, nil) {
			n, err := consumerBehind(ctx, stream, name)
			if err != nil {
				return err
			}
			busy += n
		}
		if busy == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the aggregator still had %d inputs to apply after %s: run `tribunal run` or `tribunal view` on the folder to let it finish", busy, wait)
		case <-t.C:
		}
	}
}

// consumerBehind is how many inputs the consumer name still has to take, as far as its
// info and the stream tell: its pending and unacknowledged ones, or at least one while
// its ack floor is short of the last stored message its filters match.
func consumerBehind(ctx context.Context, stream jetstream.Stream, name string) (uint64, error) {
	c, err := stream.Consumer(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("the aggregator's consumer %s: %w", name, err)
	}
	info, err := c.Info(ctx)
	if err != nil {
		return 0, fmt.Errorf("the aggregator's consumer %s: %w", name, err)
	}
	if n := info.NumPending + uint64(info.NumAckPending); n > 0 {
		return n, nil
	}
	filters := info.Config.FilterSubjects
	if info.Config.FilterSubject != "" {
		filters = append(filters, info.Config.FilterSubject)
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	for _, f := range filters {
		m, err := stream.GetLastMsgForSubject(ctx, f)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("the aggregator's consumer %s: the last message on %s: %w", name, f, err)
		}
		if m.Sequence > info.AckFloor.Stream {
			return 1, nil
		}
	}
	return 0, nil
}

// localStream is the stream of the state folder: `tribunal run` provisions the default.
const localStream = "TRIBUNAL"
