package batch

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// commonSchema is the batch schema without any kind's keys: the keys every entry and
// every batch has, whatever its kind. The kinds' keys are added to it (SetKinds), and
// the kind enums filled with their names, to make the batch schema (Schema).
//
//go:embed common.schema.json
var commonSchema []byte

// Keys are a judge kind's own batch keys (stage.Keyed supplies them through the
// registry): the batch format keeps the keys every entry has (id, kind, criterion, ours,
// reference, ...) and hands the rest of an entry of the kind to the kind's own struct, so
// that no kind's key is named in this package.
type Keys struct {
	// Entry returns a new value an entry of the kind decodes into, a pointer to the kind's
	// struct whose yaml tags name its keys; AC.Part holds it.
	Entry func() any
	// Batch, when set, returns a new value the batch's top level decodes into: the kind's
	// batch-wide keys (the defaults of its entries' keys); Batch.Part holds it.
	Batch func() any
	// Schema is the keys' JSON Schema: {"entry": {key: schema, ...}, "batch": {key:
	// schema, ...}, "$defs": {name: schema, ...}}, the last for the keys' $refs
	// ("#/$defs/<name>"). Every key Entry's and Batch's structs decode has its schema here:
	// what the schema does not name is refused as an unknown key.
	Schema []byte
}

// KindKeys are one kind's keys, by the kind's name.
type KindKeys struct {
	Name string
	Keys Keys
}

// keysFragment is a Keys.Schema.
type keysFragment struct {
	Entry map[string]json.RawMessage `json:"entry"`
	Batch map[string]json.RawMessage `json:"batch"`
	Defs  map[string]json.RawMessage `json:"$defs"`
}

// schemaSet is the batch schema of the kinds in use, compiled.
type schemaSet struct {
	// doc is the batch schema as published (schemas/batch.schema.json).
	doc []byte
	// header is the whole schema, applied to the file without its entries; union is the
	// entry definition with every kind's keys, for an entry whose kind is not known.
	header, union *jsonschema.Schema
	// entry is the entry definition of each kind: the common keys and the kind's own.
	entry map[string]*jsonschema.Schema
	keys  map[string]Keys
	order []string
}

// inUse is the schema set in use; with no kind set, entries have the common keys only.
var inUse atomic.Pointer[schemaSet]

func init() {
	s, err := compose(nil)
	if err != nil {
		panic(fmt.Sprintf("batch schema: %v", err))
	}
	inUse.Store(s)
}

// SetKinds makes kinds, in reporting order, the kinds whose keys batch files may use.
// pkg/registry calls it with every registered kind whenever its table changes. A kind's key
// that is a common key, or a fragment that is not valid JSON Schema, is an error and
// changes nothing.
func SetKinds(kinds []KindKeys) error {
	s, err := compose(kinds)
	if err != nil {
		return err
	}
	inUse.Store(s)
	return nil
}

// Schema is the batch file's JSON Schema for the kinds in use: the common keys with every
// kind's. schemas/batch.schema.json is it for the kinds that ship (pkg/registry's test
// holds the two equal).
func Schema() []byte { return inUse.Load().doc }

// entryDef is the definition name of kind's entries in the composed schema (not
// published).
func entryDef(kind string) string { return "kind-entry-" + kind }

// compose builds and compiles the batch schema of kinds.
func compose(kinds []KindKeys) (*schemaSet, error) {
	var doc map[string]any
	if err := json.Unmarshal(commonSchema, &doc); err != nil {
		return nil, fmt.Errorf("common schema: %w", err)
	}
	props := doc["properties"].(map[string]any)
	defs := doc["$defs"].(map[string]any)
	ac := defs["ac"].(map[string]any)
	acProps := ac["properties"].(map[string]any)
	common, commonHeader := map[string]bool{}, map[string]bool{}
	for k := range acProps {
		common[k] = true
	}
	for k := range props {
		commonHeader[k] = true
	}
	names := make([]any, 0, len(kinds))
	s := &schemaSet{entry: map[string]*jsonschema.Schema{}, keys: map[string]Keys{}}
	own := map[string]map[string]any{} // each kind's entry keys' schemas
	for _, k := range kinds {
		if _, dup := s.keys[k.Name]; dup {
			return nil, fmt.Errorf("kind %s: its keys are set twice", k.Name)
		}
		names = append(names, k.Name)
		s.keys[k.Name] = k.Keys
		s.order = append(s.order, k.Name)
		own[k.Name] = map[string]any{}
		if len(k.Keys.Schema) == 0 {
			continue
		}
		var frag keysFragment
		dec := json.NewDecoder(bytes.NewReader(k.Keys.Schema))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&frag); err != nil {
			return nil, fmt.Errorf("kind %s: batch keys' schema: %w", k.Name, err)
		}
		add := func(where string, into map[string]any, from map[string]json.RawMessage, taken func(string) bool) error {
			for key, raw := range from {
				if taken(key) {
					return fmt.Errorf("kind %s: %s key %s is a common key of the batch format", k.Name, where, key)
				}
				var v any
				if err := json.Unmarshal(raw, &v); err != nil {
					return fmt.Errorf("kind %s: %s key %s: %w", k.Name, where, key, err)
				}
				if _, ok := into[key]; !ok { // a key two kinds share keeps the first's schema
					into[key] = v
				}
				if where == "entry" {
					own[k.Name][key] = v
				}
			}
			return nil
		}
		if err := add("batch", props, frag.Batch, func(key string) bool { return commonHeader[key] }); err != nil {
			return nil, err
		}
		if err := add("entry", acProps, frag.Entry, func(key string) bool { return common[key] }); err != nil {
			return nil, err
		}
		for name, raw := range frag.Defs {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return nil, fmt.Errorf("kind %s: $defs.%s: %w", k.Name, name, err)
			}
			if _, ok := defs[name]; ok {
				if name == "ac" || !reflect.DeepEqual(defs[name], v) {
					return nil, fmt.Errorf("kind %s: $defs.%s is defined already", k.Name, name)
				}
			}
			defs[name] = v
		}
	}
	kindEnum := func(m map[string]any) {
		if len(names) == 0 {
			delete(m, "enum")
			m["type"] = "string"
			return
		}
		m["enum"] = names
	}
	kindEnum(props["kind"].(map[string]any))
	kindEnum(acProps["kind"].(map[string]any))
	published, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, err
	}
	s.doc = append(published, '\n')

	// The entry definition of each kind, compiled with the published schema but not part
	// of it.
	for _, name := range s.order {
		p := map[string]any{}
		for key := range common {
			p[key] = acProps[key]
		}
		for key, v := range own[name] {
			p[key] = v
		}
		def := map[string]any{}
		for key, v := range ac {
			def[key] = v
		}
		def["properties"] = p
		defs[entryDef(name)] = def
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("batch.schema.json", doc); err != nil {
		return nil, err
	}
	if s.header, err = c.Compile("batch.schema.json"); err != nil {
		return nil, err
	}
	if s.union, err = c.Compile("batch.schema.json#/$defs/ac"); err != nil {
		return nil, fmt.Errorf("AC definition: %w", err)
	}
	for _, name := range s.order {
		if s.entry[name], err = c.Compile("batch.schema.json#/$defs/" + entryDef(name)); err != nil {
			return nil, fmt.Errorf("kind %s: entry definition: %w", name, err)
		}
	}
	return s, nil
}

// entrySchema is the schema an entry is validated against: its kind's (its own kind key,
// else the batch's kind, else the default), or, when the entry's kind key names no kind in
// use, the union of every kind's keys (the kind key's own problem is then reported).
func (s *schemaSet) entrySchema(batchKind string, kind string, kindSet bool) *jsonschema.Schema {
	if !kindSet {
		kind = batchKind
		if kind == "" {
			kind = DefaultKind
		}
	}
	if e, ok := s.entry[kind]; ok {
		return e
	}
	return s.union
}

// newPart is a new value of kind's entry keys, nil for a kind without any.
func (s *schemaSet) newPart(kind string) any {
	if k, ok := s.keys[kind]; ok && k.Entry != nil {
		return k.Entry()
	}
	return nil
}

// Sets reports whether the entry sets key (to a value that is not its zero): one of the
// common keys, or one of its kind's (AC.Part's yaml tags).
func (ac AC) Sets(key string) bool {
	if set, found := setByTag(reflect.ValueOf(ac), key); found {
		return set
	}
	if set, found := setByTag(reflect.ValueOf(ac.rare), key); found {
		return set
	}
	if ac.Part != nil {
		set, _ := setByTag(reflect.ValueOf(ac.Part), key)
		return set
	}
	return false
}

// setByTag finds the field of struct v (or of the struct it points to) whose yaml tag is
// key, and reports whether it holds a value other than its zero.
func setByTag(v reflect.Value, key string) (set, found bool) {
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return false, false
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return false, false
	}
	t := v.Type()
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
			return !v.Field(i).IsZero(), true
		}
	}
	return false, false
}

// Artifacted is an entry part (AC.Part) naming the entry's own artifact beside ours: the
// file a pipeline's annotation of the AC points at (critic's output file, equivalence's
// candidate, rubric's spec).
type Artifacted interface {
	Artifact() string
}

// Artifacts are the entry's artifacts as the batch names them, ours first, for a
// pipeline's annotations.
func (ac AC) Artifacts() []string {
	out := []string{ac.Ours}
	if a, ok := ac.Part.(Artifacted); ok {
		out = append(out, a.Artifact())
	}
	return slices.DeleteFunc(out, func(s string) bool { return s == "" })
}

// Moded is an entry part with a run mode of its own (a looping kind's: headless,
// interactive, report-only), which `tribunal run` reads to know whether a person will be
// asked on its terminal.
type Moded interface {
	RunMode() string
}

// ModeOf is the entry's run mode, "" when its kind has none or the entry sets none.
func (ac AC) ModeOf() string {
	if m, ok := ac.Part.(Moded); ok {
		return m.RunMode()
	}
	return ""
}

// Part is the batch's own keys of kind (Keys.Batch's value), nil when the kind has none.
func (b *Batch) Part(kind string) any { return b.Parts[kind] }
