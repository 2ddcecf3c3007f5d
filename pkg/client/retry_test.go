package client

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestRetryingTriesAgainOnlyWhatFailsForTheMoment: a read timing out is tried again until
// it answers; one refused for good is returned at once, unwrapped; one failing for the
// moment past the bound is returned with its own error.
func TestRetryingTriesAgainOnlyWhatFailsForTheMoment(t *testing.T) {
	ctx := context.Background()
	calls, heard := 0, 0
	got, err := Retrying(ctx, time.Minute, func(error, time.Duration) { heard++ }, func(context.Context) (int, error) {
		if calls++; calls < 3 {
			return 0, fmt.Errorf("load batch b: %w", nats.ErrTimeout)
		}
		return 42, nil
	})
	if err != nil || got != 42 || calls != 3 || heard != 2 {
		t.Fatalf("transient twice: got %d, %v after %d calls (%d heard), want 42 after 3", got, err, calls, heard)
	}

	refused := errors.New("batch b: not found")
	calls = 0
	if _, err := Retrying(ctx, time.Minute, nil, func(context.Context) (int, error) { calls++; return 0, refused }); err != refused || calls != 1 {
		t.Fatalf("refused: %v after %d calls, want the error itself after 1", err, calls)
	}

	calls = 0
	_, err = Retrying(ctx, 600*time.Millisecond, nil, func(context.Context) (int, error) { calls++; return 0, nats.ErrNoResponders })
	if !errors.Is(err, nats.ErrNoResponders) || calls < 2 {
		t.Fatalf("past the bound: %v after %d calls, want no responders after at least 2", err, calls)
	}
}
