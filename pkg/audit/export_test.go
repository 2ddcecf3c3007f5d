package audit

import (
	"context"

	"github.com/nats-io/nats.go/jetstream"
)

// ReplayReads is Replay (own: ReplayOwn) returning how many times it read the stream.
func ReplayReads(ctx context.Context, js jetstream.JetStream, f Filter, own bool, visit func(*Recorded) error) (int, error) {
	do := replay
	if own {
		do = replayOwn
	}
	p, err := do(ctx, js, f, visit)
	if p == nil {
		return 0, err
	}
	return p.reads, err
}
