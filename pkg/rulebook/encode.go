package rulebook

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// marshalIndent is json.MarshalIndent(v, "", "  ") without its copies: MarshalIndent
// copies the encoded value out of the encoder, then indents it into a buffer twice its
// size, so a 100,000-job manifest (about 90 MB) was held four times over at once. Here
// the value is encoded once (json.Encoder hands its compact bytes to the indenter) and
// indented straight into a buffer of the exact size.
func marshalIndent(v any) ([]byte, error) {
	var ind indenter
	if err := json.NewEncoder(&ind).Encode(v); err != nil {
		return nil, err
	}
	return ind.out, nil
}

// indenter indents the compact JSON written to it as json.Indent does with no prefix and
// two spaces, dropping the whitespace between values (the encoder's final newline).
type indenter struct {
	out []byte
	st  indentState
}

// indentState is where the indenter is in the document; it carries over between writes.
type indentState struct {
	inString, escaped, pending bool
	depth                      int
}

func (w *indenter) Write(p []byte) (int, error) {
	st := w.st
	_, n := st.run(p, nil, true)
	if w.out == nil {
		w.out = make([]byte, 0, n)
	}
	w.out, _ = w.st.run(p, w.out, false)
	return len(p), nil
}

// run indents p onto dst and returns it; counting, it only counts the bytes it would
// append.
func (s *indentState) run(p, dst []byte, counting bool) ([]byte, int) {
	n := 0
	emit := func(b ...byte) {
		if counting {
			n += len(b)
			return
		}
		dst = append(dst, b...)
	}
	newline := func() {
		if counting {
			n += 1 + 2*s.depth
			return
		}
		dst = append(dst, '\n')
		for i := 0; i < s.depth; i++ {
			dst = append(dst, ' ', ' ')
		}
	}
	for _, c := range p {
		if s.inString {
			emit(c)
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if s.pending && c != '}' && c != ']' {
			s.pending = false
			s.depth++
			newline()
		}
		switch c {
		case '"':
			s.inString = true
			emit(c)
		case '{', '[':
			// The newline waits for the first element, so empty ones stay {} and [].
			s.pending = true
			emit(c)
		case ',':
			emit(c)
			newline()
		case ':':
			emit(c, ' ')
		case '}', ']':
			if s.pending {
				s.pending = false
			} else {
				s.depth--
				newline()
			}
			emit(c)
		default:
			emit(c)
		}
	}
	return dst, n
}

// packLinks keeps a job's digest-chain links compactly while a completion folds: a link
// of a deterministic event id is 48 bytes (its id and digest, raw) instead of a 97-byte
// string; any other is kept as it is, length-prefixed.
func packLinks(links []string) []byte {
	var out []byte
	for _, l := range links {
		if id, sum, ok := events.ParseLink(l); ok && len(id) == 32 {
			bid, err1 := hex.DecodeString(id)
			bsum, err2 := hex.DecodeString(sum)
			if err1 == nil && err2 == nil && strings.ToLower(id) == id {
				out = append(out, 0)
				out = append(append(out, bid...), bsum...)
				continue
			}
		}
		out = append(out, 1)
		out = binary.AppendUvarint(out, uint64(len(l)))
		out = append(out, l...)
	}
	return out
}

// eachLink calls fn with every link packLinks packed, in order.
func eachLink(packed []byte, fn func(string)) {
	for len(packed) > 0 {
		tag := packed[0]
		packed = packed[1:]
		if tag == 0 {
			fn(events.Link(hex.EncodeToString(packed[:16]), hex.EncodeToString(packed[16:48])))
			packed = packed[48:]
			continue
		}
		n, k := binary.Uvarint(packed)
		fn(string(packed[k : k+int(n)]))
		packed = packed[k+int(n):]
	}
}
