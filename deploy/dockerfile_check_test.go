package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Instruction is one Dockerfile instruction, continuation lines joined.
type Instruction struct {
	// Line is the instruction's first line.
	Line int
	// Cmd is the instruction, upper case: FROM, RUN, USER, ...
	Cmd string
	// Args is the rest of the instruction.
	Args string
}

// Stage is a build stage: its FROM and the instructions up to the next FROM.
type Stage struct {
	From         Instruction
	Instructions []Instruction
}

// ParseDockerfile splits a Dockerfile into stages of instructions. It handles comments,
// parser directives and backslash continuations (comment lines inside a continuation are
// dropped, as BuildKit does); instructions before the first FROM (global ARGs) are
// returned in a stage with an empty From.
func ParseDockerfile(data []byte) []Stage {
	stages := []Stage{{}}
	var cur *Instruction
	sc := bufio.NewScanner(bytes.NewReader(data))
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur == nil) {
			continue
		}
		if cur == nil {
			cmd, args, _ := strings.Cut(trimmed, " ")
			cur = &Instruction{Line: n, Cmd: strings.ToUpper(cmd)}
			trimmed = strings.TrimSpace(args)
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.Args += body + " "
			continue
		}
		cur.Args = strings.Join(strings.Fields(cur.Args+trimmed), " ")
		if cur.Cmd == "FROM" {
			stages = append(stages, Stage{From: *cur})
		} else {
			last := &stages[len(stages)-1]
			last.Instructions = append(last.Instructions, *cur)
		}
		cur = nil
	}
	return stages
}

// DockerfileWant says what CheckDockerfile requires beyond the common rules.
type DockerfileWant struct {
	// Chromium: the final stage installs Debian's chromium and sets TRIBUNAL_CHROMIUM.
	Chromium bool
}

var (
	numericUser     = regexp.MustCompile(`^(\d+)(:\d+)?$`)
	shellSeparators = regexp.MustCompile(`&&|;|\|\|`)
)

// CheckDockerfile holds a tribunal Dockerfile to the image rules: a multi-stage build
// whose build stage compiles ./cmd/tribunal statically (CGO_ENABLED=0, -trimpath, the
// version through -ldflags "-X main.version=..."); a final stage on a base image pinned
// by tag or digest, running as a numeric non-root USER, with an exec-form ENTRYPOINT of
// the tribunal binary, and carrying the healthcheck probe in /usr/local/bin (compose's
// healthchecks run it).
func CheckDockerfile(file string, data []byte, want DockerfileWant) []Problem {
	ps := problems{file: file}
	stages := ParseDockerfile(data)[1:]
	if len(stages) < 2 {
		ps.add("", "FROM", "want a multi-stage build (a Go build stage and a runtime stage), got %d stage(s)", len(stages))
		if len(stages) == 0 {
			return ps.list
		}
	}
	final := stages[len(stages)-1]
	finalRef := fmt.Sprintf("final stage (line %d)", final.From.Line)

	built := false
	for _, st := range stages[:len(stages)-1] {
		for _, in := range st.Instructions {
			if in.Cmd != "RUN" {
				continue
			}
			// The shell command (between &&, ; and ||) that builds ./cmd/tribunal.
			for _, cmd := range shellSeparators.Split(in.Args, -1) {
				if !strings.Contains(cmd, "go build") || !strings.Contains(cmd, "./cmd/tribunal") {
					continue
				}
				built = true
				ref := fmt.Sprintf("build stage (line %d)", st.From.Line)
				for _, w := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version="} {
					if !strings.Contains(cmd, w) {
						ps.add(ref, fmt.Sprintf("RUN (line %d)", in.Line), "go build of ./cmd/tribunal lacks %s", w)
					}
				}
			}
		}
	}
	if !built {
		ps.add("", "RUN", "no build stage runs go build ./cmd/tribunal")
	}

	base := strings.Fields(final.From.Args)
	image := ""
	for _, f := range base {
		if !strings.HasPrefix(f, "--") {
			image = f
			break
		}
	}
	if last := image[strings.LastIndex(image, "/")+1:]; !strings.Contains(last, ":") && !strings.Contains(image, "@") || strings.HasSuffix(image, ":latest") {
		ps.add(finalRef, "FROM", "base image %q: pin a tag or digest", image)
	}

	var user, entrypoint *Instruction
	var copies []Instruction
	env := map[string]string{}
	chromium := false
	for i, in := range final.Instructions {
		switch in.Cmd {
		case "USER":
			user = &final.Instructions[i]
		case "ENTRYPOINT":
			entrypoint = &final.Instructions[i]
		case "COPY":
			copies = append(copies, in)
		case "ENV":
			for k, v := range parseEnv(in.Args) {
				env[k] = v
			}
		case "RUN":
			chromium = chromium || strings.Contains(in.Args, " chromium")
		}
	}
	switch {
	case user == nil:
		ps.add(finalRef, "USER", "missing: the image would run as root")
	case !numericUser.MatchString(user.Args):
		ps.add(finalRef, fmt.Sprintf("USER (line %d)", user.Line), "%q: use a numeric UID so Kubernetes can verify runAsNonRoot", user.Args)
	default:
		if uid, _ := strconv.Atoi(numericUser.FindStringSubmatch(user.Args)[1]); uid == 0 {
			ps.add(finalRef, fmt.Sprintf("USER (line %d)", user.Line), "runs as root")
		}
	}
	if entrypoint == nil {
		ps.add(finalRef, "ENTRYPOINT", "missing")
	} else {
		var argv []string
		if err := json.Unmarshal([]byte(entrypoint.Args), &argv); err != nil {
			ps.add(finalRef, fmt.Sprintf("ENTRYPOINT (line %d)", entrypoint.Line), "want the exec form [\"/usr/local/bin/tribunal\"] (no shell in the image): %v", err)
		} else if !containsSuffix(argv, "/tribunal") {
			ps.add(finalRef, fmt.Sprintf("ENTRYPOINT (line %d)", entrypoint.Line), "%q does not run tribunal", argv)
		}
	}
	probe := false
	for _, c := range copies {
		f := strings.Fields(c.Args)
		if len(f) >= 2 && strings.HasPrefix(f[len(f)-1], "/usr/local/bin/") && containsSuffix(f[:len(f)-1], "healthcheck") {
			probe = true
		}
	}
	if !probe {
		ps.add(finalRef, "COPY", "the healthcheck probe is not copied to /usr/local/bin (docker-compose.yml's healthchecks run it)")
	}
	if want.Chromium {
		if !chromium {
			ps.add(finalRef, "RUN", "does not install chromium")
		}
		if env["TRIBUNAL_CHROMIUM"] != "/usr/bin/chromium" {
			ps.add(finalRef, "ENV", "TRIBUNAL_CHROMIUM=/usr/bin/chromium not set (got %q)", env["TRIBUNAL_CHROMIUM"])
		}
	}
	return ps.list
}

func containsSuffix(list []string, suffix string) bool {
	for _, s := range list {
		if strings.HasSuffix(s, suffix) {
			return true
		}
	}
	return false
}

// parseEnv reads ENV's key=value pairs (unquoted values; the form tribunal's files use).
func parseEnv(args string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(args) {
		if k, v, ok := strings.Cut(f, "="); ok {
			out[k] = strings.Trim(v, `"`)
		}
	}
	return out
}
