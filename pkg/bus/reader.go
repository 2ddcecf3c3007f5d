package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"

	"github.com/tribunal-dev/tribunal/pkg/ctxtime"
)

// Readers is how many stream readers (ReadStream) may read a stream at once, across every
// process.
//
// A reader reads through a consumer of one of a fixed set of names (ReaderName), never
// one of its own naming, because NATS permissions can only grant consumer rights by
// name: a user allowed to name consumers freely may name a service's durable, and the
// server then pulls and acknowledges that durable's messages, deletes it or rewrites its
// configuration (the create request with no name in its subject takes the name from its
// body). With fixed names the authorization (pkg/tenants) grants the readers' consumers
// and nothing else, so a user that audits cannot touch a service's durable.
const Readers = 16

// ReaderName is the consumer name of reader slot i ("tribunal-reader-3"). No service's
// durable can have it: those are "tribunal-<service>[-<tenant>]".
func ReaderName(i int) string { return fmt.Sprintf("tribunal-reader-%d", i) }

// ReaderNames are the names of every reader slot.
func ReaderNames() []string {
	out := make([]string, Readers)
	for i := range out {
		out[i] = ReaderName(i)
	}
	return out
}

// ReadOptions select what ReadStream reads.
type ReadOptions struct {
	// FilterSubjects limit the read to messages on these subjects; empty reads every
	// message.
	FilterSubjects []string
	// Since starts the read at the first message stored at or after it; zero starts at
	// the stream's first message.
	Since time.Time
	// Last is the last stream sequence the read delivers (the stream as the caller found
	// it); zero reads until the read has caught up with the stream.
	Last uint64
	// From starts the read at this stream sequence instead (it overrides Since).
	From uint64
	// Batch is how many messages one pull asks for; zero asks for readerBatch. A read
	// that looks for one message near its start asks for few.
	Batch int
	// HeadersOnly delivers every message's headers without its payload (ReadPublished).
	HeadersOnly bool
}

// readerBatch is how many messages one pull asks for: each pull is a round trip, and
// on a loaded machine the round trips, not the server's reading, were most of the time
// a read of 600,000 messages took at 512 a pull.
const readerBatch = 4096

// readerInactive is how long an idle reader's consumer survives: the slot of a reader
// that died without deleting it is free again after this.
const readerInactive = time.Minute

// ReadStream hands the messages of stream selected by o to visit in stream order, one at
// a time, until visit returns false, the read passes o.Last or it has caught up with the
// stream. It acknowledges nothing and holds no durable state, so a read never disturbs
// the services: it takes a free reader slot (Readers), waiting while every slot is
// busy, reads through that slot's consumer and deletes the consumer when it is done.
//
// A message lost on the way (the consumer's sequence skips one: the client dropped
// messages it was too slow for, a connection was lost, the consumer's server went away)
// makes the reader start a new consumer at the message after the last one it delivered,
// so every selected message is handed over exactly once.
func ReadStream(ctx context.Context, js jetstream.JetStream, stream string, o ReadOptions, visit func(jetstream.Msg, *jetstream.MsgMetadata) bool) error {
	r := &reader{js: js, stream: stream, o: o}
	defer r.close()
	if err := r.open(ctx); err != nil {
		return err
	}
	// A new consumer that delivers nothing new in a row of attempts is not a passing
	// loss: give up rather than reopen forever.
	const maxReopens = 20
	reopens := 0
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read stream %s: %w", stream, err)
		}
		before := r.next
		done, err := r.fetch(ctx, visit)
		if err == nil && done {
			return nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("read stream %s: %w", stream, ctx.Err())
			}
			if r.next == before {
				reopens++
			} else {
				reopens = 0
			}
			if reopens > maxReopens {
				return fmt.Errorf("read stream %s: %w", stream, err)
			}
			if err := r.reopen(ctx); err != nil {
				return err
			}
		}
	}
}

// reader is one ReadStream: its slot's consumer and where it is.
type reader struct {
	js     jetstream.JetStream
	stream string
	o      ReadOptions
	name   string
	cons   jetstream.Consumer
	// next is the stream sequence after the last message delivered (0 before the
	// first); consumed is the consumer sequence of the last message delivered by cons.
	next, consumed uint64
	// silent counts the pulls in a row that found no responder.
	silent int
}

// open takes a free slot and creates its consumer at the read's start (after a loss:
// at next).
func (r *reader) open(ctx context.Context) error {
	cfg := jetstream.ConsumerConfig{
		// The description makes each reader's configuration its own: a create of a slot
		// another reader holds then differs from it and is refused (ErrConsumerExists)
		// instead of joining that reader's consumer.
		Description:       "tribunal stream reader " + nuid.Next(),
		FilterSubjects:    r.o.FilterSubjects,
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: readerInactive,
		// One replica in memory even on an R3 stream: a read holds no state worth a raft
		// group of its own (it acknowledges nothing; where it is lives in r.next). The
		// consumer then lives on one member, and losing that member loses it: pulls go
		// unanswered, the read replaces it (ReadStream's reopen) on a member still up,
		// after the last message delivered, so every message still comes once, in order
		// (TestReadStreamOutlivesItsServer: about 13 s on an in-process cluster).
		MemoryStorage: true,
		Replicas:      1,
		HeadersOnly:   r.o.HeadersOnly,
	}
	switch {
	case r.next > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.next
	case r.o.From > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, r.o.From
	case !r.o.Since.IsZero():
		since := r.o.Since
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	wait := 50 * time.Millisecond
	for {
		first := rand.IntN(Readers)
		for k := range Readers {
			cfg.Name = ReaderName((first + k) % Readers)
			var cons jetstream.Consumer
			err := RetryTransient(ctx, func(ctx context.Context) error {
				var err error
				cons, err = r.js.CreateConsumer(ctx, r.stream, cfg)
				return err
			})
			if errors.Is(err, jetstream.ErrConsumerExists) {
				continue // another reader holds this slot
			}
			if err != nil {
				return fmt.Errorf("read stream %s: reader consumer %s: %w", r.stream, cfg.Name, err)
			}
			r.name, r.cons, r.consumed, r.silent = cfg.Name, cons, 0, 0
			return nil
		}
		if err := ctxtime.Sleep(ctx, wait); err != nil {
			return fmt.Errorf("read stream %s: all %d readers are busy: %w", r.stream, Readers, err)
		}
		wait = min(2*wait, time.Second)
	}
}

// reopen replaces the consumer after a loss, starting after the last message delivered.
func (r *reader) reopen(ctx context.Context) error {
	r.close()
	return r.open(ctx)
}

// close deletes the slot's consumer, freeing the slot, even when ctx has ended.
func (r *reader) close() {
	if r.cons == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// A consumer that is already gone (expired, its server lost) frees its slot anyway;
	// one this fails to delete expires after readerInactive.
	_ = r.js.DeleteConsumer(ctx, r.stream, r.name)
	r.cons = nil
}

// fetch delivers one pull's messages. done reports that the read is over; an error
// means the consumer lost something or is gone and must be replaced.
func (r *reader) fetch(ctx context.Context, visit func(jetstream.Msg, *jetstream.MsgMetadata) bool) (done bool, err error) {
	n := readerBatch
	if r.o.Batch > 0 {
		n = r.o.Batch
	}
	batch, err := r.cons.Fetch(n, jetstream.FetchMaxWait(time.Second))
	if r.unanswered(ctx, err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("pull from %s: %w", r.name, err)
	}
	n = 0
	for m := range batch.Messages() {
		n++
		r.silent = 0
		md, err := m.Metadata()
		if err != nil {
			return false, fmt.Errorf("message metadata: %w", err)
		}
		if md.Sequence.Consumer != r.consumed+1 {
			return false, fmt.Errorf("reader %s skipped from delivery %d to %d", r.name, r.consumed, md.Sequence.Consumer)
		}
		r.consumed = md.Sequence.Consumer
		if r.o.Last > 0 && md.Sequence.Stream > r.o.Last {
			return true, nil
		}
		r.next = md.Sequence.Stream + 1
		if !visit(m, md) || (r.o.Last > 0 && md.Sequence.Stream >= r.o.Last) || md.NumPending == 0 {
			// Caught up: the rest of the pull would only wait out its timeout.
			return true, nil
		}
	}
	err = batch.Error()
	if n == 0 && r.unanswered(ctx, err) {
		return false, nil
	}
	if err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return false, fmt.Errorf("pull from %s: %w", r.name, err)
	}
	if n > 0 {
		return false, nil
	}
	// A pull that waited out its timeout without a message: nothing more matches, unless
	// the consumer still counts messages for it (a server too busy to answer within the
	// pull's wait, as a loaded machine's is, ended the read early).
	info, err := r.cons.Info(ctx)
	if err != nil {
		return false, fmt.Errorf("pull from %s: consumer info: %w", r.name, err)
	}
	return info.NumPending == 0, nil
}

// unanswered reports a pull to repeat: on a cluster the first pulls can overtake the
// news of a consumer just created ("no responders" for a moment). A consumer that is
// gone (deleted, expired) answers no pull either: after a few, the reader asks whether
// it still exists, and once it does not, or the silence has gone on for a while, the
// caller replaces it.
func (r *reader) unanswered(ctx context.Context, err error) bool {
	if !errors.Is(err, nats.ErrNoResponders) || r.silent >= 50 {
		return false
	}
	r.silent++
	if r.silent%3 == 0 {
		if _, err := r.cons.Info(ctx); errors.Is(err, jetstream.ErrConsumerNotFound) {
			return false
		}
	}
	return ctxtime.Sleep(ctx, 100*time.Millisecond) == nil
}
