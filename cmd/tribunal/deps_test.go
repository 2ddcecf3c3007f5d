package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
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
		if !strings.HasSuffix(p, "/stages") && !strings.HasSuffix(p, "/kind/stage") {
			rules = append(rules, p)
		}
	}
	const mod = "github.com/tribunal-dev/tribunal/"
	forbidden := []string{
		"github.com/nats-io/nats-server", "github.com/ThreeDotsLabs/watermill", "go.opentelemetry.io",
		"github.com/prometheus", "github.com/chromedp", "github.com/minio",
		mod + "pkg/bus", mod + "pkg/telemetry", mod + "pkg/kind/stage", mod + "pkg/kinds", mod + "pkg/sensor",
		mod + "pkg/ingest", mod + "pkg/blob/fileblob", mod + "pkg/blob/s3blob", mod + "pkg/judge/openai", mod + "services",
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
