package ctxtime

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestSleepEndsWithItsContext: a wait ends with nil when its time is over, and with the
// context's error at once when the context has ended, however long it was to be.
func TestSleepEndsWithItsContext(t *testing.T) {
	if err := Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms) = %v, want nil", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, d := range []time.Duration{0, time.Hour} {
		if err := Sleep(ctx, d); !errors.Is(err, context.Canceled) {
			t.Fatalf("Sleep(cancelled, %s) = %v, want context.Canceled", d, err)
		}
	}
}
