// Package deploy checks tribunal's deployment files without a cluster or a Docker engine:
// docker-compose.yml (loaded and validated with compose-go), the Dockerfiles (parsed), and
// every Kubernetes manifest in k8s/ (decoded strictly into the Kubernetes API types, then
// held to the pod policies and the cross-references the manifests rely on).
//
// Every checker takes the file's name and bytes and returns Problems, so the tests can feed
// both the real files and the broken ones in testdata/ and assert that a broken file fails
// with a message naming the file, the object and the field.
package deploy

import (
	"fmt"
	"strings"
)

// Problem is one finding of a checker: where it is and what is wrong.
type Problem struct {
	// File is the file's name as given to the checker.
	File string
	// Object names the object in the file: "Deployment/judge", "service judge"; empty
	// for a problem of the whole file.
	Object string
	// Field is the path of the offending field, e.g.
	// "spec.template.spec.containers[0].readinessProbe"; empty when none applies.
	Field string
	// Msg says what is wrong.
	Msg string
}

// String renders the problem as "file: object: field: message", leaving out empty parts.
func (p Problem) String() string {
	parts := []string{p.File}
	if p.Object != "" {
		parts = append(parts, p.Object)
	}
	if p.Field != "" {
		parts = append(parts, p.Field)
	}
	return strings.Join(append(parts, p.Msg), ": ")
}

// problems collects Problems for one file.
type problems struct {
	file string
	list []Problem
}

func (ps *problems) add(object, field, format string, args ...any) {
	ps.list = append(ps.list, Problem{File: ps.file, Object: object, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Report joins problems into one message, one problem per line, for test failures.
func Report(ps []Problem) string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = "  " + p.String()
	}
	return strings.Join(lines, "\n")
}
