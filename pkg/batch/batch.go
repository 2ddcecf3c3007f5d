// Package batch reads batch files: YAML documents (a file, or a folder holding
// batch.yaml) listing the acceptance criteria to judge. The file is checked against the
// JSON Schema in schemas/batch.schema.json; every error names the file, the line and the
// field. An error inside one AC entry costs only that AC: the rest of the batch goes on.
package batch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
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

var batchSchema = func() *jsonschema.Schema {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.Batch))
	if err != nil {
		panic(fmt.Sprintf("embedded batch schema: %v", err))
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("batch.schema.json", doc); err != nil {
		panic(err)
	}
	s, err := c.Compile("batch.schema.json")
	if err != nil {
		panic(fmt.Sprintf("embedded batch schema: %v", err))
	}
	return s
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
func Parse(path string, data []byte) (*Batch, error) {
	fileErr := func(line int, field, msg string) error {
		return Errors{{File: path, Line: line, Field: field, Msg: msg}}
	}
	astFile, err := parser.ParseBytes(data, 0)
	if err != nil {
		return nil, fileErr(yamlLine(err), "", "not valid YAML: "+firstLine(err.Error()))
	}
	if line := firstAlias(astFile); line > 0 {
		return nil, fileErr(line, "", "YAML aliases (*name) are not allowed in batch files")
	}
	// Decode from the tree already parsed: tokenizing the text again (once for JSON, once
	// for the values) tripled the parser's memory, which at 100,000 ACs was the whole
	// process's peak.
	var top map[string]any
	if len(astFile.Docs) > 0 && astFile.Docs[0] != nil && astFile.Docs[0].Body != nil {
		if err := yaml.NodeToValue(astFile.Docs[0].Body, &top); err != nil {
			return nil, fileErr(yamlLine(err), "", "not a YAML mapping: "+firstLine(err.Error()))
		}
	}
	jsonData, err := json.Marshal(top)
	if err != nil {
		return nil, fileErr(0, "", "not representable as JSON: "+firstLine(err.Error()))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(jsonData))
	if err != nil {
		return nil, fileErr(0, "", "not a YAML mapping: "+err.Error())
	}
	acProblems := map[int][]string{}
	var fileErrs Errors
	if verr := batchSchema.Validate(inst); verr != nil {
		ve, ok := verr.(*jsonschema.ValidationError)
		if !ok {
			return nil, fileErr(0, "", verr.Error())
		}
		for _, leaf := range leaves(ve) {
			// One error per offending key: an unknown key is reported at its own line, a
			// missing one at its parent's (line 1 for the document).
			locs := [][]string{leaf.InstanceLocation}
			switch k := leaf.ErrorKind.(type) {
			case *kind.AdditionalProperties:
				locs = nil
				for _, p := range k.Properties {
					locs = append(locs, append(append([]string(nil), leaf.InstanceLocation...), p))
				}
			case *kind.Required:
				locs = nil
				for _, p := range k.Missing {
					locs = append(locs, append(append([]string(nil), leaf.InstanceLocation...), p))
				}
			}
			msg := leaf.ErrorKind.LocalizedString(printer)
			for _, loc := range locs {
				field := fieldPath(loc)
				line := lineOf(astFile, loc)
				if line == 0 {
					line = 1
				}
				if len(loc) >= 2 && loc[0] == "acs" {
					if i, err := strconv.Atoi(loc[1]); err == nil {
						acProblems[i] = append(acProblems[i], fmt.Sprintf("%s:%d: %s: %s", path, line, field, msg))
						continue
					}
				}
				fileErrs = append(fileErrs, &Error{File: path, Line: line, Field: field, Msg: msg})
			}
		}
	}
	if len(fileErrs) > 0 {
		return nil, fileErrs
	}
	var f File
	// Entries that failed the schema are decoded leniently below from the raw values:
	// one bad field must not stop the other entries from loading.
	rawACs, _ := top["acs"].([]any)
	delete(top, "acs")
	hdr, _ := yaml.Marshal(top)
	if err := yaml.Unmarshal(hdr, &f); err != nil {
		return nil, fileErr(0, "", firstLine(err.Error()))
	}
	if len(rawACs) > MaxACs {
		return nil, fileErr(lineOf(astFile, []string{"acs"}), "acs", fmt.Sprintf("%d entries; at most %d per batch", len(rawACs), MaxACs))
	}
	// Take the entries' lines now and let the syntax tree and the schema instance go: they
	// are several times the file's size, and the entries below are decoded one at a time.
	acLines := make([]int, len(rawACs))
	for i := range rawACs {
		acLines[i] = lineOf(astFile, []string{"acs", strconv.Itoa(i)})
	}
	astFile, inst, jsonData = nil, nil, nil
	b := &Batch{Path: path, Dir: filepath.Dir(path)}
	seen := map[string]int{}
	for i, e := range rawACs {
		m, _ := e.(map[string]any)
		field := fmt.Sprintf("acs[%d]", i)
		line := acLines[i]
		var ac AC
		if probs := acProblems[i]; len(probs) > 0 {
			// Keep what can be read (the id above all) and record the problem.
			ac.ID, _ = m["id"].(string)
			ac.Problem = strings.Join(probs, "; ")
		} else {
			one, _ := yaml.Marshal(m)
			if err := yaml.Unmarshal(one, &ac); err != nil {
				ac.ID, _ = m["id"].(string)
				ac.Problem = fmt.Sprintf("%s:%d: %s: %s", path, line, field, firstLine(err.Error()))
			}
		}
		ac.Line = line
		if ac.ID == "" || validID(ac.ID) != nil {
			b.Rejected = append(b.Rejected, &Error{File: path, Line: line, Field: field + ".id", Msg: "missing or invalid id; entry skipped: " + ac.Problem})
			continue
		}
		if first, dup := seen[ac.ID]; dup {
			b.Rejected = append(b.Rejected, &Error{File: path, Line: line, Field: field + ".id", Msg: fmt.Sprintf("duplicate id %q (first at line %d); entry skipped", ac.ID, first)})
			continue
		}
		seen[ac.ID] = line
		f.ACs = append(f.ACs, ac)
	}
	b.File = f
	if len(b.ACs) == 0 {
		return nil, append(Errors{{File: path, Field: "acs", Msg: "no usable AC entries"}}, b.Rejected...)
	}
	return b, nil
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

// lineOf finds the line of a field in the parsed YAML, or the nearest parent's. It walks
// the syntax tree token by token: keys are user text and must never be parsed as a path.
func lineOf(f *ast.File, loc []string) int {
	if f == nil || len(f.Docs) == 0 || f.Docs[0] == nil {
		return 0
	}
	node := f.Docs[0].Body
	line := 0
	for _, tok := range loc {
		next := child(node, tok)
		if next == nil {
			break
		}
		node = next
		if t := node.GetToken(); t != nil {
			line = t.Position.Line
		}
	}
	return line
}

func child(n ast.Node, tok string) ast.Node {
	switch n := n.(type) {
	case *ast.DocumentNode:
		return child(n.Body, tok)
	case *ast.TagNode:
		return child(n.Value, tok)
	case *ast.AnchorNode:
		return child(n.Value, tok)
	case *ast.MappingValueNode:
		if k := n.Key; k != nil && k.GetToken() != nil && k.GetToken().Value == tok {
			return n.Value
		}
	case *ast.MappingNode:
		for _, v := range n.Values {
			if c := child(v, tok); c != nil {
				return c
			}
		}
	case *ast.SequenceNode:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Values) {
			return n.Values[i]
		}
	}
	return nil
}

func yamlLine(err error) int {
	msg := err.Error()
	if i := strings.Index(msg, "["); i == 0 {
		if j := strings.Index(msg, ":"); j > 1 {
			if n, err := strconv.Atoi(msg[1:j]); err == nil {
				return n
			}
		}
	}
	return 0
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

type aliasFinder struct{ line int }

func (a *aliasFinder) Visit(n ast.Node) ast.Visitor {
	if a.line != 0 {
		return nil
	}
	if al, ok := n.(*ast.AliasNode); ok {
		a.line = al.GetToken().Position.Line
		return nil
	}
	return a
}

// firstAlias returns the line of the first alias in f, or 0.
func firstAlias(f *ast.File) int {
	a := &aliasFinder{}
	for _, d := range f.Docs {
		if d != nil && d.Body != nil {
			ast.Walk(a, d.Body)
		}
	}
	return a.line
}
