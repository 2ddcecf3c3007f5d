package events

import (
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

const digest = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestDecodeErrorsNameTheField(t *testing.T) {
	good, err := Encode(New(&JobBlocked{Kind: KindAB, ACID: "AC-1", Reason: "r"}, "team-a", "b1", "AC-1", 0, "", nil))
	if err != nil {
		t.Fatal(err)
	}
	mutate := func(f func(w *wire)) []byte {
		var w wire
		if err := msgpack.Unmarshal(good, &w); err != nil {
			t.Fatal(err)
		}
		f(&w)
		b, err := msgpack.Marshal(&w)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		name  string
		data  []byte
		is    error
		field string
	}{
		{"garbage", []byte("\xc1not msgpack"), ErrMalformed, "envelope"},
		{"empty", nil, ErrMalformed, "envelope"},
		{"unknown version", mutate(func(w *wire) { w.V = 99 }), ErrUnknownVersion, "envelope.v"},
		{"no version", mutate(func(w *wire) { w.V = 0 }), ErrMissingField, "envelope.v"},
		{"missing tenant", mutate(func(w *wire) { w.Tenant = "" }), ErrMissingField, "envelope.tenant"},
		{"dotted tenant", mutate(func(w *wire) { w.Tenant = "a.b" }), ErrInvalidField, "envelope.tenant"},
		{"unknown type", mutate(func(w *wire) { w.Type = "job.exploded" }), ErrUnknownType, "envelope.type"},
		{"missing id", mutate(func(w *wire) { w.ID = "" }), ErrMissingField, "envelope.id"},
		{"missing batch", mutate(func(w *wire) { w.BatchID = "" }), ErrMissingField, "envelope.batch_id"},
		{"missing data", mutate(func(w *wire) { w.Data = nil }), ErrMissingField, "data"},
		{"bad data", mutate(func(w *wire) { w.Data, _ = msgpack.Marshal("not an object") }), ErrMalformed, "data"},
		{"chain link without digest", mutate(func(w *wire) { w.Chain = []string{"0123456789abcdef0123456789abcdef"} }), ErrInvalidField, "envelope.chain[0]"},
		{"chain link with a short digest", mutate(func(w *wire) { w.Chain = []string{"0123456789abcdef0123456789abcdef:abc"} }), ErrInvalidField, "envelope.chain[0]"},
		{"chain too long", mutate(func(w *wire) {
			for i := 0; i <= MaxChain; i++ {
				w.Chain = append(w.Chain, Link("0123456789abcdef0123456789abcdef", digest))
			}
		}), ErrInvalidField, "envelope.chain"},
		{"missing reason", mutate(func(w *wire) {
			b, _ := msgpack.Marshal(&JobBlocked{Kind: KindAB, ACID: "AC-1"})
			w.Data = b
		}), ErrMissingField, "reason"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Decode(c.data)
			if !errors.Is(err, c.is) {
				t.Fatalf("got %v, want %v", err, c.is)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("got field error %v, want field %q", err, c.field)
			}
			if !strings.Contains(err.Error(), c.field) {
				t.Fatalf("message %q does not name %q", err, c.field)
			}
			if !IsDecodeError(err) {
				t.Fatal("not classified as a decode error")
			}
		})
	}
}
