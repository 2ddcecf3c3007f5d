package stages

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
)

// writeFeature writes a minimal rubric feature with one target at route, rendered by
// adapter.
func writeFeature(t *testing.T, dir, adapter, route string) {
	t.Helper()
	files := map[string]string{
		"spec.json": `{"feature":"tasks","adapter":"` + adapter + `","design_system":{"tokens":"tokens.json"},
 "targets":[{"id":"list","route":"` + route + `","states":["populated"],"appearances":["light"],
 "references":[{"state":"populated","appearance":"light","status":"needed","file":"references/list-populated-light.png"}]}]}`,
		"spec.md":     "# tasks\n",
		"tokens.json": `{"colors":{"surface":"#ffffff"}}`,
		"page.html":   "<html></html>",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestRoutesAreOpaque pins the seed's spec schema: a target's route is "How the adapter
// reaches this target. Web: a URL/path. iOS: an 'app://feature/target' deep route.
// Opaque to the loop; interpreted by the adapter." A command adapter receives the route
// exactly as written, from `tribunal run` (which serves feature folders) and from
// `submit` alike; only the built-in web sensor's routes are interpreted.
func TestRoutesAreOpaque(t *testing.T) {
	serve := func(string) (string, error) { return "http://127.0.0.1:4321/", nil }
	tests := []struct {
		name, adapter, route string
		serve                bool
		want, blocked        string
	}{
		{name: "app route, run", adapter: "ios", route: "app://tasks/list", serve: true, want: "app://tasks/list"},
		{name: "app route, submit", adapter: "ios", route: "app://tasks/list", want: "app://tasks/list"},
		{name: "a path is opaque to a command adapter too", adapter: "logger", route: "page.html", serve: true, want: "page.html"},
		{name: "anything a command adapter understands", adapter: "logger", route: "screen=list&tab=2", want: "screen=list&tab=2"},
		{name: "web URL", adapter: "web", route: "https://app.example/tasks", want: "https://app.example/tasks"},
		{name: "web page in the feature folder, run", adapter: "web", route: "page.html", serve: true, want: "http://127.0.0.1:4321/page.html"},
		{name: "web page in the feature folder, submit", adapter: "web", route: "page.html", blocked: `route "page.html" is not a URL the web sensor can reach (only ` + "`tribunal run`" + ` serves feature folders)`},
		{name: "web app route cannot be reached", adapter: "web", route: "app://tasks/list", blocked: `route "app://tasks/list" is not a URL the web sensor can reach (only ` + "`tribunal run`" + ` serves feature folders)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFeature(t, dir, tc.adapter, tc.route)
			store, err := fileblob.New(t.TempDir(), fileblob.Options{})
			if err != nil {
				t.Fatal(err)
			}
			b := &batch.Batch{Path: filepath.Join(dir, "batch.yaml"), Dir: dir}
			env := &stage.PlanEnv{Batch: b, Tenant: "team-a", Store: store}
			if tc.serve {
				env.ServeFeature = serve
			}
			plans, err := Kind{}.Plan(context.Background(), env, batch.AC{ID: "tasks", Part: &Entry{Spec: "spec.json"}})
			if err != nil || len(plans) != 1 {
				t.Fatalf("plans %d, %v", len(plans), err)
			}
			rs := rubricwire.SpecOf(plans[0].Build(nil).KindPart)
			if rs.Blocked != tc.blocked {
				t.Fatalf("blocked %q, want %q", rs.Blocked, tc.blocked)
			}
			if tc.blocked == "" && (rs.Route != tc.want || rs.Adapter != tc.adapter) {
				t.Fatalf("route %q (adapter %q), want %q", rs.Route, rs.Adapter, tc.want)
			}
		})
	}
}

// TestDefaultMode: a rubric AC that names no mode takes the submitter's default
// (interactive when `tribunal run` has a terminal, the seed's default), else headless;
// a mode the batch names wins.
func TestDefaultMode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ def, acMode, want string }{
		{"", "", events.ModeHeadless}, {events.ModeInteractive, "", events.ModeInteractive},
		{events.ModeInteractive, events.ModeHeadless, events.ModeHeadless}, {"", events.ModeReportOnly, events.ModeReportOnly},
	} {
		dir := t.TempDir()
		writeFeature(t, dir, "ios", "app://tasks/list")
		store, err := fileblob.New(t.TempDir(), fileblob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		b := &batch.Batch{Path: filepath.Join(dir, "batch.yaml"), Dir: dir}
		env := &stage.PlanEnv{Batch: b, Tenant: "team-a", Store: store, DefaultMode: tc.def}
		plans, err := Kind{}.Plan(context.Background(), env, batch.AC{ID: "tasks", Part: &Entry{Spec: "spec.json", Mode: tc.acMode}})
		if err != nil {
			t.Fatal(err)
		}
		if got := rubricwire.SpecOf(plans[0].Build(nil).KindPart).Mode; got != tc.want {
			t.Errorf("default %q, AC mode %q: mode %q, want %q", tc.def, tc.acMode, got, tc.want)
		}
	}
}
