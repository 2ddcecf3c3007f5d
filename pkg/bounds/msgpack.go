package bounds

import (
	"fmt"

	"github.com/tinylib/msgp/msgp"
)

// Msgpack checks that data is exactly one msgpack value within l. It allocates nothing
// for a document that passes. Every array and map header's count must fit in the bytes
// that follow it (an element takes at least one byte, a pair two), every string, binary
// and extension's length too, so a claim larger than the rest of the document is refused
// at once, whatever it claims.
func Msgpack(data []byte, l Limits) error {
	w := msgpackWalker{data: data, c: counter{l: l}}
	rest, err := w.value(data, 0)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return w.fail(rest, Syntax, fmt.Sprintf("%d bytes after the value", len(rest)))
	}
	return nil
}

type msgpackWalker struct {
	data []byte
	c    counter
	// segs[:depth] is the position; a fixed array rather than a slice, so a walk
	// allocates nothing (a path deeper than it is cut short in errors).
	segs  [32]segment
	depth int
}

func (w *msgpackWalker) push(s segment) *segment {
	w.depth++
	if w.depth > len(w.segs) {
		return &segment{}
	}
	w.segs[w.depth-1] = s
	return &w.segs[w.depth-1]
}

func (w *msgpackWalker) pop() { w.depth-- }

func (w *msgpackWalker) fail(at []byte, broke Limit, reason string) error {
	p := path(w.segs[:min(w.depth, len(w.segs))]).String()
	return &Error{Format: "msgpack", Path: p, Offset: int64(len(w.data) - len(at)), Broke: broke, Reason: reason}
}

func (w *msgpackWalker) value(b []byte, depth int) ([]byte, error) {
	switch msgp.NextType(b) {
	case msgp.InvalidType:
		if len(b) == 0 {
			return b, w.fail(b, Syntax, "the document ends where a value should start")
		}
		return b, w.fail(b, Syntax, fmt.Sprintf("byte 0x%02x starts no msgpack value", b[0]))
	case msgp.ArrayType:
		n, rest, err := msgp.ReadArrayHeaderBytes(b)
		if err != nil {
			return b, w.fail(b, Claim, "array header: "+err.Error())
		}
		if int64(n) > int64(len(rest)) {
			return b, w.fail(b, Claim, fmt.Sprintf("an array claims %d elements, %d bytes follow", n, len(rest)))
		}
		if broke, why := w.c.container(int(n), depth+1, "an array"); broke != "" {
			return b, w.fail(b, broke, why)
		}
		seg := w.push(segment{})
		for i := range int(n) {
			seg.index = i
			if rest, err = w.value(rest, depth+1); err != nil {
				return b, err
			}
		}
		w.pop()
		return rest, nil
	case msgp.MapType:
		n, rest, err := msgp.ReadMapHeaderBytes(b)
		if err != nil {
			return b, w.fail(b, Claim, "map header: "+err.Error())
		}
		if 2*int64(n) > int64(len(rest)) {
			return b, w.fail(b, Claim, fmt.Sprintf("a map claims %d pairs, %d bytes follow", n, len(rest)))
		}
		if broke, why := w.c.container(int(n), depth+1, "a map"); broke != "" {
			return b, w.fail(b, broke, why)
		}
		seg := w.push(segment{isKey: true})
		for range int(n) {
			// A string key names the path; the value after it is walked like any other.
			if key, after, err := msgp.ReadStringZC(rest); err == nil {
				seg.key, rest = key, after
			} else {
				seg.key = []byte("?")
				if rest, err = w.value(rest, depth+1); err != nil {
					return b, err
				}
			}
			if rest, err = w.value(rest, depth+1); err != nil {
				return b, err
			}
		}
		w.pop()
		return rest, nil
	}
	// A scalar: Skip checks its length against the bytes there are.
	rest, err := msgp.Skip(b)
	if err != nil {
		return b, w.fail(b, Claim, err.Error())
	}
	return rest, nil
}
