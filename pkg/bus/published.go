package bus

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"math/bits"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Published is a set of message ids a stream holds, each with its stream sequence: the
// tail ReadPublished read, for AlreadyPublished.
type Published struct {
	// Stream is the stream the ids are stored in.
	Stream string
	// Window is how long after a publisher takes the set it is kept, and how long the
	// publisher keeps each id it adds (AlreadyPublished): the redelivery horizon.
	Window time.Duration
	// Event ids are 32 hex digits (events.NewID): kept as 16 bytes, a key without a
	// pointer, so a large set costs the collector nothing to mark. Other ids are kept as
	// they are.
	ids   map[[16]byte]uint64
	other map[string]uint64
}

// eventKey is an event id's 16 bytes, when id is one: 32 lowercase hex digits.
func eventKey(id string) (k [16]byte, ok bool) {
	if len(id) != 32 {
		return k, false
	}
	for i := range len(id) {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return k, false
		}
	}
	_, err := hex.Decode(k[:], []byte(id))
	return k, err == nil
}

// NewPublished returns an empty set of ids of stream kept for window: a publisher's index
// (AlreadyPublished) with nothing restored.
func NewPublished(stream string, window time.Duration) *Published {
	return &Published{Stream: stream, Window: window, ids: map[[16]byte]uint64{}, other: map[string]uint64{}}
}

func (s *Published) add(id string, seq uint64) {
	if k, ok := eventKey(id); ok {
		s.ids[k] = seq
		return
	}
	s.other[id] = seq
}

// Seq returns the stream sequence the id is stored at.
func (s *Published) Seq(id string) (uint64, bool) {
	if s == nil {
		return 0, false
	}
	if k, ok := eventKey(id); ok {
		seq, ok := s.ids[k]
		return seq, ok
	}
	seq, ok := s.other[id]
	return seq, ok
}

// Len is the number of ids in the set.
func (s *Published) Len() int {
	if s == nil {
		return 0
	}
	return len(s.ids) + len(s.other)
}

// liveGenerations is how many generations liveIDs splits its horizon into: an id is
// dropped between one horizon and one horizon and an eighth after it was added.
const liveGenerations = 8

// liveIDs is a publisher's index of the ids it has seen stored in one stream
// (AlreadyPublished): generations of pointer-free sets, each taking the ids added over
// one eighth of the horizon in a map (Published), sealed into a pointer-free
// open-addressing table when the next one starts, the oldest dropped whole once its
// newest id is a horizon old. Dropping a generation frees it at once, with no per-id
// bookkeeping (no time per id, no list to walk), so an id costs its key and sequence
// with some slack only: 34 B sealed, about 56 B in the map of the current generation,
// about 37 B on average (TestLiveIDsArePointerFree).
type liveIDs struct {
	stream  string
	horizon time.Duration
	now     func() time.Time
	mu      sync.Mutex
	// gens are oldest first; the last takes new ids. A restored set is a generation of
	// its own, never written to: the caller may share it.
	gens []liveGeneration
}

type liveGeneration struct {
	// start is when the generation took its first id; end is the time after which it
	// takes none, the time its ids' age is counted from.
	start, end time.Time
	set        *Published
	// restored marks a set handed over (AlreadyPublished), which takes no ids.
	restored bool
	// sealed are the event ids of a generation that takes no more (sealedIDs): a map
	// grown by doubling is about half empty after each growth (its tables split
	// together; a size hint is rounded up to a power of two as well), 56 B per id where
	// the ids themselves are 24.
	sealed *sealedIDs
}

// sealedIDs is an open-addressing table (linear probing) of event ids with their
// sequences, filled to sealedLoad: 34 B per id, no pointer. The ids are hashed with a
// seed of the table's own (maphash), so ids that are not uniform (a test's) probe as few
// slots as sha256 ones. An empty slot has sequence 0, which no stored message has.
type sealedIDs struct {
	slots []liveEntry
	n     int
	seed  maphash.Seed
}

type liveEntry struct {
	key [16]byte
	seq uint64
}

// sealedLoad is how full a sealed table is made: a lookup of an absent id (every new
// publish) probes 1/2 x (1 + 1/(1-0.7)^2), about 6 slots, in two or three cache lines.
const sealedLoad = 0.7

func (t *sealedIDs) home(k [16]byte) int {
	hi, _ := bits.Mul64(maphash.Bytes(t.seed, k[:]), uint64(len(t.slots)))
	return int(hi)
}

func (t *sealedIDs) get(k [16]byte) (uint64, bool) {
	for i := t.home(k); ; i++ {
		if i == len(t.slots) {
			i = 0
		}
		e := &t.slots[i]
		if e.seq == 0 {
			return 0, false
		}
		if e.key == k {
			return e.seq, true
		}
	}
}

// seal moves the generation's event ids into a sealed table, once it takes no more. Done
// under the index's lock, once a step (BenchmarkLiveIDs times it).
func (g *liveGeneration) seal() {
	if g.restored || g.sealed != nil {
		return
	}
	t := &sealedIDs{slots: make([]liveEntry, int(float64(len(g.set.ids))/sealedLoad)+1), n: len(g.set.ids), seed: maphash.MakeSeed()}
	for k, seq := range g.set.ids {
		i := t.home(k)
		for t.slots[i].seq != 0 {
			if i++; i == len(t.slots) {
				i = 0
			}
		}
		t.slots[i] = liveEntry{k, seq}
	}
	g.sealed, g.set.ids = t, nil
}

func newLiveIDs(restored *Published, now func() time.Time) *liveIDs {
	l := &liveIDs{stream: restored.Stream, horizon: restored.Window, now: now}
	t := now()
	if restored.Len() > 0 {
		l.gens = append(l.gens, liveGeneration{start: t, end: t, set: restored, restored: true})
	}
	return l
}

// step is how long a generation takes ids.
func (l *liveIDs) step() time.Duration { return max(l.horizon/liveGenerations, time.Nanosecond) }

// expire drops the generations whose every id is a horizon old. l.mu is held.
func (l *liveIDs) expire(now time.Time) {
	n := 0
	for n < len(l.gens) && now.Sub(l.gens[n].end) >= l.horizon {
		n++
	}
	if n > 0 {
		clear(l.gens[:n])
		l.gens = append(l.gens[:0], l.gens[n:]...)
	}
}

func (l *liveIDs) seq(id string) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(l.now())
	return l.find(id)
}

// find looks id up, newest generation first. l.mu is held.
func (l *liveIDs) find(id string) (uint64, bool) {
	k, event := eventKey(id)
	for i := len(l.gens) - 1; i >= 0; i-- {
		g := &l.gens[i]
		var seq uint64
		var ok bool
		switch {
		case !event:
			seq, ok = g.set.other[id]
		case g.sealed != nil:
			seq, ok = g.sealed.get(k)
		default:
			seq, ok = g.set.ids[k]
		}
		if ok {
			return seq, true
		}
	}
	return 0, false
}

// add records id as stored at seq, unless it is known already: its age counts from its
// first store, as the server's does.
func (l *liveIDs) add(id string, seq uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	l.expire(now)
	if _, ok := l.find(id); ok {
		return
	}
	if n := len(l.gens); n == 0 || l.gens[n-1].end.Before(now) || l.gens[n-1].restored {
		if n > 0 {
			l.gens[n-1].seal()
		}
		l.gens = append(l.gens, liveGeneration{start: now, end: now.Add(l.step()), set: NewPublished(l.stream, l.horizon)})
	}
	l.gens[len(l.gens)-1].set.add(id, seq)
}

// len is the number of ids held.
func (l *liveIDs) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.expire(l.now())
	n := 0
	for _, g := range l.gens {
		n += g.set.Len()
		if g.sealed != nil {
			n += g.sealed.n
		}
	}
	return n
}

// ReadPublished reads the message ids of stream's tail: every message stored within one
// window before its last message, the ids a handler redelivered after a restart can
// publish again (its earlier deliveries all fell within one window of the stop:
// RedeliveryHorizon). Only headers are read. A stream that does not exist yet, holds
// nothing, or whose durables are settled (see settled) gives an empty set.
//
// The server rebuilds its own duplicate index at start from the messages stored within
// one window of now, not of the stream's last message, so after a stop longer than the
// window it holds none of these ids, and after a shorter one it forgets each of them
// before the redeliveries are over; the set, taken by the services' publisher for one
// window from start (AlreadyPublished), covers both.
func ReadPublished(ctx context.Context, js jetstream.JetStream, stream string, window time.Duration) (*Published, error) {
	set := NewPublished(stream, window)
	var st jetstream.Stream
	err := RetryTransient(ctx, func(ctx context.Context) error {
		var err error
		st, err = js.Stream(ctx, stream)
		return err
	})
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return set, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the ids of stream %s's tail: %w", stream, err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return set, nil
	}
	if settled, err := settled(ctx, st); err != nil {
		return nil, fmt.Errorf("read the ids of stream %s's tail: %w", stream, err)
	} else if settled {
		return set, nil
	}
	o := ReadOptions{Since: state.LastTime.Add(-window), Last: state.LastSeq, HeadersOnly: true}
	err = ReadStream(ctx, js, stream, o, func(m jetstream.Msg, md *jetstream.MsgMetadata) bool {
		if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" {
			set.add(id, md.Sequence.Stream)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("read the ids of stream %s's tail (since %s): %w", stream, o.Since.Format(time.RFC3339), err)
	}
	return set, nil
}

// settled reports that no durable consumer of st has a message waiting, delivered and
// unacknowledged, or due for redelivery: every message delivered was acknowledged, so no
// handler runs again, and every event published was handled (a resumed submission then
// republishes nothing already stored: the jobs it sends are those never recorded). The
// tail's ids are then not needed, which spares a run started after a batch completed
// reading them (about 0.7 s for 100,000 ids on a loaded 2-vCPU machine). The readers'
// consumers (ReaderName) are not durables and do not count.
func settled(ctx context.Context, st jetstream.Stream) (bool, error) {
	readers := map[string]bool{}
	for _, n := range ReaderNames() {
		readers[n] = true
	}
	list := st.ListConsumers(ctx)
	for info := range list.Info() {
		if readers[info.Name] {
			continue
		}
		if info.NumPending > 0 || info.NumAckPending > 0 || info.NumRedelivered > 0 {
			return false, nil
		}
	}
	if err := list.Err(); err != nil {
		return false, fmt.Errorf("list its consumers: %w", err)
	}
	return true, nil
}
