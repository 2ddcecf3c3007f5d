package command

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// project lays out seed 004's adapter folder in a fresh project root: the app adapter's
// sense.sh and gates.sh, each recording its working directory, its $0, its arguments and
// two variables to a log beside itself. It returns the root.
func project(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "argus", "adapters", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	shot := tinyPNG(t, root)
	record := `{ pwd; echo "$0"; printf '%s\n' "$@"; echo "udid=${ARGUS_SIM_UDID:-}"; echo "child=${SIMCTL_CHILD_ARGUS_ROUTE:-}"; echo "secret=${TRIBUNAL_TEST_SECRET:-}"; } > "$(dirname "$0")/$(basename "$0").log"` + "\n"
	sense := "#!/bin/sh\n" + record + parseArgs[len("#!/bin/sh\n"):] +
		"cp \"" + shot + "\" \"$out/render.png\"\necho '{\"id\":\"screen.list\"}' > \"$out/probe.json\"\n"
	gates := "#!/bin/sh\n" + record + `echo '{"build":"pass","lint":"pass"}'` + "\n"
	for name, body := range map[string]string{"sense.sh": sense, "gates.sh": gates} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "argus", "specs", "tasks"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "argus", "specs", "tasks", "spec.json"), []byte(`{"feature":"tasks"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	return root
}

// logOf reads what a project script recorded: working directory, $0, arguments, variables.
func logOf(t *testing.T, root, script string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "argus", "adapters", "app", script+".log"))
	if err != nil {
		t.Fatalf("%s did not run: %v", script, err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// TestProjectSensorRunsLocally: in the all-in-one mode (Local) a view whose project ships
// argus/adapters/app/sense.sh runs it as the seed's loop does, from the project root and
// under the seed's relative name, with the seed's argv, the variables --adapter-env
// passes (a name and a prefix) and nothing else of the renderer's environment.
func TestProjectSensorRunsLocally(t *testing.T) {
	root := project(t)
	t.Setenv("ARGUS_SIM_UDID", "argus-sim-c1")
	t.Setenv("SIMCTL_CHILD_ARGUS_ROUTE", "app://tasks/list")
	t.Setenv("TRIBUNAL_TEST_SECRET", "s3cr3t")
	reg, err := New(Options{Local: true, PassEnv: []string{"ARGUS_SIM_UDID", "SIMCTL_CHILD_*"}})
	if err != nil {
		t.Fatal(err)
	}
	v := view
	v.Project = &sensor.Project{Root: root, Sense: "argus/adapters/app/sense.sh"}
	if _, err := reg.Sense(context.Background(), "app", v); err != nil {
		t.Fatal(err)
	}
	got := logOf(t, root, "sense.sh")
	want := []string{root, "argus/adapters/app/sense.sh", "--route", "/settings", "--state", "loaded", "--appearance", "dark", "--fixture", "fx-1", "--out"}
	if len(got) != len(want)+4 || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("sense.sh saw %q, want %q DIR and the variables", got, want)
	}
	if vars := strings.Join(got[len(want)+1:], " "); vars != "udid=argus-sim-c1 child=app://tasks/list secret=" {
		t.Errorf("sense.sh's variables: %s", vars)
	}
}

// TestProjectSensorNotRunShared: a shared renderer (not Local) never runs a project's
// script; the view is unrenderable with a reason naming the script and the flag that
// registers one. A registered adapter overrides the project's in either mode.
func TestProjectSensorNotRunShared(t *testing.T) {
	root := project(t)
	v := view
	v.Project = &sensor.Project{Root: root, Sense: "argus/adapters/app/sense.sh"}
	reg, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.Sense(context.Background(), "app", v)
	if !errors.Is(err, sensor.ErrNoSensor) || !sensor.IsUnrenderable(err) {
		t.Fatalf("want ErrNoSensor, got %v", err)
	}
	for _, w := range []string{"the project ships argus/adapters/app/sense.sh", "--adapter app="} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q does not say %q", err, w)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "argus", "adapters", "app", "sense.sh.log")); err == nil {
		t.Fatal("a shared renderer ran the project's sense.sh")
	}

	dir := t.TempDir()
	op := writeAdapter(t, dir, "op.sh", "cp \""+tinyPNG(t, dir)+"\" \"$out/render.png\"\necho '{}' > \"$out/probe.json\"\npwd > \""+dir+"/op.log\"\n")
	for _, local := range []bool{false, true} {
		reg, err := New(Options{Adapters: map[string]string{"app": op}, Local: local})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Sense(context.Background(), "app", v); err != nil {
			t.Fatalf("local %v: %v", local, err)
		}
		if _, err := os.Stat(filepath.Join(root, "argus", "adapters", "app", "sense.sh.log")); err == nil {
			t.Fatalf("local %v: the project's sense.sh ran although --adapter app is registered", local)
		}
		// Locally a registered sensor runs from the project root too.
		cwd, _ := os.ReadFile(filepath.Join(dir, "op.log"))
		if local != (strings.TrimSpace(string(cwd)) == root) {
			t.Errorf("local %v: the registered sensor ran in %s", local, cwd)
		}
	}
}

// TestProjectSensorMissing: locally, a non-web adapter with no sense.sh in its project and
// none registered is unrenderable, naming where the seed looks for it.
func TestProjectSensorMissing(t *testing.T) {
	reg, err := New(Options{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	v := view
	v.Project = &sensor.Project{Root: "/work/proj"}
	_, err = reg.Sense(context.Background(), "app", v)
	if !errors.Is(err, sensor.ErrNoSensor) || !strings.Contains(err.Error(), "/work/proj ships no argus/adapters/app/sense.sh") {
		t.Fatalf("got %v", err)
	}
}

// TestProjectSensorNotExecutable: a project's sense.sh that cannot be started is no
// sensor (the view blocks), not a failed build for the loop to spend an iteration on.
func TestProjectSensorNotExecutable(t *testing.T) {
	root := project(t)
	if err := os.Chmod(filepath.Join(root, "argus", "adapters", "app", "sense.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := New(Options{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	v := view
	v.Project = &sensor.Project{Root: root, Sense: "argus/adapters/app/sense.sh"}
	_, err = reg.Sense(context.Background(), "app", v)
	if !errors.Is(err, sensor.ErrNoSensor) || !strings.Contains(err.Error(), "chmod +x") {
		t.Fatalf("got %v", err)
	}
}

func TestCheckPassEnv(t *testing.T) {
	for _, ok := range []string{"ARGUS_SIM_UDID", "SIMCTL_CHILD_*", "_X", "a1*"} {
		if err := CheckPassEnv([]string{ok}); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"*", "", "A=B", "1X", "A*B", "A B", "**"} {
		if err := CheckPassEnv([]string{bad}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	if _, err := New(Options{PassEnv: []string{"*"}}); err == nil {
		t.Error("New took a lone *")
	}
}

// TestProjectGatesRunLocally: locally, a project's gates.sh runs from the project root on
// the real spec.json under its repository-relative path, as the seed's gates.sh invokes
// it ("ADAPTER --spec SPEC --target ID --state S --appearance A [--probe probe.json]"),
// with the passed variables only.
func TestProjectGatesRunLocally(t *testing.T) {
	root := project(t)
	t.Setenv("ARGUS_SIM_UDID", "argus-sim-c2")
	t.Setenv("TRIBUNAL_TEST_SECRET", "s3cr3t")
	g := &Gates{Local: true, PassEnv: []string{"ARGUS_SIM_UDID"}}
	in := GatesInput{Spec: []byte(`{"copy":true}`), Probe: []byte(`{}`), Target: "list", State: "empty", Appearance: "light",
		Project: &GatesProject{Root: root, Spec: "argus/specs/tasks/spec.json", Gates: "argus/adapters/app/gates.sh"}}
	run, err := g.Run(context.Background(), "app", in)
	if err != nil {
		t.Fatal(err)
	}
	if run.Adapter != "argus/adapters/app/gates.sh" || strings.TrimSpace(string(run.Output)) != `{"build":"pass","lint":"pass"}` {
		t.Fatalf("run %+v", run)
	}
	got := logOf(t, root, "gates.sh")
	want := []string{root, "argus/adapters/app/gates.sh", "--spec", "argus/specs/tasks/spec.json", "--target", "list", "--state", "empty", "--appearance", "light", "--probe"}
	if len(got) != len(want)+4 || strings.Join(got[:len(want)], "\n") != strings.Join(want, "\n") {
		t.Fatalf("gates.sh saw %q, want %q PROBE and the variables", got, want)
	}
	if vars := strings.Join(got[len(want)+1:], " "); vars != "udid=argus-sim-c2 child= secret=" {
		t.Errorf("gates.sh's variables: %s", vars)
	}
}

// TestGatesNeverSkipSilently: which gates adapter runs, and when none may: a shared gater
// blocks a project that ships gates.sh it has not registered, and a job that does not say
// what its project ships, unless the operator registered one; only when no gates adapter
// exists at all does nothing run, with the reason.
func TestGatesNeverSkipSilently(t *testing.T) {
	root := project(t)
	dir := t.TempDir()
	op := filepath.Join(dir, "op.sh")
	if err := os.WriteFile(op, []byte("#!/bin/sh\npwd > "+dir+"/op.log\nprintf '%s\\n' \"$@\" >> "+dir+"/op.log\necho '{\"build\":\"fail\"}'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ships := &GatesProject{Root: root, Spec: "argus/specs/tasks/spec.json", Gates: "argus/adapters/app/gates.sh"}
	none := &GatesProject{Root: root, Spec: "argus/specs/tasks/spec.json"}
	in := func(p *GatesProject) GatesInput {
		return GatesInput{Spec: []byte(`{"copy":true}`), Probe: []byte(`{}`), Target: "list", State: "empty", Appearance: "light", Project: p}
	}
	tests := []struct {
		name    string
		g       *Gates
		project *GatesProject
		blocked string // the refusal names this; "" when not blocked
		adapter string // what ran
		none    string // why nothing ran
	}{
		{"shared, project ships gates.sh, none registered", &Gates{}, ships, "the project ships argus/adapters/app/gates.sh", "", ""},
		{"nil gater, project ships gates.sh", nil, ships, "--gates-adapter app=", "", ""},
		{"shared, the job does not say", &Gates{}, nil, "does not say whether its project ships argus/adapters/app/gates.sh", "", ""},
		{"local, the job does not say", &Gates{Local: true}, nil, "does not say", "", ""},
		{"shared, registered, the job does not say", &Gates{Commands: map[string]string{"app": op}}, nil, "", "the gates command registered for app", ""},
		{"shared, registered overrides the project's", &Gates{Commands: map[string]string{"app": op}}, ships, "", "the gates command registered for app", ""},
		{"local, registered overrides the project's", &Gates{Commands: map[string]string{"app": op}, Local: true}, ships, "", "the gates command registered for app", ""},
		{"local, the project's", &Gates{Local: true}, ships, "", "argus/adapters/app/gates.sh", ""},
		{"shared, none anywhere", &Gates{}, none, "", "", "no gates adapter: the project ships no argus/adapters/app/gates.sh and no gates command is registered for adapter \"app\""},
		{"local, none anywhere", &Gates{Local: true}, none, "", "", "no gates adapter: the project ships no argus/adapters/app/gates.sh and no gates command is registered for adapter \"app\""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(filepath.Join(root, "argus", "adapters", "app", "gates.sh.log"))
			os.Remove(filepath.Join(dir, "op.log"))
			run, err := tc.g.Run(context.Background(), "app", in(tc.project))
			switch {
			case tc.blocked != "":
				if !errors.Is(err, ErrGatesBlocked) || !strings.Contains(err.Error(), tc.blocked) {
					t.Fatalf("want blocked naming %q, got %+v %v", tc.blocked, run, err)
				}
			case err != nil:
				t.Fatal(err)
			case run.Adapter != tc.adapter || !strings.Contains(run.None, tc.none) || (tc.none == "") != (run.None == ""):
				t.Fatalf("ran %q (none %q), want %q (none %q)", run.Adapter, run.None, tc.adapter, tc.none)
			}
			_, projErr := os.Stat(filepath.Join(root, "argus", "adapters", "app", "gates.sh.log"))
			if ranProject := projErr == nil; ranProject != (tc.adapter == "argus/adapters/app/gates.sh") {
				t.Errorf("the project's gates.sh ran: %v", ranProject)
			}
			if log, err := os.ReadFile(filepath.Join(dir, "op.log")); err == nil {
				// The operator's command runs in the project root on the real spec locally,
				// and in a folder of its own on a copy of the spec when shared.
				lines := strings.Split(string(log), "\n")
				local := tc.g != nil && tc.g.Local && tc.project != nil
				if inRoot := lines[0] == root && lines[2] == "argus/specs/tasks/spec.json"; inRoot != local {
					t.Errorf("the operator's command ran in %s on %s (local %v)", lines[0], lines[2], local)
				}
			}
		})
	}
}

// TestGatesCommandFailures: a gates command that cannot tell its result is an error
// naming it (the caller's failed build gate), never a result.
func TestGatesCommandFailures(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for name, tc := range map[string]struct{ path, want string }{
		"exit":    {write("exit.sh", "echo 'npm ERR! missing script: lint' >&2\nexit 1\n"), "missing script: lint"},
		"flood":   {write("flood.sh", "head -c 2000000 /dev/zero | tr '\\0' 'x'\n"), "printed more than"},
		"missing": {filepath.Join(dir, "nope.sh"), "no such file"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := (&Gates{Commands: map[string]string{"web": tc.path}}).Run(context.Background(), "web", GatesInput{Probe: []byte(`{}`), Project: &GatesProject{}})
			if err == nil || errors.Is(err, ErrGatesBlocked) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error saying %q", err, tc.want)
			}
		})
	}
}
