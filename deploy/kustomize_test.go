package deploy

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// kustomize renders a kustomization folder with `kubectl kustomize` (kustomize built into
// kubectl), as `kubectl apply -k` would before sending it; the test skips without kubectl.
func kustomize(t *testing.T, dir string) []byte {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not installed: the rendered kustomization is not checked (the per-file checks still run)")
	}
	out, err := exec.Command(kubectl, "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	return out
}

// TestRenderedKustomization renders deploy/k8s as shipped, and as an operator's overlay
// with the opt-in components and the KEDA patch for teams, and holds the result (what
// the cluster receives) to the same checks as the files: every object namespaced, images
// pinned, the renderer wired to the model, one KEDA trigger per team consumer.
// checkRendered decodes a rendered kustomization and holds it to the checks of the
// files: workloads, references, images, and every object in the namespace tribunal.
func checkRendered(t *testing.T, name string, data []byte) []Object {
	t.Helper()
	objs, ps := DecodeManifests(name, data)
	ps = append(ps, CheckWorkloads(objs)...)
	ps = append(ps, CheckReferences(objs)...)
	ps = append(ps, CheckImages(objs, EmbeddedNATSVersion(repo))...)
	if len(ps) > 0 {
		t.Fatalf("%s:\n%s", name, Report(ps))
	}
	for _, o := range objs {
		if ns := o.Obj.(interface{ GetNamespace() string }).GetNamespace(); ns != "tribunal" && o.GVK.Kind != "Namespace" {
			t.Errorf("%s: %s in namespace %q", name, o.Ref(), ns)
		}
	}
	return objs
}

// overlay writes an operator's overlay of deploy/k8s into a new folder: the base, the
// components named (folders under deploy/k8s/components), the namespace (components are
// added outside the base's), and extra lines and files. It returns the folder.
func overlay(t *testing.T, components []string, extra string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(filepath.Join(repo, "deploy", "k8s"))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(dir, abs) // kustomize takes relative paths only
	if err != nil {
		t.Fatal(err)
	}
	kust := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nnamespace: tribunal\nresources:\n  - " + rel + "\ncomponents:\n"
	for _, c := range components {
		kust += "  - " + rel + "/components/" + c + "\n"
	}
	files = maps.Clone(files)
	if files == nil {
		files = map[string]string{}
	}
	files["kustomization.yaml"] = kust + extra
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRenderedKustomization(t *testing.T) {
	check := func(name string, data []byte) []Object {
		t.Helper()
		return checkRendered(t, name, data)
	}
	base := check("kustomize deploy/k8s", kustomize(t, filepath.Join(repo, "deploy", "k8s")))
	for _, o := range base {
		if d, ok := o.Obj.(*appsv1.Deployment); ok && o.Name == bus.Renderer {
			c := d.Spec.Template.Spec.Containers[0]
			if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil && e.SecretRef.Name == "tribunal-llm" }) {
				t.Error("rendered renderer does not read the LLM key")
			}
			if c.Image != "ghcr.io/tribunal-dev/tribunal-renderer:"+envExample(t)["TRIBUNAL_VERSION"] {
				t.Errorf("rendered renderer image %q", c.Image)
			}
		}
	}
	if !EgressAllowed(base, map[string]string{"app.kubernetes.io/component": "renderer", "app.kubernetes.io/part-of": "tribunal"}, 443, "0.0.0.0/0") {
		t.Error("rendered policies do not let the renderer reach the LLM API")
	}

	// An operator's overlay: components, and the KEDA patch for two teams.
	patch, err := tenants.KEDAPatch([]string{"team-a", "team-b"}, tenants.KEDAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := overlay(t, []string{"podmonitor", "renderer-internet"}, "patches:\n  - path: keda-tenants.yaml\n", map[string]string{"keda-tenants.yaml": patch})
	rendered := check("kustomize overlay", kustomize(t, dir))
	var kinds []string
	for _, o := range rendered {
		kinds = append(kinds, o.GVK.Kind+"/"+o.Name)
		if so, ok := o.Obj.(*ScaledObject); ok {
			var consumers []string
			for _, tr := range so.Spec.Triggers {
				consumers = append(consumers, tr.Metadata["consumer"])
			}
			if want := bus.ConsumerNames(bus.Judge, []string{"team-a", "team-b"}); !slices.Equal(consumers, want) {
				t.Errorf("rendered ScaledObject triggers on %v, want %v", consumers, want)
			}
			if so.Spec.Advanced == nil || so.Spec.Advanced.HorizontalPodAutoscalerConfig == nil || so.Spec.Advanced.ScalingModifiers == nil {
				t.Errorf("rendered ScaledObject advanced %+v: want the base's behaviour and the patch's formula", so.Spec.Advanced)
			}
		}
	}
	for _, want := range []string{"PodMonitor/tribunal", "NetworkPolicy/renderer-internet-egress"} {
		if !slices.Contains(kinds, want) {
			t.Errorf("overlay lacks %s", want)
		}
	}
}
