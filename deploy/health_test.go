package deploy

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestDeploymentsServeHealthOnThePodAddress: `tribunal serve` answers /healthz, /readyz
// and /metrics on loopback unless told otherwise, so every tribunal container of both
// deployments is told ":8080": the kubelet's probes and Prometheus reach a pod on its own
// address, and compose's healthchecks and the published metrics port alike.
func TestDeploymentsServeHealthOnThePodAddress(t *testing.T) {
	project, err := LoadCompose("docker-compose.yml", read(t, "docker-compose.yml"), envExample(t), repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for name, svc := range project.Services {
		if !strings.HasPrefix(svc.Image, tribunalImagePrefix) {
			continue
		}
		n++
		if v := svc.Environment["TRIBUNAL_HEALTH_ADDR"]; v == nil || *v != ":8080" {
			t.Errorf("docker-compose.yml: service %s: TRIBUNAL_HEALTH_ADDR %v, want \":8080\"", name, v)
		}
	}
	if n == 0 {
		t.Fatal("docker-compose.yml: no tribunal service")
	}

	objs, ps := manifests(t)
	if len(ps) > 0 {
		t.Fatalf("deploy/k8s:\n%s", Report(ps))
	}
	var config *corev1.ConfigMap
	for _, o := range objs {
		if cm, ok := o.Obj.(*corev1.ConfigMap); ok && o.Name == "tribunal-config" {
			config = cm
		}
	}
	if config == nil || config.Data["TRIBUNAL_HEALTH_ADDR"] != ":8080" {
		t.Fatalf("ConfigMap/tribunal-config: TRIBUNAL_HEALTH_ADDR must be \":8080\"")
	}
	for _, o := range objs {
		spec, _, ok := podTemplate(o)
		if !ok {
			continue
		}
		for _, c := range spec.Containers {
			if !strings.HasPrefix(c.Image, tribunalImagePrefix) || c.Name == "nats" {
				continue
			}
			fromConfig := slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
				return e.ConfigMapRef != nil && e.ConfigMapRef.Name == "tribunal-config"
			})
			overridden := slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "TRIBUNAL_HEALTH_ADDR" && e.Value != ":8080" })
			if !fromConfig || overridden {
				t.Errorf("%s/%s container %s: not given TRIBUNAL_HEALTH_ADDR \":8080\" from ConfigMap/tribunal-config", o.GVK.Kind, o.Name, c.Name)
			}
		}
	}
}
