package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// The production binary carries no test doubles (the fake model server is cmd/fake-llm),
// and no library package stands above a service: only internal/app and this command
// import services/....
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "/internal/testutil/") {
			t.Errorf("tribunal imports %s", p)
		}
	}
	out, err = exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasSuffix(f[0], "/internal/app") || strings.HasSuffix(f[0], "/cmd/tribunal") ||
			strings.Contains(f[0], "/services/") {
			continue
		}
		for _, imp := range f[1:] {
			if strings.Contains(imp, "tribunal/services/") {
				t.Errorf("%s imports %s", f[0], imp)
			}
		}
	}
}

// TestRulesImportNoInfrastructure: the rules (pkg/rulebook, and every kind's rules, which
// they reach through pkg/kind's registry) do no I/O, so nothing they import may be a
// server, a broker, telemetry, a browser or an object-store client, nor one of tribunal's
// packages that drive them: a rule is tested, replayed and audited without any of it.
// The contracts of storage (pkg/kv, pkg/blob) are interfaces the rules' callers fill.
func TestRulesImportNoInfrastructure(t *testing.T) {
	out, err := exec.Command("go", "list", "../../pkg/kind/...", "../../examples/kinds/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	rules := []string{"../../pkg/rulebook"}
	for _, p := range strings.Fields(string(out)) {
		// A kind's stages and commands stand on the stages' layer (docs/architecture.md),
		// where I/O is theirs to do.
		if !strings.HasSuffix(p, "/stages") && !strings.HasSuffix(p, "/commands") && !strings.HasSuffix(p, "/kind/stage") {
			rules = append(rules, p)
		}
	}
	const mod = "github.com/tribunal-dev/tribunal/"
	forbidden := []string{
		"github.com/nats-io/nats-server", "github.com/ThreeDotsLabs/watermill", "go.opentelemetry.io",
		"github.com/prometheus", "github.com/chromedp", "github.com/minio",
		mod + "pkg/bus", mod + "pkg/telemetry", mod + "pkg/kind/stage", mod + "pkg/registry", mod + "pkg/sensor/web", mod + "pkg/sensor/command",
		mod + "pkg/artifact", mod + "pkg/blob/fileblob", mod + "pkg/blob/s3blob", mod + "pkg/judge/openai", mod + "services",
	}
	for _, r := range rules {
		out, err := exec.Command("go", "list", "-deps", r).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", r, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, f := range forbidden {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s imports %s", r, dep)
				}
			}
		}
	}
}

// TestOneRunner: the aggregator service and the audit (through rulebook.Memory) load,
// apply and store with the one rulebook.Runner; neither calls the rules itself, so there
// is no second copy of the sequence around them to keep in step.
func TestOneRunner(t *testing.T) {
	calls := func(dir, pkg string) (rules, runner int) {
		t.Helper()
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(file, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					name := ""
					switch fn := n.Fun.(type) {
					case *ast.SelectorExpr:
						if x, ok := fn.X.(*ast.Ident); ok && x.Name == pkg {
							name = fn.Sel.Name
						}
					case *ast.Ident:
						if pkg == "" {
							name = fn.Name
						}
					}
					if name == "Apply" || name == "ApplyBatch" {
						rules++
					}
				case *ast.CompositeLit:
					switch typ := n.Type.(type) {
					case *ast.SelectorExpr:
						if x, ok := typ.X.(*ast.Ident); ok && x.Name == pkg && typ.Sel.Name == "Runner" {
							runner++
						}
					case *ast.Ident:
						if pkg == "" && typ.Name == "Runner" {
							runner++
						}
					}
				}
				return true
			})
		}
		return rules, runner
	}
	if rules, runner := calls("../../services/aggregator", "rulebook"); rules != 0 || runner != 1 {
		t.Errorf("services/aggregator calls the rules %d times and builds %d runners; want none and one", rules, runner)
	}
	if rules, _ := calls("../../pkg/audit", "rulebook"); rules != 0 {
		t.Errorf("pkg/audit calls the rules %d times; want none (it runs rulebook.Memory)", rules)
	}
	// In pkg/rulebook only the runner calls the rules; Memory builds one.
	src, err := os.ReadFile("../../pkg/rulebook/memory.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), "Runner{Store: memStore{m}") {
		t.Error("rulebook.Memory does not run the rules' Runner over its store in memory")
	}
	if strings.Contains(string(src), "Apply(st") || strings.Contains(string(src), "ApplyBatch(") {
		t.Error("rulebook.Memory calls the rules itself")
	}
}

// TestPackageLayers: every package stands on the layer docs/architecture.md's table
// places it on (its most specific pattern), imports nothing of a layer above its own, and
// a package the table does not place fails too, so the page is kept with the code. (Go
// itself refuses an import cycle.)
func TestPackageLayers(t *testing.T) {
	doc, err := os.ReadFile("../../docs/architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	start, end := strings.Index(text, "<!-- layers:"), strings.Index(text, "<!-- /layers -->")
	if start < 0 || end < start {
		t.Fatal("docs/architecture.md has no layers table between <!-- layers: --> and <!-- /layers -->")
	}
	type pattern struct {
		pat   string
		layer int
	}
	var pats []pattern
	cell := regexp.MustCompile("`([^`]+)`")
	for _, row := range strings.Split(text[start:end], "\n") {
		cols := strings.Split(row, "|")
		if len(cols) < 3 {
			continue
		}
		n, err := strconv.Atoi(strings.Fields(strings.TrimSpace(cols[1]) + " x")[0])
		if err != nil {
			continue // the header and the rule
		}
		for _, m := range cell.FindAllStringSubmatch(cols[2], -1) {
			pats = append(pats, pattern{m[1], n})
		}
	}
	// specificity ranks the patterns that match p: more path elements first, then fewer
	// wildcards; -1 for one that does not match.
	specificity := func(pat, p string) int {
		elems := strings.Count(pat, "/") + 1
		switch {
		case strings.HasSuffix(pat, "/..."):
			base := strings.TrimSuffix(pat, "/...")
			if p != base && !strings.HasPrefix(p, base+"/") {
				return -1
			}
			return (elems-1)*10 + 0
		case strings.Contains(pat, "*"):
			if ok, _ := path.Match(pat, p); !ok {
				return -1
			}
			return elems*10 + 5 - strings.Count(pat, "*")
		case pat == p:
			return elems*10 + 9
		}
		return -1
	}
	layerOf := func(p string) (int, string) {
		best, layer, by := -1, 0, ""
		for _, pt := range pats {
			if s := specificity(pt.pat, p); s > best {
				best, layer, by = s, pt.layer, pt.pat
			}
		}
		return layer, by
	}

	const mod = "github.com/tribunal-dev/tribunal/"
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, "../../...").Output()
	if err != nil {
		t.Fatal(err)
	}
	graph := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		p := strings.TrimPrefix(f[0], mod)
		graph[p] = nil
		for _, imp := range f[1:] {
			if strings.HasPrefix(imp, mod) {
				graph[p] = append(graph[p], strings.TrimPrefix(imp, mod))
			}
		}
	}
	for p, imps := range graph {
		lp, by := layerOf(p)
		if lp == 0 {
			t.Errorf("%s stands on no layer of docs/architecture.md's table", p)
			continue
		}
		for _, imp := range imps {
			if li, iby := layerOf(imp); li > lp {
				t.Errorf("%s (layer %d, %s) imports %s (layer %d, %s), above it", p, lp, by, imp, li, iby)
			}
		}
	}
}
