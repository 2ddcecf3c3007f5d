package attack

import (
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/app"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
	"github.com/tribunal-dev/tribunal/services/renderer"
)

// countingServer is an HTTP server on loopback that counts the connections it accepts:
// another service's /metrics, as a renderer's pod or host would reach it.
func countingServer(t *testing.T, h http.Handler) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var accepted atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &accepted
}

// rubricBatch is a batch of one rubric AC per route: the example feature, copied into a
// folder of its own for each, its spec's route replaced.
func rubricBatch(t *testing.T, routes map[string]string) map[string]string {
	t.Helper()
	src := filepath.Join("..", "..", "examples", "rubric-feature")
	files := map[string]string{}
	var sb strings.Builder
	sb.WriteString("version: 1\nname: ssrf\nacs:\n")
	for id, route := range routes {
		err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() == "batch.yaml" {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(src, path)
			if rel == "spec.json" {
				if !strings.Contains(string(data), `"route": "page.html"`) {
					t.Fatal("the example spec's route is no longer page.html")
				}
				data = []byte(strings.Replace(string(data), `"route": "page.html"`, `"route": "`+route+`"`, 1))
			}
			files[filepath.ToSlash(filepath.Join(id, rel))] = string(data)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&sb, "  - {id: %s, kind: rubric, spec: %s/spec.json, mode: headless}\n", id, id)
	}
	files["batch.yaml"] = sb.String()
	return files
}

// withRenderer gives the world's renderer sensors.
func withRenderer(s *renderer.Sensors) worldOptions {
	return worldOptions{service: func(svc string, o *app.Options) {
		if svc == bus.Renderer {
			o.Sensors = s
		}
	}}
}

// TestRubricRoutesCannotReachInternalServices: a team's rubric routes name the cloud
// metadata endpoint and another service's /metrics on loopback, directly and through a
// redirect from a host the operator allowed.
//
// On de157a3 this worked: `tribunal serve renderer` as deploy/ ships it (no
// TRIBUNAL_WEB_ALLOW_HOSTS) gave the web sensor no host list, so Chromium went straight
// to each route. The /metrics page was rendered, its screenshot and probe stored under
// team-a and gated (team-a's results: needs_fixes, a failing a11y_ids gate, its
// render.png readable through the ingress); Chromium navigated to
// http://169.254.169.254/latest/meta-data/ too (here nothing answers, a failed build
// gate; on a cloud host, the metadata's screenshot). With a host list, a redirect to an
// allowed name resolving to loopback was followed (2 more connections to /metrics): the
// proxy let loopback and private addresses through for any allowed host, and a listed
// address for any host resolving to it. Now the served renderer refuses every route
// until the operator lists hosts, and dials only what the artifact URLs' rule allows:
// each AC is blocked naming its route, the host and the setting, /metrics is never
// connected to, nothing is judged, and team-b's batch is untouched.
func TestRubricRoutesCannotReachInternalServices(t *testing.T) {
	browsertest.Need(t)
	metrics, accepted := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<!doctype html><pre id="metrics">tribunal_judge_calls_total{tenant="team-b"} 42</pre>`)
	}))
	metricsHost := strings.TrimPrefix(metrics.URL, "http://")

	t.Run("as shipped", func(t *testing.T) {
		// What servedSensorsFromFlags builds from deploy/'s environment.
		sensors := &renderer.Sensors{Web: web.Options{Shared: true}}
		t.Cleanup(sensors.Close)
		w := newWorld(t, withRenderer(sensors))
		b, victim := w.victim(2)
		a := w.team("team-a")
		routes := map[string]string{
			"metadata": "http://169.254.169.254/latest/meta-data/",
			"metrics":  metrics.URL + "/metrics",
		}
		res := w.wait(a, w.submit(a, rubricBatch(t, routes)))
		hosts := map[string]string{"metadata": "169.254.169.254", "metrics": metricsHost}
		wantBlocked(t, res.Rows, routes, hosts)
		if n := accepted.Load(); n != 0 {
			t.Fatalf("/metrics on loopback accepted %d connections from the renderer", n)
		}
		for _, p := range w.provider.prompts() {
			if strings.Contains(p, "tribunal_judge_calls_total") {
				t.Fatal("the judge was shown /metrics")
			}
		}
		w.victimIntact(b, victim)
	})

	t.Run("allowed host redirects", func(t *testing.T) {
		// The operator allows the team's preview app; the app redirects to /metrics, by
		// address and by a name resolving to loopback.
		preview, _ := countingServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			to := metrics.URL + "/metrics"
			if r.URL.Path == "/by-name" {
				to = "http://localhost:" + metrics.URL[strings.LastIndexByte(metrics.URL, ':')+1:] + "/metrics"
			}
			http.Redirect(w, r, to, http.StatusFound)
		}))
		previewHost := strings.TrimPrefix(preview.URL, "http://")
		sensors := &renderer.Sensors{Web: web.Options{Shared: true, AllowHosts: []string{previewHost, "localhost"}}}
		t.Cleanup(sensors.Close)
		w := newWorld(t, withRenderer(sensors))
		a := w.team("team-a")
		routes := map[string]string{"address": preview.URL + "/by-address", "name": preview.URL + "/by-name"}
		res := w.wait(a, w.submit(a, rubricBatch(t, routes)))
		wantBlocked(t, res.Rows, routes, map[string]string{"address": metricsHost, "name": "127.0.0.1"})
		if n := accepted.Load(); n != 0 {
			t.Fatalf("/metrics on loopback accepted %d connections from the renderer", n)
		}
	})
}

// wantBlocked checks that every AC of routes is blocked (neither rendered nor judged)
// with a reason naming its route, hosts[ac] and a setting that would allow it.
func wantBlocked(t *testing.T, rows []client.Row, routes, hosts map[string]string) {
	t.Helper()
	if len(rows) != len(routes) {
		t.Fatalf("%d rows, want %d: %+v", len(rows), len(routes), rows)
	}
	for _, r := range rows {
		ac := strings.SplitN(r.ACID, "--", 2)[0]
		if r.Status != string(events.StatusBlocked) {
			t.Errorf("%s: %+v; want blocked", r.ACID, r)
			continue
		}
		for _, want := range []string{routes[ac], hosts[ac], "TRIBUNAL_WEB_ALLOW"} {
			if !strings.Contains(r.Reason, want) {
				t.Errorf("%s: reason %q does not name %q", r.ACID, r.Reason, want)
			}
		}
		t.Logf("%s: %s", r.ACID, r.Reason)
	}
}
