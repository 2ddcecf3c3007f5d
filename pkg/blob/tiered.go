package blob

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
)

// Tiered is a Store that keeps objects of at most Threshold bytes in Small and the rest
// in Large: the all-in-one mode keeps its many small artifacts in the embedded server's
// object store, where storing one costs a message instead of a file, and large ones in
// the file driver, which streams them. An object's size decides its tier, so the same
// bytes always land in the same one and stay stored once; Open and Stat look in Small
// first and then in Large, so objects stored before a threshold changed are still found.
type Tiered struct {
	Small, Large Store
	// Threshold is the largest object Small receives.
	Threshold int64
}

var _ Store = (*Tiered)(nil)

// Put implements Store. It reads up to Threshold+1 bytes to choose the tier, then hands
// the object to that tier, which enforces its own size limit and digests.
func (t *Tiered) Put(ctx context.Context, tenant string, r io.Reader, opts PutOptions) (Attrs, error) {
	if _, _, err := NormalizePut(tenant, opts); err != nil {
		return Attrs{}, fmt.Errorf("tiered: put: %w", err)
	}
	var head bytes.Buffer
	n, err := head.ReadFrom(io.LimitReader(&ctxReader{ctx: ctx, r: r}, t.Threshold+1))
	if err != nil {
		return Attrs{}, fmt.Errorf("tiered: put %s: %w", tenant, err)
	}
	if n <= t.Threshold {
		return t.Small.Put(ctx, tenant, &head, opts)
	}
	return t.Large.Put(ctx, tenant, io.MultiReader(&head, r), opts)
}

// Open implements Store.
func (t *Tiered) Open(ctx context.Context, ref Ref) (io.ReadCloser, Attrs, error) {
	rc, a, err := t.Small.Open(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return t.Large.Open(ctx, ref)
	}
	return rc, a, err
}

// Stat implements Store.
func (t *Tiered) Stat(ctx context.Context, ref Ref) (Attrs, error) {
	a, err := t.Small.Stat(ctx, ref)
	if errors.Is(err, ErrNotFound) {
		return t.Large.Stat(ctx, ref)
	}
	return a, err
}

// Close implements Store: it closes both tiers.
func (t *Tiered) Close() error {
	return errors.Join(t.Small.Close(), t.Large.Close())
}
