package bounds

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// JSON checks that data is exactly one JSON value within l, before a decoder builds it.
func JSON(data []byte, l Limits) error {
	w := jsonWalker{dec: json.NewDecoder(bytes.NewReader(data)), c: counter{l: l}}
	w.dec.UseNumber()
	tok, err := w.token()
	if err != nil {
		return err
	}
	if err := w.value(tok, 0); err != nil {
		return err
	}
	if _, err := w.dec.Token(); err != io.EOF {
		return w.fail(Syntax, "data after the value")
	}
	return nil
}

type jsonWalker struct {
	dec  *json.Decoder
	c    counter
	path path
}

func (w *jsonWalker) fail(broke Limit, reason string) error {
	return &Error{Format: "json", Path: w.path.String(), Offset: w.dec.InputOffset(), Broke: broke, Reason: reason}
}

func (w *jsonWalker) token() (json.Token, error) {
	tok, err := w.dec.Token()
	if errors.Is(err, io.EOF) {
		return nil, w.fail(Syntax, "the document ends where a value should start")
	}
	if err != nil {
		return nil, w.fail(Syntax, err.Error())
	}
	return tok, nil
}

// value walks the value tok starts. JSON gives no count up front, so a container is
// admitted element by element: Items and Total are checked as each one is met.
func (w *jsonWalker) value(tok json.Token, depth int) error {
	d, ok := tok.(json.Delim)
	if !ok {
		return nil
	}
	if broke, why := w.c.container(0, depth+1, ""); broke != "" {
		return w.fail(broke, why)
	}
	isMap := d == '{'
	kind := "an array"
	if isMap {
		kind = "a map"
	}
	w.path = append(w.path, segment{isKey: isMap})
	n := 0
	for w.dec.More() {
		seg := &w.path[len(w.path)-1]
		n++
		if !isMap {
			seg.index = n - 1
		}
		if w.c.l.Items > 0 && n > w.c.l.Items {
			return w.fail(Items, fmt.Sprintf("%s of more than %d elements, at most %d", kind, w.c.l.Items, w.c.l.Items))
		}
		if w.c.total++; w.c.l.Total > 0 && w.c.total > w.c.l.Total {
			return w.fail(Total, fmt.Sprintf("more than %d elements in all, at most %d", w.c.l.Total, w.c.l.Total))
		}
		if isMap {
			key, err := w.token()
			if err != nil {
				return err
			}
			k, _ := key.(string)
			seg.key = []byte(k)
		}
		tok, err := w.token()
		if err != nil {
			return err
		}
		if err := w.value(tok, depth+1); err != nil {
			return err
		}
	}
	if _, err := w.token(); err != nil { // the closing delimiter
		return err
	}
	w.path = w.path[:len(w.path)-1]
	return nil
}
