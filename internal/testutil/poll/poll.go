// Package poll waits in tests for a condition that other goroutines or processes bring
// about, bounded generously so a loaded machine does not make the test flaky.
package poll

import (
	"testing"
	"time"
)

// Interval is how long Until sleeps between two looks.
const Interval = 10 * time.Millisecond

// Until calls cond every Interval until it holds, and fails the test once timeout has
// passed without it. cond's second result describes the state it saw; the failure
// message carries the last one.
func Until(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last state: %s", timeout, what, state)
		}
		time.Sleep(Interval)
	}
}
