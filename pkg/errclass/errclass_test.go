package errclass

import (
	"errors"
	"fmt"
	"testing"
)

// TestClassedSentinels: a sentinel of a class keeps its message and its identity, is its
// class through any wrapping, and an error of no class is Internal.
func TestClassedSentinels(t *testing.T) {
	t.Parallel()
	errGone := New(NotFound, "job not recorded")
	wrapped := fmt.Errorf("load AC-1: %w", errGone)
	if errGone.Error() != "job not recorded" || !errors.Is(wrapped, errGone) || !errors.Is(wrapped, NotFound) || errors.Is(wrapped, Refused) {
		t.Fatalf("classed sentinel: %v", wrapped)
	}
	if Of(wrapped) != NotFound || Of(errors.New("plain")) != Internal || Of(nil) != nil {
		t.Fatalf("Of: %v %v %v", Of(wrapped), Of(errors.New("plain")), Of(nil))
	}
}
