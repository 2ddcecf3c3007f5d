package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/diskspace"
)

// defaultMinFree is the space `tribunal run` keeps free in its state folder. When less is
// left the run stops taking work, lets what is in flight finish (a judged AC's answer,
// its call record, its verdict and decision take a few KiB each; 64 calls in flight well
// under a MiB) and exits 2, so JetStream, which disables itself on the first write that
// finds its disk full, never meets a full disk, and no answer paid for is lost.
const defaultMinFree = 16 << 20

// spaceCheckInterval is how often a run measures its state folder's free space.
const spaceCheckInterval = 200 * time.Millisecond

// byteSize is a flag holding a size in bytes, written as "16MiB", "64MB" or "1048576".
type byteSize int64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("want a size such as 16MiB: %w", err)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) Type() string { return "size" }

// guardedStore is the run's blob store: a write that fails for lack of space trips the
// run's guard, naming the store's folder, whatever service made it.
type guardedStore struct {
	blob.Store
	guard *diskspace.Guard
	path  string
}

func (g guardedStore) Put(ctx context.Context, tenant string, r io.Reader, opts blob.PutOptions) (blob.Attrs, error) {
	attrs, err := g.Store.Put(ctx, tenant, r, opts)
	g.guard.Report(g.path, err)
	return attrs, err
}

// Sync forwards deferred durability (blob.Syncer) to the store it wraps.
func (g guardedStore) Sync(ctx context.Context) error {
	err := blob.Sync(ctx, g.Store)
	g.guard.Report(g.path, err)
	return err
}

// failedWrite reports whether err is a write that found the disk full, as opposed to the
// guard's reserve being reached with every write stored.
func failedWrite(err error) bool {
	var e *diskspace.Error
	return errors.As(err, &e) && e.Cause != nil
}

// noSpaceError is a run stopped because its state folder is full: what to do, and what
// happened to the work.
func noSpaceError(err error, batchID string, decided, total int) error {
	var e *diskspace.Error
	if !errors.As(err, &e) {
		return err
	}
	msg := e.Error()
	switch {
	case batchID == "":
		msg += "\nfree space there (or pass --data-dir elsewhere) and run again"
	case failedWrite(err):
		msg += fmt.Sprintf("\nthe run stopped with %d of %d ACs of batch %s decided. The disk filled before the reserve (--min-free) could be kept "+
			"(another process wrote there, or the reserve is too small): an answer given after the first failed write is not stored, and its AC is judged again. "+
			"Free space there (or pass --data-dir elsewhere) and run the same command again: answers stored before are not paid for again", decided, total, batchID)
	default:
		msg += fmt.Sprintf("\nthe run stopped with %d of %d ACs of batch %s decided; every answer a judge gave is stored. "+
			"Free space there (or pass --data-dir elsewhere) and run the same command again: it continues batch %s and pays only for ACs never judged", decided, total, batchID, batchID)
	}
	return exitError{2, errors.New(msg)}
}
