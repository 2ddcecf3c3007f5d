package aggregator

import (
	"context"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// FoldFinal is the completion's read of the batch's records: its summary, or why not.
func FoldFinal(ctx context.Context, s *Service, last *records.Job) (events.BatchCompleted, error) {
	fold, _, err := s.foldFinal(ctx, last)
	if err != nil {
		return events.BatchCompleted{}, err
	}
	return fold.Summary(), nil
}

// SetCompletePause sets the first pause between the completion's reads, until restore.
func SetCompletePause(d time.Duration) (restore func()) {
	old := completePause
	completePause = d
	return func() { completePause = old }
}
