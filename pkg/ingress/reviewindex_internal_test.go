package ingress

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestQueueStamp: a review queue's index stands while the batch's judged state does: not
// for a running batch or one being redriven; the same across a revision by people's
// reviews (what the batch announced is kept); another once a redrive completes it again.
func TestQueueStamp(t *testing.T) {
	done := &records.Batch{Completion: &records.Completion{Digest: "d1"}}
	first, ok := queueStamp(done)
	if !ok {
		t.Fatal("a completed batch has no stamp")
	}
	for name, h := range map[string]*records.Batch{
		"unknown":  nil,
		"running":  {},
		"redriven": {Completion: &records.Completion{Digest: "d1"}, Redrive: &records.Redrive{Attempt: 1, Pending: []string{"AC-3"}}},
	} {
		if s, ok := queueStamp(h); ok {
			t.Errorf("%s: stamp %q, want none", name, s)
		}
	}
	revised := &records.Batch{Completion: &records.Completion{Digest: "d2", Revised: &records.Revision{Reviews: 1}, Announced: &records.Announcement{Digest: "d1"}}}
	if s, _ := queueStamp(revised); s != first {
		t.Errorf("revised by a review: %q, want %q", s, first)
	}
	again := &records.Batch{Completion: &records.Completion{Digest: "d3", Attempt: 1}, Redrive: &records.Redrive{Attempt: 1}}
	if s, ok := queueStamp(again); !ok || s == first {
		t.Errorf("completed again by a redrive: %q %v, want a stamp other than %q", s, ok, first)
	}
}
