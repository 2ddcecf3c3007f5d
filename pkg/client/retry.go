package client

import (
	"context"
	"time"

	"github.com/cenkalti/backoff/v5"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// ReadBound is how long a client command tries again a read that fails for the moment
// (bus.IsTransient: a member slowed or cut off, a stream electing its leader) before it
// gives up: longer than nats-server's elections (4-9 s) and a member's catch-up, short
// enough that an unreachable cluster is reported within minutes.
const ReadBound = 2 * time.Minute

// Retrying runs read until it succeeds, fails for good (an error bus.IsTransient does
// not call passing) or fails for the moment past bound, backing off exponentially; notify,
// when set, hears each failure it tries again after and the wait. A watch that saw its
// batch complete must not then fail on one slow read of the results.
func Retrying[T any](ctx context.Context, bound time.Duration, notify func(error, time.Duration), read func(context.Context) (T, error)) (T, error) {
	op := func() (T, error) {
		v, err := read(ctx)
		if err != nil && !bus.IsTransient(err) {
			return v, backoff.Permanent(err)
		}
		return v, err
	}
	eb := backoff.NewExponentialBackOff()
	eb.InitialInterval, eb.MaxInterval = 250*time.Millisecond, 10*time.Second
	opts := []backoff.RetryOption{backoff.WithBackOff(eb), backoff.WithMaxElapsedTime(bound)}
	if notify != nil {
		opts = append(opts, backoff.WithNotify(notify))
	}
	return backoff.Retry(ctx, op, opts...)
}
