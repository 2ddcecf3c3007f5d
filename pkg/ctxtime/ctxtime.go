// Package ctxtime holds the one wait tribunal's retry loops share, so that a provider's
// backoff, the shared rate limiter and a record writer backing off a conflict all stop
// waiting when their context ends, and none of them imports another for it.
package ctxtime

import (
	"context"
	"time"
)

// Sleep waits d, or less when ctx ends first, which it returns as ctx.Err(): a cancelled
// call must not sit out a backoff.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
