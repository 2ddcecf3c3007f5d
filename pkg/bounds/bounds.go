// Package bounds checks a document from outside before a decoder allocates for it.
//
// A msgpack header claims how many elements follow, and the msgpack decoder allocates the
// claimed count before it reads one element: five bytes (an array32 header claiming
// 4,294,967,295 elements) ended the shared ingress with "out of memory". The checks here
// walk the raw bytes without allocating and refuse, before any decoder runs, a document
// whose containers claim more elements than the bytes that follow could hold, nest deeper
// than the schema ever does, or hold more elements than the limits allow. After a document
// passes, every count a decoder allocates for is one that is really there, so what it
// allocates is bounded by the document's size and Limits, never by a claim.
//
// JSON has no claimed counts, but nesting and element counts still cost memory in
// proportion to what a decoder builds: JSON checks the same limits.
package bounds

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// Limits bound one document. A zero field is no limit of that sort.
type Limits struct {
	// Depth is the deepest nesting of arrays and maps (a scalar document is depth 0).
	Depth int
	// Items bounds the elements of one array or the pairs of one map.
	Items int
	// Total bounds the elements and pairs of all containers together, which bounds what
	// a decoder allocates for them (a slice of a large struct costs its size per element,
	// even for an element encoded in one byte).
	Total int
}

// Event are the limits of one event's wire bytes (events.Decode, every consumer and the
// ingress). No event tribunal writes nests deeper than 8 or lists more than a few
// thousand elements (a batch of 1,000,000 ACs has 245 plan pages; a chain has at most 16
// links); the limits leave room above that and still bound a 1 MiB event's decoding to a
// few MiB.
var Event = Limits{Depth: 24, Items: 1 << 14, Total: 1 << 17}

// ErrExceeded is wrapped by every *Error: the document was refused before decoding.
var ErrExceeded = errclass.New(errclass.Refused, "document refused before decoding")

// Error says where a document broke a limit or could not be walked.
type Error struct {
	// Format is "msgpack" or "json".
	Format string
	// Path is where, as keys and indexes from the top ("data.cases[3]"); "" is the top.
	Path string
	// Offset is the byte offset of the value that broke the limit.
	Offset int64
	// Broke is the limit the document broke.
	Broke Limit
	// Reason says what was wrong, with the figures.
	Reason string
}

// Limit names what a document broke.
type Limit string

// The limits a document can break.
const (
	// Claim: a header claims more than the bytes that follow hold.
	Claim Limit = "claim"
	// Depth, Items and Total are the Limits fields.
	Depth Limit = "depth"
	Items Limit = "items"
	Total Limit = "total"
	// Syntax: the bytes are not one well-formed value.
	Syntax Limit = "syntax"
)

// Error implements error.
func (e *Error) Error() string {
	at := e.Path
	if at == "" {
		at = "the top"
	}
	return fmt.Sprintf("%s at %s (byte %d): %s", e.Format, at, e.Offset, e.Reason)
}

// Unwrap implements errors.Unwrap.
func (e *Error) Unwrap() error { return ErrExceeded }

// path is the walker's position: map keys and array indexes, kept as segments and only
// formatted when an error is reported.
type path []segment

type segment struct {
	key   []byte // a map key, not copied out of the document
	index int
	isKey bool
}

func (p path) String() string {
	var b strings.Builder
	for _, s := range p {
		if s.isKey {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.Write(s.key)
			continue
		}
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(s.index))
		b.WriteByte(']')
	}
	return b.String()
}

// counter enforces Items and Total as containers are met.
type counter struct {
	l     Limits
	total int
}

// container admits a container of n elements (pairs for a map) at depth, or says which
// limit it breaks and how.
func (c *counter) container(n, depth int, kind string) (Limit, string) {
	if c.l.Depth > 0 && depth > c.l.Depth {
		return Depth, fmt.Sprintf("nested %d deep, at most %d", depth, c.l.Depth)
	}
	if c.l.Items > 0 && n > c.l.Items {
		return Items, fmt.Sprintf("%s of %d elements, at most %d", kind, n, c.l.Items)
	}
	c.total += n
	if c.l.Total > 0 && c.total > c.l.Total {
		return Total, fmt.Sprintf("more than %d elements in all, at most %d", c.total, c.l.Total)
	}
	return "", ""
}
