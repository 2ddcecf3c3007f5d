package kind

import "bytes"

// Rows is a list of a manifest a Manifest built without holding it: each row's JSON,
// handed over in order by Each. A completion's encoder (pkg/rulebook) writes it a row at
// a time; json.Marshal writes it whole.
type Rows struct {
	each func(fn func(row []byte) error) error
}

// NewRows is a list whose rows each hands over in order.
func NewRows(each func(fn func(row []byte) error) error) Rows { return Rows{each: each} }

// Each calls fn with every row's JSON in order (valid during the call only), and returns
// the first error, fn's or the list's own.
func (r Rows) Each(fn func(row []byte) error) error {
	if r.each == nil {
		return nil
	}
	return r.each(fn)
}

// MarshalJSON implements json.Marshaler: the rows as one array.
func (r Rows) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('[')
	n := 0
	err := r.Each(func(row []byte) error {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
		b.Write(row)
		return nil
	})
	b.WriteByte(']')
	return b.Bytes(), err
}
