package bus

import (
	"context"
	"strconv"
	"strings"

	"github.com/ThreeDotsLabs/watermill/message"
)

// MetaChainSeqs is the header naming where the stream holds the events of a message's
// digest chain (events.Envelope.Chain): their stream sequences, in the chain's order,
// comma-separated. The stages that chain (RouterConfig.Chain) set it on their outputs
// from their input's, so the aggregator can keep in a job record where each event its
// outcome rests on is (records.Job.Positions), and `tribunal audit --job` reads those
// messages by sequence instead of passing over the stream. It is a hint, never trusted:
// the audit checks that the message at each position is the event the chain names.
const MetaChainSeqs = "tribunal_chain_seqs"

type positionKey struct{}

// position is where the event being handled is: its own stream sequence and those of
// its chain's events (nil when its header says none, or says a chain of another length).
type position struct {
	seq   uint64
	chain []uint64
}

// WithPosition records where the stream holds the event being handled (see Position).
func WithPosition(ctx context.Context, seq uint64, chain []uint64) context.Context {
	return context.WithValue(ctx, positionKey{}, position{seq, chain})
}

// Position is the stream sequence of the event being handled and those of its digest
// chain's events (MetaChainSeqs), 0 and nil when they are not known (the handler was
// called directly, the message came without the header).
func Position(ctx context.Context) (seq uint64, chain []uint64) {
	p, _ := ctx.Value(positionKey{}).(position)
	return p.seq, p.chain
}

// ParseChainSeqs reads a MetaChainSeqs header; it returns nil unless it holds exactly
// want positive sequences, so a header that does not fit its chain says nothing.
func ParseChainSeqs(h string, want int) []uint64 {
	if h == "" || want == 0 || want > 64 {
		return nil
	}
	parts := strings.Split(h, ",")
	if len(parts) != want {
		return nil
	}
	out := make([]uint64, len(parts))
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 64)
		if err != nil || n == 0 {
			return nil
		}
		out[i] = n
	}
	return out
}

// FormatChainSeqs writes a MetaChainSeqs header.
func FormatChainSeqs(seqs []uint64) string {
	var b strings.Builder
	for i, s := range seqs {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(s, 10))
	}
	return b.String()
}

// messagePosition is where an incoming message is, from the metadata the subscriber
// set (MetaStreamSeq) and its header, for an event whose chain has chainLen links.
func messagePosition(msg *message.Message, chainLen int) (uint64, []uint64) {
	seq, err := strconv.ParseUint(msg.Metadata.Get(MetaStreamSeq), 10, 64)
	if err != nil {
		return 0, nil
	}
	return seq, ParseChainSeqs(msg.Metadata.Get(MetaChainSeqs), chainLen)
}

// chainOutputs sets on each output the positions of its chain: the input's chain's
// followed by the input's own, when all of them are known.
func chainOutputs(out []*message.Message, seq uint64, chain []uint64, chainLen int) {
	if seq == 0 || len(chain) != chainLen {
		return
	}
	h := FormatChainSeqs(append(append(make([]uint64, 0, len(chain)+1), chain...), seq))
	for _, m := range out {
		m.Metadata.Set(MetaChainSeqs, h)
	}
}
