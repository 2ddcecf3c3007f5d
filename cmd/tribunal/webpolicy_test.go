package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/sensor"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
)

// TestWebPolicySettingsAreServes: the flags and variables a refused route names are the
// ones `tribunal serve` has, so an operator who follows the reason changes the right
// setting.
func TestWebPolicySettingsAreServes(t *testing.T) {
	t.Parallel()
	want := map[string]string{strings.TrimPrefix(web.AllowHostsFlag, "--"): web.AllowHostsEnv,
		strings.TrimPrefix(web.AllowPrivateFlag, "--"): web.AllowPrivateEnv}
	found := map[string]bool{}
	eachFlag(newRoot(), func(cmd *cobra.Command, f *pflag.Flag) {
		env, ok := want[f.Name]
		if !ok {
			return
		}
		if commandPath(cmd) != "serve" {
			t.Errorf("%s has --%s; only serve's renderer has the web policy", commandPath(cmd), f.Name)
			return
		}
		found[f.Name] = true
		if !slices.Contains(f.Annotations[envAnnotation], env) {
			t.Errorf("serve --%s is set by %v; the refusal names %s", f.Name, f.Annotations[envAnnotation], env)
		}
	})
	for name := range want {
		if !found[name] {
			t.Errorf("serve has no --%s, which refusals name", name)
		}
	}
}

// TestServedRendererRefusesByDefault: the renderer `tribunal serve` builds with no
// allowed host (deploy/'s manifests as shipped) refuses a route to another service's
// /metrics on loopback without connecting to it, while `tribunal run`'s renders a page
// on loopback, as the quickstart's and the rubric examples' are.
func TestServedRendererRefusesByDefault(t *testing.T) {
	browsertest.Need(t)
	var accepted atomic.Int64
	metrics := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!doctype html><h1 id="title">tribunal_renderer_up 1</h1>`)
	}))
	metrics.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	metrics.Start()
	t.Cleanup(metrics.Close)
	route := metrics.URL + "/metrics"
	host := strings.TrimPrefix(metrics.URL, "http://")

	served, err := servedSensorsFromFlags(adapterFlags{}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(served.Close)
	_, err = served.Sense(context.Background(), "web", sensor.View{Route: route})
	if !errors.Is(err, sensor.ErrRefused) {
		t.Fatalf("served renderer: %v; want refused", err)
	}
	for _, w := range []string{route, "host " + host, web.AllowHostsFlag + "=" + host, web.AllowHostsEnv} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("refusal %q does not name %q", err, w)
		}
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the served renderer connected to loopback %d times", n)
	}

	run, err := sensorsFromFlags(adapterFlags{}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(run.Close)
	if _, err := run.Sense(context.Background(), "web", sensor.View{Route: route}); err != nil {
		t.Fatalf("tribunal run's renderer on a loopback page: %v", err)
	}
	if accepted.Load() == 0 {
		t.Fatal("tribunal run's renderer did not reach the loopback page")
	}
}
