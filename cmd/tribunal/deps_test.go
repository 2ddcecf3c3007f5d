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
