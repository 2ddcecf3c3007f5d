package records

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"

	"github.com/nats-io/nats.go/jetstream"
)

const (
	// scanFetch is how many records one pull of a scan asks for: one round trip per
	// thousand records, a few MiB in flight at most.
	scanFetch = 1000
	// scanResets bounds the consumers a scan creates in a row without reading a record:
	// a consumer that is lost again and again is a broken bus, not bad luck.
	scanResets = 10
	// scanIdle is how long the server keeps a scan's consumer nobody pulls from (a
	// scan that died with its process): long enough for fn to work through a pull.
	scanIdle = 2 * time.Minute
	// scanPlacements is how many consumers placeScan creates before it gives up finding
	// one on a member that is current.
	scanPlacements = 8
	// scanTails bounds the consumers a scan makes to read what was written while it read
	// (scanStream): records rewritten faster than a consumer is made are an error, not a
	// read that may have missed one.
	scanTails = 64
)

// scanPlaced, when set (tests), is told where each scan's consumer reads, where the
// stream's leader is, and whether the consumer's member is current.
var scanPlaced func(consumer, leader string, current bool)

// errScanReset is why a scan's consumer is replaced: it went missing, or delivered with a
// gap, or stopped delivering.
var errScanReset = errors.New("the consumer went missing, skipped messages or stopped delivering")

// scanStream hands emit the current value of every key of bucket matching keys (delete
// and purge markers left out), each once, in stream order, by reading the bucket's stream
// with an ephemeral pull consumer of its own: last message per subject, no
// acknowledgements, pulled scanFetch at a time. It knows it is done when a new consumer
// says nothing matches: the one it starts with, or one made after a message said nothing
// was pending behind it, which reads from the stream sequence after the last one seen.
// A message's pending count is not the end: a record rewritten while the scan reads
// removes its older copy from the count at once, and adds its new one only when the
// server's signal for it comes, so the count can say 0 with the new copy stored and
// undelivered (TestEachJobWhileRecordsAreRewritten missed 1 in 50 records without the
// second consumer). A consumer's count at its creation is read from the store. The
// consumer's sequence must go 1, 2, 3...: a gap (messages lost between server and
// client) or a consumer gone (deleted, timed out, its server restarted) makes it create
// another and go on, skipping what it handed on already (stream sequences up to the last
// one seen), so nothing is missed and nothing handed twice. A record rewritten after emit
// saw it comes again, newer, as it would through a watch.
// It stops without an error when emit returns false.
func scanStream(ctx context.Context, js jetstream.JetStream, bucket, keys string, emit func(key string, value []byte) bool) error {
	stream := "KV_" + bucket
	prefix := "$KV." + bucket + "."
	cfg := jetstream.ConsumerConfig{
		Description:       "tribunal: read the records of " + keys,
		FilterSubject:     prefix + keys,
		DeliverPolicy:     jetstream.DeliverLastPerSubjectPolicy,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		InactiveThreshold: scanIdle,
	}
	var last uint64 // the stream sequence of the last message handed on or skipped
	var lost error  // why the last consumer was given up
	drained := 0    // consumers read until they said nothing was pending
	for fruitless := 0; ; fruitless++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if fruitless >= scanResets {
			return fmt.Errorf("read %s of stream %s: %d consumers in a row lost before a record: %w", keys, stream, fruitless, lost)
		}
		if fruitless > 1 {
			if err := ctxtime.Sleep(ctx, time.Duration(fruitless)*50*time.Millisecond); err != nil {
				return err
			}
		}
		c, err := placeScan(ctx, js, stream, cfg)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrStreamNotFound) {
				return fmt.Errorf("read %s: %w", keys, err)
			}
			lost = fmt.Errorf("create a consumer on %s: %w", stream, err)
			continue // a cluster between leaders, say: try again
		}
		before := last
		end, err := scanConsumer(ctx, c, prefix, &last, emit)
		deleteConsumer(ctx, js, stream, c)
		switch {
		case errors.Is(err, errScanDrained):
			// What was stored since is read by a consumer that starts after it, whose
			// count at its creation says whether there is any.
			if drained++; drained > scanTails {
				return fmt.Errorf("read %s of stream %s: still rewritten after %d reads of what changed meanwhile", keys, stream, scanTails)
			}
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, last+1
			fruitless = -1
			continue
		case end:
			return nil
		case !errors.Is(err, errScanReset):
			return err
		}
		lost = err
		if cfg.DeliverPolicy == jetstream.DeliverByStartSequencePolicy {
			cfg.OptStartSeq = last + 1
		}
		if last != before {
			fruitless = -1 // progress: the count starts again
		}
	}
}

// errScanDrained is a consumer that delivered until a message said nothing was pending
// behind it: what a consumer made after it counts decides whether the scan is over.
var errScanDrained = errors.New("the consumer says nothing is pending")

// scanConsumer reads c until the end (true) or a reset (errScanReset), handing emit every
// put newer than *last and moving *last along.
func scanConsumer(ctx context.Context, c jetstream.Consumer, prefix string, last *uint64, emit func(key string, value []byte) bool) (bool, error) {
	if c.CachedInfo().NumPending == 0 {
		return true, nil // nothing matches
	}
	var seq uint64 // the consumer sequence of the last message delivered
	for {
		b, err := c.FetchNoWait(scanFetch)
		if err != nil {
			return false, fmt.Errorf("%w: pull: %v", errScanReset, err)
		}
		n := 0
		for m := range b.Messages() {
			n++
			md, err := m.Metadata()
			if err != nil {
				return false, fmt.Errorf("%w: %v", errScanReset, err)
			}
			if md.Sequence.Consumer != seq+1 {
				return false, fmt.Errorf("%w: message %d after %d", errScanReset, md.Sequence.Consumer, seq)
			}
			seq = md.Sequence.Consumer
			if md.Sequence.Stream > *last {
				*last = md.Sequence.Stream
				if op := m.Headers().Get(kvOperationHeader); op != "DEL" && op != "PURGE" {
					if !emit(strings.TrimPrefix(m.Subject(), prefix), m.Data()) {
						return true, nil
					}
				}
			}
			if md.NumPending == 0 {
				return false, errScanDrained
			}
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		// The consumer is gone, or silent while it says records are pending.
		if err := b.Error(); err != nil {
			return false, fmt.Errorf("%w: %v", errScanReset, err)
		}
		if n == 0 {
			return false, fmt.Errorf("%w: nothing delivered after message %d", errScanReset, seq)
		}
	}
}

// placeScan creates a scan's consumer where it reads what the stream holds now: on the
// stream's leader, or on a member the leader reports current with nothing to catch up.
// An ephemeral consumer of one replica is placed at random among the stream's members
// (in practice rarely on the leader), and it reads its member's store: one that lags (a
// slowed link, a member catching up after a partition) holds older records, and a
// batch's completion read from one folded jobs as still pending though every one was
// decided (TestClusterPartitions). A consumer on a member that lags is deleted and
// created again, up to scanPlacements times; the caller tries again later after that.
func placeScan(ctx context.Context, js jetstream.JetStream, stream string, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	var at, leader string
	for try := 1; try <= scanPlacements; try++ {
		c, err := js.CreateConsumer(ctx, stream, cfg)
		if err != nil {
			return nil, err
		}
		ci := c.CachedInfo()
		if ci.Cluster == nil {
			return c, nil // a standalone server, which names no member for a consumer
		}
		at = ci.Cluster.Leader
		s, err := js.Stream(ctx, stream) // answered by the stream's leader
		if err != nil {
			deleteConsumer(ctx, js, stream, c)
			return nil, fmt.Errorf("where the leader of %s is: %w", stream, err)
		}
		current := false
		if si := s.CachedInfo(); si.Cluster != nil {
			leader = si.Cluster.Leader
			current = at != "" && at == leader
			for _, r := range si.Cluster.Replicas {
				if r.Name == at && r.Current && r.Lag == 0 {
					current = true
				}
			}
		}
		if scanPlaced != nil {
			scanPlaced(at, leader, current)
		}
		if current {
			return c, nil
		}
		deleteConsumer(ctx, js, stream, c)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%d consumers on %s placed on members behind its leader %q (the last on %q)", scanPlacements, stream, leader, at)
}

// kvOperationHeader marks a key-value delete or purge (its value is "DEL" or "PURGE"); a
// put carries none.
const kvOperationHeader = "KV-Operation"

// deleteConsumer removes a scan's consumer, on a context of its own: the scan's may be
// cancelled already, and the consumer should not outlive the scan by scanIdle.
func deleteConsumer(ctx context.Context, js jetstream.JetStream, stream string, c jetstream.Consumer) {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(dctx, stream, c.CachedInfo().Name)
}
