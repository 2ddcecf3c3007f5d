package events

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"

	segjson "github.com/segmentio/encoding/json"
	"github.com/vmihailenco/msgpack/v5"
)

// Parts are the typed parts a kind keeps in the shared payloads (their KindPart field),
// each the kind's own Go value, for a kind that registers them with its wire schema
// (KindWire.Parts). On the wire a part is written under the kind's name, in the place
// the payload's fields are declared in, which is where the kinds that ship had a field
// of their own in this package: an event recorded before their parts moved into the
// kinds' folders decodes, and re-encodes, to the same bytes.
type Parts struct {
	// JSON is the key of the parts in a payload's JSON form (a job record): the Go
	// field name the part had ("AB"), so records stored before read the same.
	JSON string
	// Spec, Gates, Verdict and Decided return a new value to decode the kind's part of
	// JobSpec, GatesDone, VerdictEmitted and IterationDecided into (a pointer); nil for
	// a payload in which the kind has no typed part.
	Spec, Gates, Verdict, Decided func() any
	// VerdictTrials returns a pointer to a new slice for the answers of a verdict's later
	// trials (VerdictEmitted.KindTrials, the slice itself), written under the kind's
	// name and "_trials" ("critic_trials"), and under JSON with "Trials" ("CriticTrials");
	// nil for a kind whose trials travel otherwise (ab's are votes).
	VerdictTrials func() any
}

// slot is one of the typed parts a payload may have.
type slot int

const (
	slotSpec slot = iota
	slotGates
	slotVerdict
	slotDecided
	slotVerdictTrials
	slots
)

// trialsSuffix ends the key of a kind's trials part.
const trialsSuffix = "_trials"

func (p Parts) of(s slot) func() any {
	switch s {
	case slotSpec:
		return p.Spec
	case slotGates:
		return p.Gates
	case slotVerdict:
		return p.Verdict
	case slotVerdictTrials:
		return p.VerdictTrials
	}
	return p.Decided
}

// partType returns the constructor of kind k's typed part of payload s, if it has one.
func partType(k Kind, s slot) (func() any, bool) {
	w, ok := registeredWire(k)
	if !ok || w.parts.of(s) == nil {
		return nil, false
	}
	return w.parts.of(s), true
}

// noPart reports whether a part holds nothing to write: nil, a nil pointer or an empty
// slice (as omitempty omits it).
func noPart(p any) bool {
	if p == nil {
		return true
	}
	switch v := reflect.ValueOf(p); v.Kind() {
	case reflect.Pointer:
		return v.IsNil()
	case reflect.Slice:
		return v.Len() == 0
	}
	return false
}

// partCodec writes a payload struct as msgpack writes a struct (a map of its fields in
// declaration order, omitempty honoured), with its KindPart field written under the
// kind's name. Every field a payload declares is found by reflection, as msgpack finds
// them, so a field added to the payload travels without a change here.
type partCodec struct {
	typ    reflect.Type
	fields []codecField
	kind   int // the index of the payload's Kind field
}

type codecField struct {
	name      string
	index     int
	omitEmpty bool
	part      int  // 1 the KindPart field, 2 KindTrials, 0 any other
	zeroer    bool // its type has IsZero, which msgpack asks
}

// newPartCodec reads the msgpack fields of t, a struct with a KindPart field. It
// panics on what it cannot write as msgpack would (an embedded field), which a test of
// every payload meets first.
func newPartCodec(t reflect.Type) *partCodec {
	c := &partCodec{typ: t, kind: -1}
	found := false
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Anonymous {
			panic(fmt.Sprintf("events: %s.%s: an embedded field in a payload with a kind's part", t.Name(), f.Name))
		}
		if f.Name == "KindPart" || f.Name == "KindTrials" {
			c.fields = append(c.fields, codecField{index: i, part: 1 + btoi(f.Name == "KindTrials")})
			found = found || f.Name == "KindPart"
			continue
		}
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if f.Name == "Kind" {
			c.kind = i
		}
		c.fields = append(c.fields, codecField{name: name, index: i, omitEmpty: strings.Contains(","+opts+",", ",omitempty,"),
			zeroer: f.Type.Implements(zeroerType)})
	}
	if !found || c.kind < 0 || len(c.fields) > 64 {
		panic(fmt.Sprintf("events: %s: want a KindPart field and at most 64 fields", t.Name()))
	}
	return c
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

var (
	specCodec    = newPartCodec(reflect.TypeFor[JobSpec]())
	gatesCodec   = newPartCodec(reflect.TypeFor[GatesDone]())
	verdictCodec = newPartCodec(reflect.TypeFor[VerdictEmitted]())
	decidedCodec = newPartCodec(reflect.TypeFor[IterationDecided]())
)

// encode writes v (the struct, addressable) with its parts (KindPart, KindTrials) under
// the keys of kind k.
func (c *partCodec) encode(enc *msgpack.Encoder, v reflect.Value, k Kind, parts [2]any) error {
	var skip uint64
	n := 0
	for i, f := range c.fields {
		switch {
		case f.part > 0:
			if noPart(parts[f.part-1]) {
				skip |= 1 << i
				continue
			}
			if k == "" {
				return fmt.Errorf("%s: a kind's part without a kind", c.typ.Name())
			}
		case f.omitEmpty && isEmpty(v.Field(f.index), f.zeroer):
			skip |= 1 << i
			continue
		}
		n++
	}
	if err := enc.EncodeMapLen(n); err != nil {
		return err
	}
	for i, f := range c.fields {
		if skip&(1<<i) != 0 {
			continue
		}
		if f.part > 0 {
			key := string(k)
			if f.part == 2 {
				key += trialsSuffix
			}
			if err := enc.EncodeString(key); err != nil {
				return err
			}
			if err := enc.Encode(parts[f.part-1]); err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			continue
		}
		if err := enc.EncodeString(f.name); err != nil {
			return err
		}
		if err := enc.EncodeValue(v.Field(f.index)); err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
	}
	return nil
}

// decode reads a map into v (the struct, addressable) as msgpack reads a struct:
// unknown keys are skipped and a nil is left as the zero value. A key that names a kind
// with a typed part of this payload (s, or its trials) is that part, returned; the part
// of a kind this build does not know is skipped, as an unknown field is.
func (c *partCodec) decode(dec *msgpack.Decoder, v reflect.Value, s slot) (parts [2]any, err error) {
	n, err := dec.DecodeMapLen()
	if err != nil || n <= 0 {
		return parts, err
	}
	bp := keyBufs.Get().(*[64]byte)
	defer keyBufs.Put(bp)
	buf := bp[:]
	for range n {
		l, err := dec.DecodeBytesLen()
		if err != nil {
			return parts, err
		}
		var key []byte
		switch {
		case l < 0:
		case l <= len(buf):
			key = buf[:l]
		default:
			key = make([]byte, l)
		}
		if err := dec.ReadFull(key); err != nil {
			return parts, err
		}
		f := c.field(key)
		switch {
		case f != nil:
			if err := dec.DecodeValue(v.Field(f.index)); err != nil {
				return parts, fmt.Errorf("%s: %w", f.name, err)
			}
		default:
			at, ps, name := 0, s, key
			if s == slotVerdict && bytes.HasSuffix(key, []byte(trialsSuffix)) {
				at, ps, name = 1, slotVerdictTrials, key[:len(key)-len(trialsSuffix)]
			}
			// The key of a part is the payload's kind, decoded before it: compared as
			// it stands, it costs no string.
			k := Kind(v.Field(c.kind).String())
			if string(name) != string(k) {
				k = Kind(name)
			}
			newPart, ok := partType(k, ps)
			if !ok {
				if err := dec.Skip(); err != nil {
					return parts, err
				}
				continue
			}
			p := newPart()
			if err := dec.Decode(p); err != nil {
				return parts, fmt.Errorf("%s: %w", key, err)
			}
			if at == 1 { // trials are held as the slice
				parts[at] = reflect.ValueOf(p).Elem().Interface()
			} else {
				parts[at] = p
			}
		}
	}
	return parts, nil
}

// keyBufs hold the keys decode reads: a buffer of its own would escape to the heap,
// through the decoder's reader, on every payload decoded.
var keyBufs = sync.Pool{New: func() any { return new([64]byte) }}

func (c *partCodec) field(key []byte) *codecField {
	for i := range c.fields {
		if f := &c.fields[i]; f.part == 0 && f.name == string(key) {
			return f
		}
	}
	return nil
}

var zeroerType = reflect.TypeFor[interface{ IsZero() bool }]()

// isEmpty is msgpack's test of an empty value for omitempty; zeroer says v's type has
// IsZero, known ahead for a payload's fields, where asking it costs an allocation.
func isEmpty(v reflect.Value, zeroer bool) bool {
	for v.Kind() == reflect.Interface {
		if v.IsNil() {
			return true
		}
		v = v.Elem()
		zeroer = v.Type().Implements(zeroerType)
	}
	if zeroer {
		switch v.Kind() {
		case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
			if v.IsNil() {
				return true
			}
		}
		return v.Interface().(interface{ IsZero() bool }).IsZero()
	}
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Struct:
		return emptyStruct(v)
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Pointer:
		return v.IsNil()
	}
	return false
}

// emptyStruct is msgpack's test of a struct: empty when every field it would write is
// omitempty and empty.
func emptyStruct(v reflect.Value) bool {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() && !f.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("msgpack"), ",")
		if name == "-" {
			continue
		}
		if !strings.Contains(","+opts+",", ",omitempty,") || !isEmpty(v.Field(i), f.Type.Implements(zeroerType)) {
			return false
		}
	}
	return true
}

// marshalPartJSON is the JSON of a payload (plain, the payload as a type without its
// methods) with its kind's parts under the kind's registered JSON keys ("AB", and
// "CriticTrials" for trials), after the other fields.
func marshalPartJSON(plain any, k Kind, parts [2]any) ([]byte, error) {
	data, err := json.Marshal(plain)
	if err != nil || noPart(parts[0]) && noPart(parts[1]) {
		return data, err
	}
	w, ok := registeredWire(k)
	if !ok || w.parts.JSON == "" {
		return nil, fmt.Errorf("encode %q part as JSON: the kind registers no JSON key", k)
	}
	out := append([]byte(nil), data[:len(data)-1]...)
	first := bytes.Equal(data, []byte("{}"))
	for at, part := range parts {
		if noPart(part) {
			continue
		}
		key := w.parts.JSON
		if at == 1 {
			key += "Trials"
		}
		p, err := json.Marshal(part)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", key, err)
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(out, '"')
		out = append(out, key...)
		out = append(out, '"', ':')
		out = append(out, p...)
	}
	return append(out, '}'), nil
}

// unmarshalPartJSON reads kind k's parts of payload s from the payload's JSON, under the
// kind's registered JSON keys; nil when there are none.
func unmarshalPartJSON(data []byte, k Kind, s slot) (parts [2]any, err error) {
	w, ok := registeredWire(k)
	if !ok || w.parts.JSON == "" {
		return parts, nil
	}
	for at, ps := range []slot{s, slotVerdictTrials} {
		if at == 1 && s != slotVerdict || w.jsonHolders[ps] == nil {
			continue
		}
		holder := reflect.New(w.jsonHolders[ps])
		if err := segjson.Unmarshal(data, holder.Interface()); err != nil {
			return parts, err
		}
		if p := holder.Elem().Field(0).Interface(); !noPart(p) {
			parts[at] = p
		}
	}
	return parts, nil
}

// jsonHolders are, for each typed part a kind has, a struct with one field of the
// part's type under the kind's JSON key: JSON decodes the part into it in one pass,
// matching the key as it matched the field the part had.
func jsonHolders(p Parts) [slots]reflect.Type {
	var out [slots]reflect.Type
	if p.JSON == "" {
		return out
	}
	for s := range slots {
		f := p.of(s)
		if f == nil {
			continue
		}
		t, key := reflect.TypeOf(f()), p.JSON
		if s == slotVerdictTrials {
			t, key = t.Elem(), key+"Trials" // held as the slice
		}
		out[s] = reflect.StructOf([]reflect.StructField{{Name: "Part", Type: t, Tag: reflect.StructTag(`json:"` + key + `"`)}})
	}
	return out
}

// The four payloads with a kind's part, written by partCodec. Their msgpack methods
// take a pointer, so the hot path boxes nothing; msgpack refuses, loudly, to write one
// it cannot address. Their JSON methods take a value, as encoding/json would otherwise
// write a value without its part.

// EncodeMsgpack implements msgpack.CustomEncoder.
func (s *JobSpec) EncodeMsgpack(enc *msgpack.Encoder) error {
	return specCodec.encode(enc, reflect.ValueOf(s).Elem(), s.Kind, [2]any{s.KindPart})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (s *JobSpec) DecodeMsgpack(dec *msgpack.Decoder) error {
	parts, err := specCodec.decode(dec, reflect.ValueOf(s).Elem(), slotSpec)
	s.KindPart = parts[0]
	return err
}

// MarshalJSON writes the spec with its kind's part under the kind's JSON key.
func (s JobSpec) MarshalJSON() ([]byte, error) {
	type plain JobSpec
	return marshalPartJSON(plain(s), s.Kind, [2]any{s.KindPart})
}

// UnmarshalJSON reads what MarshalJSON writes, and what the build before wrote.
func (s *JobSpec) UnmarshalJSON(data []byte) error {
	type plain JobSpec
	if err := segjson.Unmarshal(data, (*plain)(s)); err != nil {
		return err
	}
	parts, err := unmarshalPartJSON(data, s.Kind, slotSpec)
	s.KindPart = parts[0]
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *GatesDone) EncodeMsgpack(enc *msgpack.Encoder) error {
	return gatesCodec.encode(enc, reflect.ValueOf(p).Elem(), p.Kind, [2]any{p.KindPart})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *GatesDone) DecodeMsgpack(dec *msgpack.Decoder) error {
	parts, err := gatesCodec.decode(dec, reflect.ValueOf(p).Elem(), slotGates)
	p.KindPart = parts[0]
	return err
}

// MarshalJSON writes the event with its kind's part under the kind's JSON key.
func (p GatesDone) MarshalJSON() ([]byte, error) {
	type plain GatesDone
	return marshalPartJSON(plain(p), p.Kind, [2]any{p.KindPart})
}

// UnmarshalJSON reads what MarshalJSON writes, and what the build before wrote.
func (p *GatesDone) UnmarshalJSON(data []byte) error {
	type plain GatesDone
	if err := segjson.Unmarshal(data, (*plain)(p)); err != nil {
		return err
	}
	parts, err := unmarshalPartJSON(data, p.Kind, slotGates)
	p.KindPart = parts[0]
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *VerdictEmitted) EncodeMsgpack(enc *msgpack.Encoder) error {
	return verdictCodec.encode(enc, reflect.ValueOf(p).Elem(), p.Kind, [2]any{p.KindPart, p.KindTrials})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *VerdictEmitted) DecodeMsgpack(dec *msgpack.Decoder) error {
	parts, err := verdictCodec.decode(dec, reflect.ValueOf(p).Elem(), slotVerdict)
	p.KindPart, p.KindTrials = parts[0], parts[1]
	return err
}

// MarshalJSON writes the event with its kind's part under the kind's JSON key.
func (p VerdictEmitted) MarshalJSON() ([]byte, error) {
	type plain VerdictEmitted
	return marshalPartJSON(plain(p), p.Kind, [2]any{p.KindPart, p.KindTrials})
}

// UnmarshalJSON reads what MarshalJSON writes, and what the build before wrote.
func (p *VerdictEmitted) UnmarshalJSON(data []byte) error {
	type plain VerdictEmitted
	if err := segjson.Unmarshal(data, (*plain)(p)); err != nil {
		return err
	}
	parts, err := unmarshalPartJSON(data, p.Kind, slotVerdict)
	p.KindPart, p.KindTrials = parts[0], parts[1]
	return err
}

// EncodeMsgpack implements msgpack.CustomEncoder.
func (p *IterationDecided) EncodeMsgpack(enc *msgpack.Encoder) error {
	return decidedCodec.encode(enc, reflect.ValueOf(p).Elem(), p.Kind, [2]any{p.KindPart})
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (p *IterationDecided) DecodeMsgpack(dec *msgpack.Decoder) error {
	parts, err := decidedCodec.decode(dec, reflect.ValueOf(p).Elem(), slotDecided)
	p.KindPart = parts[0]
	return err
}

// MarshalJSON writes the decision (a job record's decided) with its kind's part under the kind's JSON key.
func (p IterationDecided) MarshalJSON() ([]byte, error) {
	type plain IterationDecided
	return marshalPartJSON(plain(p), p.Kind, [2]any{p.KindPart})
}

// UnmarshalJSON reads what MarshalJSON writes, and what the build before wrote.
func (p *IterationDecided) UnmarshalJSON(data []byte) error {
	type plain IterationDecided
	if err := segjson.Unmarshal(data, (*plain)(p)); err != nil {
		return err
	}
	parts, err := unmarshalPartJSON(data, p.Kind, slotDecided)
	p.KindPart = parts[0]
	return err
}
