package main

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/blob/natsblob"
)

// smallObjectLimit is the largest object the all-in-one mode keeps in the embedded
// server's object store: half its chunk size, so every such object is one message.
const smallObjectLimit = 64 << 10

// allInOneStore is the all-in-one mode's blob store: objects up to smallObjectLimit in a
// JetStream object store on the embedded server (one message each, in the server's own
// files), larger ones as files in dir. Storing a small artifact as a file cost a file
// creation and a rename, the largest share of the mode's CPU profile (docs/benchmarks.md).
func allInOneStore(ctx context.Context, nc *nats.Conn, dir string, ephemeral bool) (blob.Store, error) {
	files, err := fileblob.New(dir, fileblob.Options{NoSync: ephemeral})
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("all-in-one blob store: %w", err)
	}
	small, err := natsblob.New(ctx, js, natsblob.Options{MaxSize: smallObjectLimit})
	if err != nil {
		return nil, err
	}
	return &blob.Tiered{Small: small, Large: files, Threshold: smallObjectLimit}, nil
}

// memoryLimitFor is the all-in-one mode's soft memory limit for a batch of n ACs: 8 KiB
// per AC, at least 256 MiB and at most defaultMemoryLimit. The runtime collects
// harder as the process nears its limit, so a 10,000-AC batch, whose live heap stays near
// 150 MiB, peaks under 300 MiB instead of wherever the collector's pacing takes it
// (330-390 MiB measured), while a 100,000-AC batch keeps the whole default: with less
// (600 MiB), its collector ran most of the time.
func memoryLimitFor(n int) int64 {
	return min(defaultMemoryLimit, max(256<<20, int64(n)*8<<10))
}
