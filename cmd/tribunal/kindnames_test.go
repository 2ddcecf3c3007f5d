package main

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// kindNamesAllowed are the files outside a kind's folder that still name it, each with
// why. A key is "<file> <kinds>", the kinds it names joined by commas in the order of
// kindOrder; an entry whose file names other kinds, or none, fails the test, so the list
// only shrinks. Each is held by a format already on disk or published (docs/architecture.md,
// "What still names a kind outside its folder").
var kindNamesAllowed = map[string]string{
	// Held by a format already written.
	"pkg/rulebook/complete.go ab":    "records.Completion.ManifestRef is the ab manifest's ref, as batch records stored before per-kind manifests carry it",
	"pkg/client/results.go ab":       "results.json's top level is the ab manifest (Results.Manifest), the format teams' pipelines read",
	"pkg/ingress/api.go ab":          "the ingress's results answer carries the same ab manifest as results.json",
	"pkg/batch/batch.go ab":          "a batch entry without a kind is ab: the batch format's default since before there were kinds",
	"schemas/schemas.go rubric":      "the seed's Argus schemas are published at schemas/argus/, which README links for teams' editors",
	"internal/e2e/harness.go rubric": "the end-to-end harness serves rubric features to the tests (a test helper, not shipped code)",
}

// kindOrder is the order of the kinds in a kindNamesAllowed key.
var kindOrder = []string{"ab", "critic", "equivalence", "rubric"}

// kindMention is one place a non-test Go file names a kind.
type kindMention struct {
	file string
	line int
	kind string
	what string
}

// TestKindNamedOnlyInItsFolder: a kind is one folder and one registry line. For every
// registered kind (and every example kind under examples/kinds), no non-test Go file
// outside pkg/kind/<name> and examples/kinds/<name> imports the kind's packages, uses an
// exported identifier spelt with the kind's name (ABSpec, CriticVote, KindRubric), or
// writes the kind's name as a string literal, except the registry's import in pkg/registry
// and the kind-name constant's declaration in pkg/events; the few that remain are in
// kindNamesAllowed with a reason.
func TestKindNamedOnlyInItsFolder(t *testing.T) {
	root := filepath.Join("..", "..")
	names := map[string]string{} // kind -> its Go spelling (AB, Critic, ...)
	for _, k := range registry.All() {
		names[string(k.Name())] = ""
	}
	examples, _ := os.ReadDir(filepath.Join(root, "examples", "kinds"))
	for _, e := range examples {
		if e.IsDir() {
			names[e.Name()] = ""
		}
	}
	mentions, err := kindMentions(root, names)
	if err != nil {
		t.Fatal(err)
	}
	// The kinds each file names, as a kindNamesAllowed key.
	named := map[string]map[string]bool{}
	for _, m := range mentions {
		if named[m.file] == nil {
			named[m.file] = map[string]bool{}
		}
		named[m.file][m.kind] = true
	}
	keyOf := func(file string) string {
		var ks []string
		for _, k := range kindOrder {
			if named[file][k] {
				ks = append(ks, k)
			}
		}
		for k := range named[file] { // a kind outside kindOrder (an example kind) sorts last
			if !slices.Contains(kindOrder, k) {
				ks = append(ks, k)
			}
		}
		return file + " " + strings.Join(ks, ",")
	}
	used := map[string]bool{}
	bad := false
	for _, m := range mentions {
		key := keyOf(m.file)
		if _, ok := kindNamesAllowed[key]; ok {
			used[key] = true
			continue
		}
		t.Errorf("%s:%d names the %s kind outside its folder: %s", m.file, m.line, m.kind, m.what)
		bad = true
	}
	if bad {
		t.Log("a kind supplies what differs through pkg/kind's optional interfaces (docs/adding-a-kind.md); " +
			"only a name a format already written holds belongs in kindNamesAllowed, with the reason")
	}
	var stale []string
	for key := range kindNamesAllowed {
		if !used[key] {
			stale = append(stale, key)
		}
	}
	sort.Strings(stale)
	for _, s := range stale {
		file := strings.Fields(s)[0]
		now := strings.TrimPrefix(keyOf(file), file+" ")
		if now == "" {
			now = "no kind"
		}
		t.Errorf("kindNamesAllowed has %q, but %s now names %s: correct or take out the entry", s, file, now)
	}
}

// kindMentions finds every place a non-test Go file under root, outside the kind's own
// folders, names one of kinds. names maps each kind to its Go spelling, filled from the
// kind-name constants (events.KindAB is "ab") or, for a kind without one, its name
// capitalised.
func kindMentions(root string, names map[string]string) ([]kindMention, error) {
	const mod = "github.com/tribunal-dev/tribunal/"
	// The spelling of each kind's name in Go identifiers, from pkg/events' constants.
	consts, err := parser.ParseDir(token.NewFileSet(), filepath.Join(root, "pkg", "events"), func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, 0)
	if err != nil {
		return nil, err
	}
	for _, p := range consts {
		for _, f := range p.Files {
			ast.Inspect(f, func(n ast.Node) bool {
				if vs, ok := n.(*ast.ValueSpec); ok && len(vs.Names) == 1 && len(vs.Values) == 1 {
					if lit, ok := vs.Values[0].(*ast.BasicLit); ok && strings.HasPrefix(vs.Names[0].Name, "Kind") {
						if v, err := strconv.Unquote(lit.Value); err == nil {
							if _, ok := names[v]; ok {
								names[v] = strings.TrimPrefix(vs.Names[0].Name, "Kind")
							}
						}
					}
				}
				return true
			})
		}
	}
	for k, spelt := range names {
		if spelt == "" {
			names[k] = strings.ToUpper(k[:1]) + k[1:]
		}
	}
	var out []kindMention
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		own := func(k string) bool {
			return strings.HasPrefix(rel, "pkg/kind/"+k+"/") || strings.HasPrefix(rel, "examples/kinds/"+k+"/")
		}
		add := func(pos token.Pos, k, what string) {
			out = append(out, kindMention{file: rel, line: fset.Position(pos).Line, kind: k, what: what})
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for k := range names {
				if own(k) {
					continue
				}
				for _, dir := range []string{"pkg/kind/" + k, "examples/kinds/" + k} {
					if p == mod+dir || strings.HasPrefix(p, mod+dir+"/") {
						if rel == "pkg/registry/registry.go" && p == mod+dir+"/stages" {
							continue // the registry line
						}
						add(imp.Pos(), k, "imports "+p)
					}
				}
			}
		}
		var visit func(n ast.Node) bool
		visit = func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.ImportSpec:
				return false
			case *ast.Field:
				// A struct tag is the wire key, not a use of the kind; the field's names,
				// type and doc still are.
				if n.Tag != nil {
					for _, nm := range n.Names {
						ast.Inspect(nm, visit)
					}
					ast.Inspect(n.Type, visit)
					return false
				}
			case *ast.ValueSpec:
				if rel == "pkg/events/values.go" && len(n.Names) == 1 && strings.HasPrefix(n.Names[0].Name, "Kind") {
					for k, spelt := range names {
						if n.Names[0].Name == "Kind"+spelt && !own(k) {
							return false // the kind-name constant
						}
					}
				}
			case *ast.Ident:
				if !n.IsExported() {
					return true
				}
				for k, spelt := range names {
					if !own(k) && slices.Contains(camelWords(n.Name), spelt) {
						add(n.Pos(), k, "identifier "+n.Name)
					}
				}
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					return true
				}
				v, err := strconv.Unquote(n.Value)
				if err != nil {
					return true
				}
				if _, ok := names[v]; ok && !own(v) {
					add(n.Pos(), v, "the string "+n.Value)
				}
			}
			return true
		}
		ast.Inspect(f, visit)
		return nil
	})
	return out, err
}

// camelWords splits a Go identifier into its words: ABSpec is AB, Spec; KindCritic is
// Kind, Critic; CriticVote is Critic, Vote.
func camelWords(s string) []string {
	var words []string
	r := []rune(s)
	start := 0
	for i := 1; i < len(r); i++ {
		upper, prevUpper := unicode.IsUpper(r[i]), unicode.IsUpper(r[i-1])
		nextLower := i+1 < len(r) && unicode.IsLower(r[i+1])
		if (upper && !prevUpper) || (upper && prevUpper && nextLower) || (unicode.IsDigit(r[i]) != unicode.IsDigit(r[i-1])) {
			words = append(words, string(r[start:i]))
			start = i
		}
	}
	return append(words, string(r[start:]))
}

// TestKindMentionsFindEachForm: the search finds an import of a kind's package, an
// exported identifier spelt with its name and its name as a string, outside its folder,
// and leaves alone a struct tag (the wire key), the kind's own folder, the registry's
// import and the kind-name constant.
func TestKindMentionsFindEachForm(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	write := func(rel, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("pkg/events/values.go", "package events\n\ntype Kind string\n\nconst KindCritic Kind = \"critic\"\n\ntype CriticVote struct{}\n")
	write("pkg/registry/registry.go", "package registry\n\nimport _ \"github.com/tribunal-dev/tribunal/pkg/kind/critic/stages\"\n")
	write("pkg/kind/critic/c.go", "package critic\n\nconst name = \"critic\"\n")
	write("pkg/x/x.go", `package x

import _ "github.com/tribunal-dev/tribunal/pkg/kind/critic"

type T struct {
	V int `+"`msgpack:\"critic\"`"+`
}

var v events.CriticVote

const k = "critic"
`)
	write("pkg/x/x_test.go", "package x\n\nconst k2 = \"critic\"\n")
	got, err := kindMentions(root, map[string]string{"critic": ""})
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, m := range got {
		lines = append(lines, fmt.Sprintf("%s:%d %s", m.file, m.line, m.what))
	}
	want := []string{
		"pkg/events/values.go:7 identifier CriticVote",
		"pkg/x/x.go:3 imports github.com/tribunal-dev/tribunal/pkg/kind/critic",
		"pkg/x/x.go:9 identifier CriticVote",
		"pkg/x/x.go:11 the string \"critic\"",
	}
	if !slices.Equal(lines, want) {
		t.Errorf("found\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestKindKeysOnlyInTheirKind: a kind's batch keys are its own (stage.Keyed): no struct in
// pkg/batch decodes one of a registered kind's keys (a yaml tag naming it), and the batch
// format's common schema has none of them, so a key moved back into batch.AC or
// batch.File fails here rather than being read for every kind. The keys that moved out of
// pkg/batch are pinned to their kind (movedKeys), so moving one back together with taking
// it out of the kind's fragment fails too.
func TestKindKeysOnlyInTheirKind(t *testing.T) {
	root := filepath.Join("..", "..")
	owner := map[string]string{} // key -> the kind it is a key of
	for _, k := range registry.All() {
		keyed, ok := k.(stage.Keyed)
		if !ok || len(keyed.BatchKeys().Schema) == 0 {
			continue
		}
		var frag struct {
			Entry map[string]json.RawMessage `json:"entry"`
			Batch map[string]json.RawMessage `json:"batch"`
		}
		if err := json.Unmarshal(keyed.BatchKeys().Schema, &frag); err != nil {
			t.Fatalf("%s: batch keys' schema: %v", k.Name(), err)
		}
		for key := range frag.Entry {
			owner[key] = string(k.Name())
		}
		for key := range frag.Batch {
			owner[key] = string(k.Name())
		}
	}
	if len(owner) == 0 {
		t.Fatal("no registered kind has batch keys: the test would hold nothing")
	}
	for key, k := range movedKeys {
		if owner[key] != k {
			t.Errorf("batch key %s is the %s kind's own (its keys.schema.json), not %q", key, k, owner[key])
		}
	}
	dir := filepath.Join(root, "pkg", "batch")
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			field, ok := n.(*ast.Field)
			if !ok || field.Tag == nil {
				return true
			}
			tag, err := strconv.Unquote(field.Tag.Value)
			if err != nil {
				return true
			}
			name, _, _ := strings.Cut(reflect.StructTag(tag).Get("yaml"), ",")
			if k, ok := owner[name]; ok {
				t.Errorf("%s:%d decodes the batch key %s, which is the %s kind's own: it belongs in the kind's stage.Keyed",
					filepath.ToSlash(path), fset.Position(field.Pos()).Line, name, k)
			}
			return true
		})
	}
	data, err := os.ReadFile(filepath.Join(dir, "common.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var common struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Defs       struct {
			AC struct {
				Properties map[string]json.RawMessage `json:"properties"`
			} `json:"ac"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(data, &common); err != nil {
		t.Fatal(err)
	}
	for _, props := range []map[string]json.RawMessage{common.Properties, common.Defs.AC.Properties} {
		for key := range props {
			if k, ok := owner[key]; ok {
				t.Errorf("pkg/batch/common.schema.json has the batch key %s, which is the %s kind's own", key, k)
			}
		}
	}
}

// movedKeys are the batch keys that were common keys of pkg/batch once and are their kind's
// own now (issue 25 item 2), with that kind: a sample of each kind's, and every ab key.
// ladder and escalate_when stay common: they are events.Repeats, which every kind accepts
// or refuses through kind.Repeating with its own message.
var movedKeys = map[string]string{
	"threshold":  "ab",
	"auto_swap":  "ab",
	"positions":  "ab",
	"task":       "critic",
	"output":     "critic",
	"original":   "equivalence",
	"candidate":  "equivalence",
	"min_cases":  "equivalence",
	"spec":       "rubric",
	"argus_runs": "rubric",
}
