package events

import (
	"errors"
	"fmt"
	"maps"
	"sync/atomic"

	"github.com/vmihailenco/msgpack/v5"
)

// KindWire is the wire schema of a kind, which every kind registers (RegisterKind): how
// to check its part of a job spec, of a judge-facing gates.done and of a verdict, and
// the types of its typed parts (KindPart), if it has them; a kind without them carries
// its own msgpack documents in Part instead. An error that names no field is reported
// as one of "part".
type KindWire struct {
	Spec    func(JobSpec) error
	Gates   func(*GatesDone) error
	Verdict func(*VerdictEmitted) error
	Parts   Parts
}

// registered holds the registered kinds' wire schemas, swapped whole on a registration:
// every event decoded reads it.
var registered atomic.Pointer[map[Kind]wireKind]

// RegisterKind adds a kind's wire schema and returns the function that takes it out
// again. The kinds that ship call it as their wire package is initialised (ab's in
// pkg/kind/ab), so every program that can name a kind's part reads its events; the
// registry of kinds (pkg/registry) calls it for a kind that brings its own (kind.Wired). It
// panics on a kind the wire schema knows already: two definitions of one kind's events
// cannot both hold.
func RegisterKind(k Kind, w KindWire) (unregister func()) {
	if k == "" || KnownKind(k) {
		panic(fmt.Sprintf("events: kind %q is registered already", k))
	}
	wk := wireKind{
		spec:        func(s JobSpec) error { return asPartError(w.Spec(s)) },
		gates:       func(p *GatesDone) error { return asPartError(w.Gates(p)) },
		verdict:     func(p *VerdictEmitted) error { return asPartError(w.Verdict(p)) },
		parts:       w.Parts,
		jsonHolders: jsonHolders(w.Parts),
	}
	for {
		prev := registered.Load()
		next := map[Kind]wireKind{}
		if prev != nil {
			next = maps.Clone(*prev)
		}
		next[k] = wk
		if registered.CompareAndSwap(prev, &next) {
			break
		}
	}
	return func() {
		for {
			prev := registered.Load()
			next := maps.Clone(*prev)
			delete(next, k)
			if registered.CompareAndSwap(prev, &next) {
				return
			}
		}
	}
}

func registeredWire(k Kind) (wireKind, bool) {
	m := registered.Load()
	if m == nil {
		return wireKind{}, false
	}
	w, ok := (*m)[k]
	return w, ok
}

// asPartError makes a registered kind's error a field error, as every Decode failure is.
func asPartError(err error) error {
	if err == nil || isFieldError(err) {
		return err
	}
	return invalid("part", err.Error())
}

// isFieldError is apart from asPartError so that the target errors.As needs is allocated
// only for an error: every event a registered kind's wire line passes would pay for it.
func isFieldError(err error) bool {
	var fe *FieldError
	return errors.As(err, &fe)
}

// EncodePart encodes a registered kind's part of an event (JobSpec.Part,
// GatesDone.Part, VerdictEmitted.Part).
func EncodePart(v any) (msgpack.RawMessage, error) {
	data, err := msgpack.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode part: %w", err)
	}
	return data, nil
}

// DecodePart decodes a registered kind's part of an event into into; a missing part is a
// field error naming it.
func DecodePart(part msgpack.RawMessage, into any) error {
	if len(part) == 0 {
		return missing("part")
	}
	if err := msgpack.Unmarshal(part, into); err != nil {
		return invalid("part", err.Error())
	}
	return nil
}

// Missing is the field error of a required field that is absent, for a registered
// kind's wire line (KindWire).
func Missing(field string) error { return missing(field) }

// Invalid is the field error of a field whose value is out of its domain, for a
// registered kind's wire line (KindWire).
func Invalid(field, reason string) error { return invalid(field, reason) }

// Validate checks a source as a job spec's sources are checked, naming field.
func (s Source) Validate(field string) error { return s.validate(field) }

// Valid reports whether s is one of the vote statuses.
func (s VoteStatus) Valid() bool { return ValidStatus("", s) == nil }
