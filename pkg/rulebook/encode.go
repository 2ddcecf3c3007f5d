package rulebook

import (
	"crypto/sha256"
	"encoding"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"io"
	"reflect"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind"
)

// marshalIndent is json.MarshalIndent(v, "", "  ") without its copies: MarshalIndent
// copies the encoded value out of the encoder, then indents it into a buffer twice its
// size, so a 100,000-job manifest (about 90 MB) was held four times over at once. Here
// the value is encoded once (json.Encoder hands its compact bytes to the indenter), the
// indented size counted, and the value indented straight into a buffer of that size.
func marshalIndent(v any) ([]byte, error) {
	var out sliceWriter
	ind := &indenter{w: &out, size: func(n int) { out.b = make([]byte, 0, n) }}
	if err := json.NewEncoder(ind).Encode(v); err != nil {
		return nil, err
	}
	return out.b, nil
}

// hashIndented encodes v as marshalIndent would and returns its indented form's SHA-256
// and size without holding it; compact, when set, is written the compact encoding (with
// whitespace between some of its values). A manifest is a struct whose lists hold a row
// per job, so it is encoded a field at a time and its lists an element at a time
// (streamJSON): a 100,000-job manifest never exists whole, encoded or indented.
func hashIndented(v any, compact io.Writer) (events.Blob, error) {
	h := sha256.New()
	var n countWriter
	ind := &indenter{w: io.MultiWriter(h, &n), compact: compact}
	if err := streamJSON(ind, v); err != nil {
		return events.Blob{}, err
	}
	return events.Blob{SHA256: hex.EncodeToString(h.Sum(nil)), MediaType: "application/json", Size: n.n}, nil
}

// streamJSON writes v to w as json.Marshal would, but piecewise: a plain struct (no
// embedded fields, no ",string" options, no marshaler of its own) a field at a time, each
// slice field an element at a time. Anything else is encoded whole.
func streamJSON(w io.Writer, v any) error {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer && !rv.IsNil() && !marshals(rv.Type()) {
		rv = rv.Elem()
	}
	fields, ok := plainFields(rv)
	if !ok {
		return writeJSON(w, v)
	}
	if _, err := io.WriteString(w, "{"); err != nil {
		return err
	}
	first := true
	for _, f := range fields {
		fv := rv.Field(f.index)
		if f.omitEmpty && emptyValue(fv) {
			continue
		}
		sep := ","
		if first {
			sep, first = "", false
		}
		name, err := json.Marshal(f.name)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(w, sep+string(name)+":"); err != nil {
			return err
		}
		if err := writeField(w, fv); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "}")
	return err
}

// writeField writes one field's value: a slice element by element, a manifest's rows
// (kind.Rows) row by row.
func writeField(w io.Writer, fv reflect.Value) error {
	if rows, ok := fv.Interface().(kind.Rows); ok {
		return writeRows(w, rows)
	}
	if fv.Kind() != reflect.Slice || fv.IsNil() || fv.Type().Elem().Kind() == reflect.Uint8 || marshals(fv.Type()) {
		return writeJSON(w, fv.Interface())
	}
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	for i := 0; i < fv.Len(); i++ {
		if i > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		if err := writeJSON(w, fv.Index(i).Interface()); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, "]")
	return err
}

// writeRows writes rows as the array json.Marshal writes of them, a row at a time.
func writeRows(w io.Writer, rows kind.Rows) error {
	if _, err := io.WriteString(w, "["); err != nil {
		return err
	}
	n := 0
	err := rows.Each(func(row []byte) error {
		if n > 0 {
			if _, err := io.WriteString(w, ","); err != nil {
				return err
			}
		}
		n++
		_, err := w.Write(row)
		return err
	})
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, "]")
	return err
}

// writeJSON writes v as json.Marshal encodes it (json.Encoder, less its final newline,
// which the indenter drops).
func writeJSON(w io.Writer, v any) error {
	return json.NewEncoder(w).Encode(v)
}

type plainField struct {
	name      string
	index     int
	omitEmpty bool
}

// plainFields lists a struct's encoded fields in order, as encoding/json does; ok is false
// for anything but a struct encoding/json handles without options streamJSON lacks.
func plainFields(rv reflect.Value) ([]plainField, bool) {
	if rv.Kind() != reflect.Struct || marshals(rv.Type()) || marshals(reflect.PointerTo(rv.Type())) {
		return nil, false
	}
	t := rv.Type()
	var out []plainField
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if sf.Anonymous {
			return nil, false
		}
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if name == "" {
			name = sf.Name
		}
		omit := false
		for _, o := range strings.Split(opts, ",") {
			switch o {
			case "omitempty":
				omit = true
			case "", "omitzero":
				if o == "omitzero" {
					return nil, false
				}
			default:
				return nil, false // ",string" and options to come
			}
		}
		out = append(out, plainField{name: name, index: i, omitEmpty: omit})
	}
	return out, true
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

func marshals(t reflect.Type) bool { return t.Implements(jsonMarshaler) || t.Implements(textMarshaler) }

// emptyValue is encoding/json's omitempty test.
func emptyValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

// indenter indents the compact JSON written to it as json.Indent does with no prefix and
// two spaces, dropping the whitespace between values (the encoder's final newline), and
// writes it to w. size, when set, is told the indented size of each write first; compact,
// when set, is written what the indenter is written.
type indenter struct {
	st      indentState
	w       io.Writer
	size    func(int)
	compact io.Writer
	// buf is the buffer every write is indented through: the manifest is written a
	// field at a time, and a buffer each would be gigabytes of garbage for 100,000 jobs.
	buf []byte
}

// indentState is where the indenter is in the document; it carries over between writes.
type indentState struct {
	inString, escaped, pending bool
	depth                      int
}

func (in *indenter) Write(p []byte) (int, error) {
	if in.compact != nil {
		if _, err := in.compact.Write(p); err != nil {
			return 0, err
		}
	}
	if in.size != nil {
		st := in.st
		var n countWriter
		if err := st.indent(p, &n, &in.buf); err != nil {
			return 0, err
		}
		in.size(int(n.n))
	}
	if err := in.st.indent(p, in.w, &in.buf); err != nil {
		return 0, err
	}
	return len(p), nil
}

// indent writes p indented to w, through a small buffer (scratch, kept for the next
// write).
func (s *indentState) indent(p []byte, w io.Writer, scratch *[]byte) error {
	if cap(*scratch) < 32<<10 {
		*scratch = make([]byte, 0, 32<<10)
	}
	buf := (*scratch)[:0]
	defer func() { *scratch = buf[:0] }()
	var err error
	flush := func() {
		if err == nil && len(buf) > 0 {
			_, err = w.Write(buf)
		}
		buf = buf[:0]
	}
	newline := func() {
		buf = append(buf, '\n')
		for i := 0; i < s.depth; i++ {
			buf = append(buf, ' ', ' ')
		}
	}
	for _, c := range p {
		if len(buf) >= 31<<10 {
			flush()
		}
		if s.inString {
			buf = append(buf, c)
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
			buf = append(buf, c)
		case '{', '[':
			// The newline waits for the first element, so empty ones stay {} and [].
			s.pending = true
			buf = append(buf, c)
		case ',':
			buf = append(buf, c)
			newline()
		case ':':
			buf = append(buf, c, ' ')
		case '}', ']':
			if s.pending {
				s.pending = false
			} else {
				s.depth--
				newline()
			}
			buf = append(buf, c)
		default:
			buf = append(buf, c)
		}
	}
	flush()
	return err
}

type sliceWriter struct{ b []byte }

func (w *sliceWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

type countWriter struct{ n int64 }

func (w *countWriter) Write(p []byte) (int, error) {
	w.n += int64(len(p))
	return len(p), nil
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

// eachLinkBytes is eachLink handing each link as bytes written into *buf, which is
// reused: fn must not keep them.
func eachLinkBytes(packed []byte, buf *[]byte, fn func([]byte)) {
	for len(packed) > 0 {
		b := (*buf)[:0]
		tag := packed[0]
		packed = packed[1:]
		if tag == 0 {
			b = hex.AppendEncode(b, packed[:16])
			b = append(b, ':')
			b = hex.AppendEncode(b, packed[16:48])
			packed = packed[48:]
		} else {
			n, k := binary.Uvarint(packed)
			b = append(b, packed[k:k+int(n)]...)
			packed = packed[k+int(n):]
		}
		*buf = b
		fn(b)
	}
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
