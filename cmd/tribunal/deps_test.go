package main

import (
	"os/exec"
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
	out, err := exec.Command("go", "list", "../../pkg/kind/...").Output()
	if err != nil {
		t.Fatal(err)
	}
	rules := []string{"../../pkg/rulebook"}
	for _, p := range strings.Fields(string(out)) {
		if !strings.HasSuffix(p, "/stages") {
			rules = append(rules, p)
		}
	}
	const mod = "github.com/tribunal-dev/tribunal/"
	forbidden := []string{
		"github.com/nats-io/nats-server", "github.com/ThreeDotsLabs/watermill", "go.opentelemetry.io",
		"github.com/prometheus", "github.com/chromedp", "github.com/minio",
		mod + "pkg/bus", mod + "pkg/telemetry", mod + "pkg/stage", mod + "pkg/kinds", mod + "pkg/sensor",
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
