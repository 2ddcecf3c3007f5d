// Package body reads a POST /v1/events body of the ingress into each event's wire bytes,
// bounded before anything is allocated for it (pkg/bounds). It is a package of its own,
// with only the event schema below it, so its fuzz test runs at the fuzzer's pace.
package body

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/tribunal-dev/tribunal/pkg/bounds"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// The media types of a body.
const (
	// MediaMsgpack is a msgpack array of events, each the wire bytes events.Encode
	// writes (a msgpack bin).
	MediaMsgpack = "application/msgpack"
	// MediaJSON is {"events": [...]}: each event a JSON object with the wire form's
	// field names. The time is the ingress's: a "time" is dropped.
	MediaJSON = "application/json"
)

// MaxEvents bounds the events of one request.
const MaxEvents = 5000

// ErrMediaType is a body of a media type other than MediaMsgpack and MediaJSON.
var ErrMediaType = errclass.New(errclass.Refused, "unsupported media type")

// The limits bound a POST /v1/events body before it is decoded: an array (or, in JSON,
// {"events": [...]}) of at most MaxEvents events, each a msgpack bin in the msgpack
// form. The events inside are bounded again, each by bounds.Event, when events.Decode
// reads them.
var (
	msgpackRequest = bounds.Limits{Depth: 1, Items: MaxEvents, Total: MaxEvents}
	jsonRequest    = bounds.Limits{Depth: 2 + bounds.Event.Depth, Items: max(MaxEvents, bounds.Event.Items)}
)

// ErrTooManyEvents is a request of more than MaxEvents events.
var ErrTooManyEvents = fmt.Errorf("a request carries at most %d events", MaxEvents)

// Read splits a POST /v1/events body into each event's wire bytes. The body is
// read whole (MaxBytesReader bounds it) and checked by bounds before it is decoded: a
// header claiming more elements than the body holds is refused without allocating for
// the claim.
func Read(contentType string, r io.Reader) ([][]byte, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = ""
	}
	if mt != MediaMsgpack && mt != "application/x-msgpack" && mt != MediaJSON {
		return nil, fmt.Errorf("%w %q: send %s or %s", ErrMediaType, contentType, MediaMsgpack, MediaJSON)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	if mt == MediaJSON {
		return jsonEvents(data)
	}
	if err := bounds.Msgpack(data, msgpackRequest); err != nil {
		return nil, requestBoundsErr("a msgpack array of encoded events", err)
	}
	var raw [][]byte
	if err := msgpack.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("body: want a msgpack array of encoded events: %w", err)
	}
	return raw, nil
}

// requestBoundsErr names what broke a request's bounds: too many events is its own
// error (413), the rest is a malformed body.
func requestBoundsErr(want string, err error) error {
	var be *bounds.Error
	if errors.As(err, &be) && be.Broke == bounds.Items && be.Path == "" {
		return fmt.Errorf("body: %w: %s", ErrTooManyEvents, be.Reason)
	}
	return fmt.Errorf("body: want %s: %w", want, err)
}

// jsonEvents reads {"events": [...]}, each event a JSON object with the wire form's
// field names, and returns each one's wire bytes: the JSON is re-encoded as msgpack and
// read by the same decoder as any event.
func jsonEvents(data []byte) ([][]byte, error) {
	if err := bounds.JSON(data, jsonRequest); err != nil {
		return nil, fmt.Errorf("body: want {\"events\": [...]}: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var req struct {
		Events []json.RawMessage `json:"events"`
	}
	if err := dec.Decode(&req); err != nil {
		return nil, fmt.Errorf("body: want {\"events\": [...]}: %w", err)
	}
	if len(req.Events) > MaxEvents {
		return nil, fmt.Errorf("body: %w: %d events", ErrTooManyEvents, len(req.Events))
	}
	out := make([][]byte, len(req.Events))
	for i, rawEv := range req.Events {
		if err := bounds.JSON(rawEv, bounds.Event); err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		var ev map[string]any
		d := json.NewDecoder(bytes.NewReader(rawEv))
		d.UseNumber()
		if err := d.Decode(&ev); err != nil {
			return nil, fmt.Errorf("event %d: want a JSON object: %w", i, err)
		}
		delete(ev, "time") // the ingress stamps the time
		data, err := msgpack.Marshal(numbers(ev))
		if err != nil {
			return nil, fmt.Errorf("event %d: %w", i, err)
		}
		out[i] = data
	}
	return out, nil
}

// numbers turns JSON numbers into integers where they are, so the msgpack decoder reads
// them into the wire form's integer fields.
func numbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	}
	return v
}
