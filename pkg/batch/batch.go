// Package batch reads batch files: YAML documents (a file, or a folder holding
// batch.yaml) listing the acceptance criteria to judge. The file is checked against the
// JSON Schema in schemas/batch.schema.json; every error names the file, the line and the
// field. An error inside one AC entry costs only that AC: the rest of the batch goes on.
package batch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"go.yaml.in/yaml/v3"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/tribunal-dev/tribunal/schemas"
)

// DefaultFile is the file looked for when a folder is given.
const DefaultFile = "batch.yaml"

// MaxACs bounds one batch; larger work is split into several batches.
const MaxACs = 1_000_000

// File is a batch file as written.
type File struct {
	Version   int      `yaml:"version"`
	Name      string   `yaml:"name"`
	Tenant    string   `yaml:"tenant"`
	Kind      string   `yaml:"kind"`
	Threshold *float64 `yaml:"threshold"`
	Iteration int      `yaml:"iteration"`
	Positions string   `yaml:"positions"`
	Judges    []string `yaml:"judges"`
	Verify    string   `yaml:"verify"`
	// MinCases and RunnerModel are equivalence defaults.
	MinCases    int    `yaml:"min_cases"`
	RunnerModel string `yaml:"runner_model"`
	ACs         []AC   `yaml:"acs"`
}

// AC is one acceptance criterion entry.
type AC struct {
	ID        string   `yaml:"id"`
	Kind      string   `yaml:"kind"`
	Criterion string   `yaml:"criterion"`
	Ours      string   `yaml:"ours"`
	Reference string   `yaml:"reference"`
	Iteration *int     `yaml:"iteration"`
	Positions string   `yaml:"positions"`
	Judges    []string `yaml:"judges"`
	// critic
	Task       string `yaml:"task"`
	Output     string `yaml:"output"`
	OutputFile string `yaml:"output_file"`
	// equivalence
	Original    string `yaml:"original"`
	Candidate   string `yaml:"candidate"`
	Variant     string `yaml:"variant"`
	Round       int    `yaml:"round"`
	MinCases    int    `yaml:"min_cases"`
	RunnerModel string `yaml:"runner_model"`
	Cases       []Case `yaml:"cases"`
	CasesFile   string `yaml:"cases_file"`
	// rubric
	Spec          string `yaml:"spec"`
	Mode          string `yaml:"mode"`
	MaxIterations int    `yaml:"max_iterations"`
	// Line is where the entry starts in the file.
	Line int `yaml:"-"`
	// Problem, when set, is why this entry cannot be judged (a field error naming the
	// file, line and field). The AC is still reported, as blocked.
	Problem string `yaml:"-"`
}

// Case is one case of an equivalence transfer set.
type Case struct {
	ID    string `yaml:"id" json:"id"`
	Input string `yaml:"input" json:"input"`
	Tag   string `yaml:"tag" json:"tag"`
}

// KindOf is the AC's judge kind: its own, else the batch's, else ab.
func (b *Batch) KindOf(ac AC) string {
	if ac.Kind != "" {
		return ac.Kind
	}
	if b.Kind != "" {
		return b.Kind
	}
	return "ab"
}

// Batch is a loaded batch file.
type Batch struct {
	File
	// Path is the batch file; Dir is the folder its relative paths resolve against.
	Path, Dir string
	// Rejected lists entries that could not even be named (no usable id, duplicate id):
	// they are reported and skipped.
	Rejected []*Error
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

// headerSchema is the whole batch schema, applied to the file without its AC entries;
// acSchema is its AC definition, applied to each entry on its own.
var headerSchema, acSchema = func() (*jsonschema.Schema, *jsonschema.Schema) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Batch))
	if err != nil {
		panic(fmt.Sprintf("embedded batch schema: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("batch.schema.json", doc); err != nil {
		panic(err)
	}
	h, err := c.Compile("batch.schema.json")
	if err != nil {
		panic(fmt.Sprintf("embedded batch schema: %v", err))
	}
	a, err := c.Compile("batch.schema.json#/$defs/ac")
	if err != nil {
		panic(fmt.Sprintf("embedded batch schema, AC definition: %v", err))
	}
	return h, a
}()

// Load reads a batch from a file or a folder holding batch.yaml.
func Load(path string) (*Batch, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		path = filepath.Join(path, DefaultFile)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read batch: %w", err)
	}
	return Parse(path, data)
}

// Parse reads a batch from data; path names it in errors and anchors relative paths.
//
// The document is parsed once into a yaml.Node tree; the header is validated on its own
// and each AC entry is validated, decoded and then dropped from the tree before the next,
// so the parser's memory shrinks as the ACs are built. At 100,000 ACs the earlier
// whole-document decode (tree, generic values, JSON copy, schema instance) was the
// all-in-one process's peak.
func Parse(path string, data []byte) (*Batch, error) {
	fileErr := func(line int, field, msg string) error {
		return Errors{{File: path, Line: line, Field: field, Msg: msg}}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		line, msg := syntaxError(err)
		return nil, fileErr(line, "", "not valid YAML: "+msg)
	}
	if line := firstAlias(&doc); line > 0 {
		return nil, fileErr(line, "", "YAML aliases (*name) are not allowed in batch files")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) > 0 {
		root = root.Content[0]
	}
	if root.Kind != yaml.MappingNode {
		line := root.Line
		if line == 0 {
			line = 1
		}
		return nil, fileErr(line, "(document)", "want a mapping with version and acs")
	}

	// The header: every top-level key but a non-empty acs list, which is checked entry
	// by entry below.
	var acsSeq *yaml.Node
	header := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: root.Line, Column: root.Column}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Value == "acs" && v.Kind == yaml.SequenceNode && len(v.Content) > 0 {
			acsSeq = v
			continue
		}
		header.Content = append(header.Content, k, v)
	}
	var fileErrs Errors
	inst, err := jsonInstance(header)
	if err != nil {
		return nil, fileErr(root.Line, "(document)", err.Error())
	}
	for _, p := range schemaProblems(headerSchema, inst, header, nil) {
		if acsSeq != nil && p.field == "acs" && p.missing {
			continue // present, and validated entry by entry
		}
		fileErrs = append(fileErrs, &Error{File: path, Line: p.line, Field: p.field, Msg: p.msg})
	}
	if len(fileErrs) > 0 {
		return nil, fileErrs
	}
	var f File
	if err := header.Decode(&f); err != nil {
		return nil, fileErr(yamlLine(err), "", YAMLErrorText(err))
	}
	f.ACs = nil
	if acsSeq == nil {
		return nil, fileErr(1, "acs", "no usable AC entries")
	}
	if n := len(acsSeq.Content); n > MaxACs {
		return nil, fileErr(acsSeq.Line, "acs", fmt.Sprintf("%d entries; at most %d per batch", n, MaxACs))
	}

	b := &Batch{Path: path, Dir: filepath.Dir(path)}
	f.ACs = make([]AC, 0, len(acsSeq.Content))
	seen := map[string]int{}
	for i, node := range acsSeq.Content {
		acsSeq.Content[i] = nil // let the tree go as the entries are built
		field := fmt.Sprintf("acs[%d]", i)
		ac := decodeAC(path, i, node)
		if ac.ID == "" || validID(ac.ID) != nil {
			b.Rejected = append(b.Rejected, &Error{File: path, Line: ac.Line, Field: field + ".id", Msg: "missing or invalid id; entry skipped: " + ac.Problem})
			continue
		}
		if first, dup := seen[ac.ID]; dup {
			b.Rejected = append(b.Rejected, &Error{File: path, Line: ac.Line, Field: field + ".id", Msg: fmt.Sprintf("duplicate id %q (first at line %d); entry skipped", ac.ID, first)})
			continue
		}
		seen[ac.ID] = ac.Line
		f.ACs = append(f.ACs, ac)
	}
	b.File = f
	if len(b.ACs) == 0 {
		return nil, append(Errors{{File: path, Field: "acs", Msg: "no usable AC entries"}}, b.Rejected...)
	}
	return b, nil
}

// decodeAC validates one entry against the AC schema and decodes it. A problem is kept
// on the AC (with whatever id could be read) rather than returned: it costs only this AC.
func decodeAC(path string, index int, node *yaml.Node) AC {
	field := fmt.Sprintf("acs[%d]", index)
	ac := AC{Line: node.Line}
	if node.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(node.Content); i += 2 {
			if k, v := node.Content[i], node.Content[i+1]; k.Value == "id" && v.Kind == yaml.ScalarNode && v.Tag == "!!str" {
				ac.ID = v.Value
			}
		}
	}
	inst, err := jsonInstance(node)
	if err != nil {
		ac.Problem = fmt.Sprintf("%s:%d: %s: %s", path, node.Line, field, err)
		return ac
	}
	var probs []string
	for _, p := range schemaProblems(acSchema, inst, node, []string{"acs", strconv.Itoa(index)}) {
		probs = append(probs, fmt.Sprintf("%s:%d: %s: %s", path, p.line, p.field, p.msg))
	}
	if len(probs) > 0 {
		ac.Problem = strings.Join(probs, "; ")
		return ac
	}
	id := ac.ID
	if err := node.Decode(&ac); err != nil {
		ac = AC{ID: id, Problem: fmt.Sprintf("%s:%d: %s: %s", path, yamlLineOr(err, node.Line), field, YAMLErrorText(err))}
	}
	ac.Line = node.Line
	return ac
}

// jsonInstance turns a YAML node into the generic JSON value the schema validator reads.
func jsonInstance(n *yaml.Node) (any, error) {
	var v any
	if err := n.Decode(&v); err != nil {
		return nil, fmt.Errorf("not representable as JSON: %s", firstLine(err.Error()))
	}
	data, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %s", firstLine(err.Error()))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("not representable as JSON: %s", err)
	}
	return inst, nil
}

// problem is one schema violation, placed at a field of the validated node.
type problem struct {
	field   string
	line    int
	msg     string
	missing bool
}

// schemaProblems validates inst (decoded from node, which sits at prefix in the file) and
// places every violation at the line of the offending key: an unknown key at its own
// line, a missing one at its parent's.
func schemaProblems(s *jsonschema.Schema, inst any, node *yaml.Node, prefix []string) []problem {
	verr := s.Validate(inst)
	if verr == nil {
		return nil
	}
	ve, ok := verr.(*jsonschema.ValidationError)
	if !ok {
		return []problem{{field: fieldPath(prefix), line: max(node.Line, 1), msg: verr.Error()}}
	}
	var out []problem
	for _, leaf := range leaves(ve) {
		locs := [][]string{leaf.InstanceLocation}
		missing := false
		switch k := leaf.ErrorKind.(type) {
		case *kind.AdditionalProperties:
			locs = nil
			for _, p := range k.Properties {
				locs = append(locs, append(append([]string(nil), leaf.InstanceLocation...), p))
			}
		case *kind.Required:
			locs = nil
			missing = true
			for _, p := range k.Missing {
				locs = append(locs, append(append([]string(nil), leaf.InstanceLocation...), p))
			}
		}
		msg := leaf.ErrorKind.LocalizedString(printer)
		for _, loc := range locs {
			field := fieldPath(append(append([]string(nil), prefix...), loc...))
			out = append(out, problem{field: field, line: max(lineOf(node, loc), 1), msg: msg, missing: missing})
		}
	}
	return out
}

// leaves flattens a validation error tree to the errors that say something concrete.
func leaves(e *jsonschema.ValidationError) []*jsonschema.ValidationError {
	if len(e.Causes) == 0 {
		return []*jsonschema.ValidationError{e}
	}
	var out []*jsonschema.ValidationError
	for _, c := range e.Causes {
		out = append(out, leaves(c)...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Join(out[i].InstanceLocation, "/") < strings.Join(out[j].InstanceLocation, "/")
	})
	return out
}

// fieldPath turns a JSON pointer's tokens into "acs[2].threshold".
func fieldPath(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		if _, err := strconv.Atoi(t); err == nil {
			b.WriteString("[" + t + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(t)
	}
	if b.Len() == 0 {
		return "(document)"
	}
	return b.String()
}

// lineOf finds the line of a field below n, or the nearest parent's. It walks the tree
// key by key: keys are user text and must never be parsed as a path.
func lineOf(n *yaml.Node, loc []string) int {
	line := n.Line
	for _, tok := range loc {
		next := child(n, tok)
		if next == nil {
			break
		}
		n = next
		line = n.Line
	}
	return line
}

func child(n *yaml.Node, tok string) *yaml.Node {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			return child(n.Content[0], tok)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == tok {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+):`)

// yamlLine is the line a YAML error names, or 0.
func yamlLine(err error) int {
	return yamlLineOr(err, 0)
}

func yamlLineOr(err error, fallback int) int {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return fallback
}

// parserProblems are the yaml.v3 syntax errors raised by its parser rather than its
// scanner. The library reports their line zero-based (go-yaml/yaml#205; scanner errors
// are one-based), so a batch author would be sent to the line above the problem.
var parserProblems = map[string]bool{
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"did not find expected '-' indicator":    true,
	"did not find expected <document start>": true,
	"did not find expected <stream-start>":   true,
	"did not find expected key":              true,
	"did not find expected node content":     true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError is the one-based line of a YAML syntax error (0 if it names none) and its
// message without the library's own line prefix, which would contradict the line
// reported.
func syntaxError(err error) (int, string) {
	msg := strings.TrimPrefix(firstLine(err.Error()), "yaml: ")
	m := yamlLineRe.FindStringSubmatchIndex(msg)
	if m == nil || m[0] != 0 {
		return 0, msg
	}
	line, _ := strconv.Atoi(msg[m[2]:m[3]])
	msg = strings.TrimSpace(msg[m[1]:])
	if parserProblems[msg] {
		line++
	}
	return line, msg
}

// YAMLErrorText is a YAML decoding error on one line: a type error's first line is only
// "unmarshal errors:", with the useful "line N: ..." parts below it.
func YAMLErrorText(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return strings.Join(te.Errors, "; ")
	}
	return firstLine(err.Error())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// firstAlias returns the line of the first alias below n, or 0. Aliases are refused
// outright: expanding them is how a small file becomes a huge one.
func firstAlias(n *yaml.Node) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.AliasNode {
		return max(n.Line, 1)
	}
	for _, c := range n.Content {
		if l := firstAlias(c); l > 0 {
			return l
		}
	}
	return 0
}
