// Package batch reads batch files: YAML documents (a file, or a folder holding
// batch.yaml) listing the acceptance criteria to judge. The file is checked against the
// batch JSON Schema (Schema, published as schemas/batch.schema.json): the keys every entry
// has, and each entry's kind's own, which the kind supplies (Keys) and reads back from
// the entry (AC.Part). Every error names the file, the line and the field. An error
// inside one AC entry costs only that AC: the rest of the batch goes on.
package batch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/localfile"
	"github.com/tribunal-dev/tribunal/pkg/price"
	"github.com/tribunal-dev/tribunal/schemas"
)

// DefaultFile is the file looked for when a folder is given.
const DefaultFile = "batch.yaml"

// MaxACs bounds one batch; larger work is split into several batches.
const MaxACs = events.MaxBatchSize

// File is a batch file as written.
type File struct {
	Version   int      `yaml:"version"`
	Name      string   `yaml:"name"`
	Tenant    string   `yaml:"tenant"`
	Kind      string   `yaml:"kind"`
	Iteration int      `yaml:"iteration"`
	Judges    []string `yaml:"judges"`
	// JudgeMode is how the batch's judge calls are made: direct, batch (the provider's
	// batch API) or "" for the deployment's default (events.JobSpec.JudgeMode).
	JudgeMode string `yaml:"judge_mode"`
	Verify    string `yaml:"verify"`
	// Budget is what judging the batch may spend: money ("5.00 USD") or tokens ("200k
	// tokens"), pkg/price.ParseLimit. Past it, no call is made and the rest of the ACs
	// are blocked "budget exhausted".
	Budget string `yaml:"budget"`
	// Review is the batch's review setting (events.ReviewSpec): which judged ACs go to
	// people and whether their answer decides.
	Review *Review `yaml:"review"`
	// Trials and AtLeast ask each judge several times and reduce the answers (an AC may
	// override both); Ladder and EscalateWhen are a judge ladder. They are common keys,
	// events.Repeats: each kind takes or refuses them (kind.Repeating). See RepeatsOf.
	Trials       int           `yaml:"trials"`
	AtLeast      int           `yaml:"at_least"`
	Ladder       []string      `yaml:"ladder"`
	EscalateWhen *EscalateWhen `yaml:"escalate_when"`
	ACs          []AC          `yaml:"acs"`
}

// EscalateWhen is the batch's `escalate_when:`: when a ladder's rung hands an AC to the
// next rung.
type EscalateWhen struct {
	Confidence   *float64 `yaml:"confidence"`
	Flip         bool     `yaml:"flip"`
	Disagreement bool     `yaml:"disagreement"`
}

// Review is the batch's `review`: a seeded sample (share or count), the unsure ACs, and
// whether a person's answer decides the outcome.
type Review struct {
	Share   float64 `yaml:"share"`
	Count   int     `yaml:"count"`
	Seed    string  `yaml:"seed"`
	Unsure  bool    `yaml:"unsure"`
	Decides bool    `yaml:"decides"`
}

// AC is one acceptance criterion entry.
//
// A batch holds up to a million of them for the whole of a submission, so the fields
// most entries leave unset (Iteration, Judges, Targets, Views, Problem) live behind one
// pointer, nil for an entry with none of them, and are read through methods of those
// names and set through the With methods, which copy: an AC stays a value.
type AC struct {
	ID        string `yaml:"id"`
	Kind      string `yaml:"kind"`
	Criterion string `yaml:"criterion"`
	Ours      string `yaml:"ours"`
	Reference string `yaml:"reference"`
	// Trials and AtLeast override the batch's.
	Trials  int `yaml:"trials"`
	AtLeast int `yaml:"at_least"`
	// Review flags the AC for a person: it joins the batch's review queue once judged.
	Review bool `yaml:"review"`
	// Part is the entry's keys of its kind's own (Keys.Entry's value, from the kind's
	// stage.Keyed): nil for a kind without any, and for an entry with a problem.
	Part any `yaml:"-"`
	// Line is where the entry starts in the file, and Index its place in the file's acs
	// list, counting entries that were skipped: what acs[i] names in a message.
	Line  int `yaml:"-"`
	Index int `yaml:"-"`
	// rare holds the fields few entries set; nil when the entry sets none of them.
	rare *acRare
}

// acRare is the fields of an AC that few entries set. Its yaml tags are the entry's keys:
// an entry is decoded into it beside the AC.
type acRare struct {
	Iteration *int     `yaml:"iteration"`
	Judges    []string `yaml:"judges"`
	Targets   []string `yaml:"-"`
	Views     []string `yaml:"-"`
	Problem   string   `yaml:"-"`
}

func (r *acRare) zero() bool {
	return r.Iteration == nil && r.Judges == nil && r.Targets == nil && r.Views == nil && r.Problem == ""
}

// with is a copy of ac with set applied to a copy of its rare fields.
func (ac AC) with(set func(*acRare)) AC {
	var r acRare
	if ac.rare != nil {
		r = *ac.rare
	}
	set(&r)
	ac.rare = nil
	if !r.zero() {
		ac.rare = &r
	}
	return ac
}

// Iteration is the entry's own iteration, nil when it sets none (the batch's applies).
func (ac AC) Iteration() *int {
	if ac.rare == nil {
		return nil
	}
	return ac.rare.Iteration
}

// Judges are the entry's own judges, nil when it names none (the batch's apply).
func (ac AC) Judges() []string {
	if ac.rare == nil {
		return nil
	}
	return ac.rare.Judges
}

// Targets and Views narrow a rubric AC to some of its feature's views, as a run's
// --target (seed 004's target:/screen:) and --ac with a view's id ask: target ids, and
// views' job ids (<ac>--<target>--<state>--<appearance>). Empty keeps every view. A
// batch file never sets them.
func (ac AC) Targets() []string {
	if ac.rare == nil {
		return nil
	}
	return ac.rare.Targets
}

// Views: see Targets.
func (ac AC) Views() []string {
	if ac.rare == nil {
		return nil
	}
	return ac.rare.Views
}

// Problem, when set, is why this entry cannot be judged, saying where and what:
// "AC-1: line 10: unknown key criterian (did you mean criterion?)". The AC is still
// reported, as blocked.
func (ac AC) Problem() string {
	if ac.rare == nil {
		return ""
	}
	return ac.rare.Problem
}

// WithIteration is ac with its own iteration set to it (nil: the batch's).
func (ac AC) WithIteration(it *int) AC { return ac.with(func(r *acRare) { r.Iteration = it }) }

// WithJudges is ac with its own judges set to judges.
func (ac AC) WithJudges(judges []string) AC {
	return ac.with(func(r *acRare) { r.Judges = judges })
}

// WithTargets is ac narrowed to the targets ids (see Targets).
func (ac AC) WithTargets(ids []string) AC { return ac.with(func(r *acRare) { r.Targets = ids }) }

// WithViews is ac narrowed to the views ids (see Targets).
func (ac AC) WithViews(ids []string) AC { return ac.with(func(r *acRare) { r.Views = ids }) }

// WithProblem is ac with its problem set to problem ("" clears it).
func (ac AC) WithProblem(problem string) AC {
	return ac.with(func(r *acRare) { r.Problem = problem })
}

// KindOf is the AC's judge kind: its own, else the batch's, else ab.
func (b *Batch) KindOf(ac AC) string {
	if ac.Kind != "" {
		return ac.Kind
	}
	if b.Kind != "" {
		return b.Kind
	}
	return DefaultKind
}

// DefaultKind is the kind of an entry that names none in a batch that names none.
const DefaultKind = "ab"

// Batch is a loaded batch file.
type Batch struct {
	File
	// Path is the batch file; Dir is the folder its relative paths resolve against.
	Path, Dir string
	// Rejected lists entries that could not even be named (no usable id, duplicate id):
	// they are reported and skipped.
	Rejected []*Error
	// Parts are the batch's own keys of each kind that has some (Keys.Batch's values), by
	// the kind's name: the defaults of its entries' keys.
	Parts map[string]any
}

// Error is a problem at a place in a batch file.
type Error struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *Error) Error() string {
	loc := e.File
	if e.Line > 0 {
		loc += ":" + strconv.Itoa(e.Line)
	}
	if e.Field != "" {
		return fmt.Sprintf("%s: %s: %s", loc, e.Field, e.Msg)
	}
	return fmt.Sprintf("%s: %s", loc, e.Msg)
}

// Errors is every file-level problem of a batch that cannot be loaded.
type Errors []*Error

func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}

// printer renders schema errors in English.
var printer = message.NewPrinter(language.English)

// Load reads a batch from a file or a folder holding batch.yaml.
func Load(path string) (*Batch, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, DefaultFile)
	}
	// A regular file only: a FIFO named batch.yaml would block the command forever.
	data, err := localfile.ReadFile(context.Background(), path)
	if err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	return Parse(path, data)
}

// maxProblems bounds the problems reported for the file and for each entry: a file with
// thousands of bad keys gets a readable error, not one as large as itself.
const maxProblems = 20

// Parse reads a batch from data; path names it in errors and anchors relative paths.
//
// A file whose acs is a block sequence (the usual layout) is read entry by entry: the
// header (the file without its entries) is parsed as a yaml.Node tree and validated on
// its own, and each AC entry is then parsed, checked, validated and decoded before the
// next is read (splitACs), so the parser holds one entry's tree at a time rather than the
// file's (902 MB for 1,000,000 entries). Any other layout (a flow sequence, JSON), and a
// file whose entries cannot each be read on their own (a syntax error, an alias to
// another entry's anchor), is parsed as one tree: the result, errors included, is the
// same either way (FuzzParseStreamedIsTheTree).
func Parse(path string, data []byte) (*Batch, error) {
	if sp, ok := splitACs(data); ok {
		if b, err, ok := parseSplit(path, data, sp); ok {
			return b, err
		}
	}
	return parseTree(path, data)
}

// parseTree reads a batch from the whole document's yaml.Node tree, checked structurally
// in one pass (aliases, keys that are not plain strings, repeated keys); each AC entry is
// then validated, decoded and dropped from the tree before the next.
func parseTree(path string, data []byte) (*Batch, error) {
	fileErr := func(line int, field, msg string) error {
		return Errors{{File: path, Line: line, Field: field, Msg: msg}}
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil && !errors.Is(err, io.EOF) {
		line, msg := locateSyntaxError(data, err)
		return nil, fileErr(line, "", msg)
	}
	if line := secondDocument(dec, data, &doc); line > 0 {
		return nil, fileErr(line, "", secondDocumentMsg)
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		return nil, fileErr(max(root.Line, 1), "(document)", "want a mapping with version and acs")
	}

	// Structural problems inside an entry cost that entry; anywhere else, the file.
	var fileErrs problems
	acTree := map[int]*problems{}
	checkTree(root, nil, func(p problem) {
		if len(p.path) >= 2 && p.path[0] == "acs" {
			if i, err := strconv.Atoi(p.path[1]); err == nil {
				if acTree[i] == nil {
					acTree[i] = &problems{}
				}
				acTree[i].add(p)
				return
			}
		}
		fileErrs.add(p)
	})
	// The acs list validated entry by entry: the last non-empty sequence under acs (a
	// repeated acs is a file error above).
	var acsKey *yaml.Node
	src := &treeEntries{tree: acTree}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "acs" && v.Kind == yaml.SequenceNode && len(v.Content) > 0 {
			acsKey, src.seq = k, v
		}
	}
	b, err, _ := parseEntries(path, root, acsKey, &fileErrs, src)
	return b, err
}

// secondDocumentMsg is the error of a file holding a second YAML document.
const secondDocumentMsg = "a second YAML document starts here (---); a batch file is one document, with every AC in its acs list"

// parseSplit reads a batch whose acs entries splitACs found, one entry at a time. ok is
// false when the file is not what splitACs took it for, or an entry cannot be read on its
// own: the caller then parses it as one tree.
func parseSplit(path string, data []byte, sp acsSplit) (b *Batch, err error, ok bool) {
	src := &splitEntries{sp: sp, data: data, off: sp.start, at: sp.line}
	header := sp.header(data)
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(header))
	if err := dec.Decode(&doc); err != nil {
		return nil, nil, false // the whole file's syntax error, located in the whole file
	}
	if line := secondDocument(dec, header, &doc); line > 0 {
		if !src.sound() {
			return nil, nil, false
		}
		return nil, Errors{{File: path, Line: line, Msg: secondDocumentMsg}}, true
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, nil, false
	}
	root := doc.Content[0]
	// The acs key must be the root's, at the line splitACs found, and its value (the
	// entries cut out) empty: else the cut changed what the rest of the file means.
	var acsKey *yaml.Node
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Line == sp.keyLine && k.Kind == yaml.ScalarNode && k.Value == "acs" {
			if v.Kind != yaml.ScalarNode || v.Tag != "!!null" || v.Value != "" {
				return nil, nil, false
			}
			acsKey = k
		}
	}
	if acsKey == nil {
		return nil, nil, false
	}
	var fileErrs problems
	checkTree(root, nil, fileErrs.add)
	return parseEntries(path, root, acsKey, &fileErrs, src)
}

// parseEntries validates and decodes the header (root without the value of acsKey, nil
// when the file has no non-empty acs list) and then src's entries, one at a time.
// fileErrs are the structural problems found outside the entries. ok is false when src
// could not read an entry on its own (see acsEntries).
func parseEntries(path string, root, acsKey *yaml.Node, fileErrs *problems, src acsEntries) (b *Batch, err error, ok bool) {
	// A problem of the header is the file's first only if every entry can be read: a
	// syntax error anywhere comes first.
	refuse := func(err error) (*Batch, error, bool) {
		if !src.sound() {
			return nil, nil, false
		}
		return nil, err, true
	}
	fileErr := func(line int, field, msg string) (*Batch, error, bool) {
		return refuse(Errors{{File: path, Line: line, Field: field, Msg: msg}})
	}
	if fileErrs.n > 0 {
		return refuse(fileErrs.errors(path))
	}

	// The header: every top-level key but the acs list, which is checked entry by entry
	// below.
	header := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k == acsKey {
			continue
		}
		header.Content = append(header.Content, k, v)
	}
	set := inUse.Load()
	for _, p := range validate(set.header, header, nil) {
		if acsKey != nil && p.field() == "acs" && p.missing {
			continue // present, and validated entry by entry
		}
		fileErrs.add(p)
	}
	if fileErrs.n > 0 {
		return refuse(fileErrs.errors(path))
	}
	var f File
	parts := map[string]any{}
	into := []any{&f}
	for _, name := range set.order {
		if k := set.keys[name]; k.Batch != nil {
			parts[name] = k.Batch()
			into = append(into, parts[name])
		}
	}
	for _, p := range decodeFields(header, into, nil) {
		fileErrs.add(p)
	}
	if fileErrs.n > 0 {
		return refuse(fileErrs.errors(path))
	}
	if f.Budget != "" {
		if _, err := price.ParseLimit(f.Budget); err != nil {
			return fileErr(keyLine(header, "budget"), "budget", err.Error())
		}
	}
	if field, msg := f.repeatsError(); msg != "" {
		key := strings.SplitN(strings.SplitN(field, ".", 2)[0], "[", 2)[0]
		return fileErr(max(keyLine(header, key), 1), field, msg)
	}
	if acsKey == nil {
		return fileErr(1, "acs", "no usable AC entries")
	}
	// Refused by its count alone, before any entry is read or room made for the ACs.
	if n := src.len(); n > MaxACs {
		return nil, Errors{{File: path, Line: src.line(), Field: "acs", Msg: fmt.Sprintf("%d entries; at most %d per batch", n, MaxACs)}}, true
	}

	b = &Batch{Path: path, Dir: filepath.Dir(path), Parts: parts}
	f.ACs = make([]AC, 0, src.len())
	seen := map[string]int{}
	var kinds, criteria, ours, refs interner
	for i := range src.len() {
		node, tree, ok := src.entry(i)
		if !ok {
			return nil, nil, false
		}
		field := fmt.Sprintf("acs[%d]", i)
		ac := set.decodeAC(i, node, tree, f.Kind)
		ac.Index = i
		if ac.ID == "" || validID(ac.ID) != nil {
			b.Rejected = append(b.Rejected, &Error{File: path, Line: ac.Line, Field: field + ".id", Msg: "missing or invalid id; entry skipped: " + ac.Problem()})
			continue
		}
		if first, dup := seen[ac.ID]; dup {
			b.Rejected = append(b.Rejected, &Error{File: path, Line: ac.Line, Field: field + ".id", Msg: fmt.Sprintf("duplicate id %q (first at line %d); entry skipped", ac.ID, first)})
			continue
		}
		seen[ac.ID] = ac.Line
		if ac.Problem() == "" {
			if msg := f.repeatsProblem(ac); msg != "" {
				ac = ac.WithProblem(fmt.Sprintf("%s: line %d: %s", ac.ID, ac.Line, msg))
			}
		}
		ac.Kind, ac.Criterion = kinds.of(ac.Kind), criteria.of(ac.Criterion)
		ac.Ours, ac.Reference = ours.of(ac.Ours), refs.of(ac.Reference)
		f.ACs = append(f.ACs, ac)
	}
	b.File = f
	if len(b.ACs) == 0 {
		return nil, append(Errors{{File: path, Line: src.line(), Field: "acs", Msg: "no usable AC entries"}}, b.Rejected...), true
	}
	return b, nil, true
}

// interner hands back one copy of each value seen again: the parser allocates every
// scalar on its own, and a batch whose ACs share a kind, a criterion or a reference would
// otherwise hold that string once per AC for the whole submission (16 bytes an AC at
// least, a criterion's length at most). It remembers the first maxInterned distinct values
// only, so that a field unique to each AC costs a bounded map, dropped with the parse.
type interner struct{ seen map[string]string }

// maxInterned bounds the distinct values an interner remembers.
const maxInterned = 1024

func (in *interner) of(s string) string {
	if s == "" {
		return s
	}
	if v, ok := in.seen[s]; ok {
		return v
	}
	if in.seen == nil {
		in.seen = map[string]string{}
	}
	if len(in.seen) < maxInterned {
		in.seen[s] = s
	}
	return s
}

// keyLine is the line of key in mapping m, 0 when m has no such key.
func keyLine(m *yaml.Node, key string) int {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i].Line
		}
	}
	return 0
}

// decodeAC validates one entry against the AC schema and decodes it. A problem is kept
// on the AC (with whatever id could be read) rather than returned: it costs only this AC.
// tree holds the structural problems already found inside the entry. The entry is checked
// against its kind's keys (the common ones and its kind's own, which decode into AC.Part);
// batchKind is the batch's kind, which an entry naming none has.
func (s *schemaSet) decodeAC(index int, node *yaml.Node, tree *problems, batchKind string) AC {
	ac := AC{Line: node.Line}
	kind, kindSet := "", false
	if node.Kind == yaml.MappingNode {
		idSeen := false
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			if k.Value == "id" && !idSeen && v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
				ac.ID = v.Value // the first: a repeated id key is reported against it
				idSeen = true
			}
			if k.Value == "kind" && !kindSet {
				kindSet = true
				if v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
					kind = v.Value
				}
			}
		}
	}
	prefix := []string{"acs", strconv.Itoa(index)}
	probs := tree
	if probs == nil {
		probs = &problems{}
		for _, p := range validate(s.entrySchema(batchKind, kind, kindSet), node, prefix) {
			probs.add(p)
		}
	}
	if probs.n == 0 {
		id := ac.ID
		if !kindSet {
			kind = batchKind
			if kind == "" {
				kind = DefaultKind
			}
		}
		var rare acRare
		into := []any{&ac, &rare}
		part := s.newPart(kind)
		if part != nil {
			into = append(into, part)
		}
		for _, p := range decodeFields(node, into, prefix) {
			probs.add(p)
		}
		ac.ID, ac.Line, ac.Part = id, node.Line, part
		if !rare.zero() {
			ac.rare = &rare
		}
	}
	if probs.n > 0 {
		label := ac.ID
		if label == "" || validID(label) != nil {
			label = fmt.Sprintf("acs[%d]", index)
		}
		ac = AC{ID: ac.ID, Line: node.Line, Kind: entryKind(node, probs, prefix)}.WithProblem(probs.entryText(label, len(prefix)))
	}
	return ac
}

// entryKind is the kind a broken entry names, when that key itself is sound: the entry is
// then reported (and blocked) as the kind it is, not as the batch's default.
func entryKind(node *yaml.Node, probs *problems, prefix []string) string {
	if node.Kind != yaml.MappingNode || probs.n > len(probs.list) {
		return ""
	}
	kindPath := schemas.FieldPath(append(append([]string(nil), prefix...), "kind"), "(document)")
	for _, p := range probs.list {
		if f := p.field(); f == kindPath || strings.HasPrefix(f, kindPath+".") || strings.HasPrefix(f, kindPath+"[") {
			return ""
		}
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if k, v := node.Content[i], node.Content[i+1]; k.Value == "kind" && v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
			return v.Value
		}
	}
	return ""
}

// validate checks node (which sits at prefix in the file) against s and places every
// violation at the line of the offending key: an unknown key at its own line, a missing
// one at its parent's.
func validate(s *jsonschema.Schema, node *yaml.Node, prefix []string) []problem {
	inst, bad := toJSON(node, prefix)
	if bad != nil {
		return []problem{*bad}
	}
	verr := s.Validate(inst)
	if verr == nil {
		return nil
	}
	ve, ok := verr.(*jsonschema.ValidationError)
	if !ok {
		return []problem{{path: prefix, line: max(node.Line, 1), msg: verr.Error()}}
	}
	var out []problem
	for _, leaf := range schemas.Leaves(ve) {
		at := func(loc []string, msg string, missing bool) {
			full := append(append([]string(nil), prefix...), loc...)
			out = append(out, problem{path: full, line: max(lineOf(node, loc), 1), msg: msg, missing: missing})
		}
		switch k := leaf.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			// One short message per key: the library's names every unknown key, which
			// repeated for each of thousands of keys would be larger than the file. The
			// keys' lines come from one index of the mapping, not a search per key.
			lines := map[string]int{}
			if m := nodeAt(node, leaf.InstanceLocation); m != nil && m.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(m.Content); i += 2 {
					lines[m.Content[i].Value] = m.Content[i+1].Line
				}
			}
			known := knownKeys(s, leaf.InstanceLocation)
			for _, p := range k.Properties {
				full := append(append(append([]string(nil), prefix...), leaf.InstanceLocation...), p)
				out = append(out, problem{path: full, line: max(lines[p], 1), msg: "unknown key", key: p, suggest: closest(p, known)})
			}
		case *kind.Required:
			for _, p := range k.Missing {
				at(append(append([]string(nil), leaf.InstanceLocation...), p), "missing property", true)
			}
		default:
			at(leaf.InstanceLocation, leaf.ErrorKind.LocalizedString(printer), false)
		}
	}
	// In file order, so that the first problems reported are the first to fix.
	sort.SliceStable(out, func(i, j int) bool { return out[i].line < out[j].line })
	return out
}

// decodeFields decodes node's keys into each of into (the batch format's struct, then a
// kind's own) one key at a time, so that a value the schema let through but Go cannot hold
// (an integer too large, say) is named by its own key and line.
func decodeFields(node *yaml.Node, into []any, prefix []string) []problem {
	ok := true
	for _, v := range into {
		if err := node.Decode(v); err != nil {
			ok = false
		}
	}
	if ok {
		return nil
	}
	var out []problem
	for i := 0; i+1 < len(node.Content); i += 2 {
		one := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Content: node.Content[i : i+2]}
		var err error
		for _, v := range into {
			if err = one.Decode(v); err != nil {
				break
			}
		}
		if err != nil {
			k, val := node.Content[i], node.Content[i+1]
			out = append(out, problem{path: append(append([]string(nil), prefix...), k.Value),
				line: yamlLineOr(err, val.Line), msg: stripYAMLLine(YAMLErrorText(err))})
		}
	}
	if len(out) == 0 {
		out = append(out, problem{path: prefix, line: max(node.Line, 1), msg: "cannot be decoded"})
	}
	return out
}

// problem is one problem at a place in the file.
type problem struct {
	path    []string
	line    int
	msg     string
	missing bool
	// key is the unknown key an "unknown key" problem is about, and suggest the known key
	// it is probably a typo of, if any.
	key, suggest string
}

// message is the problem's message, with the key it probably meant.
func (p problem) message() string {
	if p.suggest != "" {
		return fmt.Sprintf("%s (did you mean %s?)", p.msg, p.suggest)
	}
	return p.msg
}

// inEntry says what the problem is inside an AC entry whose path in the file is the
// first skip tokens of p.path: "unknown key criterian (did you mean criterion?)",
// "cases[0]: missing key input", "positions: value must be ...".
func (p problem) inEntry(skip int) string {
	rel := p.path[min(skip, len(p.path)):]
	if (p.key != "" || p.missing) && len(rel) > 0 {
		what := "unknown key " + p.key
		if p.missing {
			what = "missing key " + rel[len(rel)-1]
		}
		if p.suggest != "" {
			what += " (did you mean " + p.suggest + "?)"
		}
		if parent := rel[:len(rel)-1]; len(parent) > 0 {
			return schemas.FieldPath(parent, "(document)") + ": " + what
		}
		return what
	}
	if len(rel) == 0 {
		return p.message()
	}
	return schemas.FieldPath(rel, "(document)") + ": " + p.message()
}

func (p problem) field() string { return schemas.FieldPath(p.path, "(document)") }

// problems keeps the first maxProblems problems and counts the rest.
type problems struct {
	list []problem
	n    int
}

func (ps *problems) add(p problem) {
	ps.n++
	if len(ps.list) < maxProblems {
		ps.list = append(ps.list, p)
	}
}

func (ps *problems) errors(path string) Errors {
	var es Errors
	for _, p := range ps.list {
		es = append(es, &Error{File: path, Line: p.line, Field: p.field(), Msg: p.message()})
	}
	if more := ps.n - len(ps.list); more > 0 {
		es = append(es, &Error{File: path, Msg: fmt.Sprintf("and %d more problems", more)})
	}
	return es
}

// entryText is the problems of one AC entry (at skip tokens into the file's paths), named
// by label: "AC-2: line 14: unknown key criterian (did you mean criterion?); line 15: ...".
func (ps *problems) entryText(label string, skip int) string {
	parts := make([]string, 0, len(ps.list)+1)
	for _, p := range ps.list {
		parts = append(parts, fmt.Sprintf("line %d: %s", p.line, p.inEntry(skip)))
	}
	if more := ps.n - len(ps.list); more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more problems", more))
	}
	return label + ": " + strings.Join(parts, "; ")
}
