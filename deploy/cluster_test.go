package deploy

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkCluster runs CheckComposeCluster on docker-compose.yml and the given override.
func checkCluster(t *testing.T, override string) []Problem {
	t.Helper()
	return CheckComposeCluster(types.ConfigFile{Filename: "docker-compose.yml", Content: read(t, "docker-compose.yml")},
		types.ConfigFile{Filename: "docker-compose.cluster.yml", Content: []byte(override)}, envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
}

// The cluster override, merged over the base file as compose merges it: three NATS
// servers of the base's image, each with its own name and store volume, routed to all
// three, and every tribunal service given the three URLs and three replicas, on top of
// every rule the base file is held to.
func TestComposeClusterFile(t *testing.T) {
	if ps := checkCluster(t, string(read(t, "docker-compose.cluster.yml"))); len(ps) > 0 {
		t.Fatalf("docker-compose.yml + docker-compose.cluster.yml:\n%s", Report(ps))
	}
	project, err := LoadComposeFiles(clusterComposeFiles(t), envExample(t), repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if names := clusterServerNames(project); len(names) != natsClusterSize {
		t.Errorf("server names %v, want %d distinct", names, natsClusterSize)
	}
	// The base alone is unchanged: one server, no replicas setting.
	base, err := LoadCompose("docker-compose.yml", read(t, "docker-compose.yml"), envExample(t), repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := base.Services["nats-2"]; ok {
		t.Error("docker-compose.yml has nats-2: the cluster is opt-in")
	}
	if v := base.Services["judge"].Environment["TRIBUNAL_REPLICAS"]; v != nil {
		t.Errorf("docker-compose.yml sets TRIBUNAL_REPLICAS=%s: a single server refuses replicas", *v)
	}
}

// Each way the cluster shape can be miswired is a Problem naming the service and field.
func TestComposeClusterMistakes(t *testing.T) {
	shipped := string(read(t, "docker-compose.cluster.yml"))
	const routes = `"nats://nats:6222,nats://nats-2:6222,nats://nats-3:6222"`
	for _, tc := range []struct {
		name, old, new     string
		object, field, msg string
	}{
		{"a shared volume", "nats-cluster-2:/data", "nats-cluster-1:/data", "service nats-2", "services.nats-2.volumes", `also nats's`},
		{"the single server's volume", "nats-cluster-1:/data", "nats-data:/data", "service nats", "services.nats.volumes", "deletes the streams it kept alone"},
		{"a duplicate server name", `"tribunal-nats-3"`, `"tribunal-nats-2"`, "service nats-3", "services.nats-3.command", "also nats-2's"},
		{"another cluster name", `"--cluster_name", "tribunal", "--cluster", "nats://0.0.0.0:6222",
              "--routes", ` + routes + `]
    volumes:
      - nats-cluster-3`, `"--cluster_name", "other", "--cluster", "nats://0.0.0.0:6222",
              "--routes", ` + routes + `]
    volumes:
      - nats-cluster-3`, "service nats-3", "services.nats-3.command", `cluster name "other"`},
		{"a missing route", routes, `"nats://nats:6222,nats://nats-2:6222"`, "service nats", "services.nats.command", "--routes lacks nats-3:6222"},
		{"another release", "image: nats:2.15.2-alpine", "image: nats:2.15.1-alpine", "service nats-2", "services.nats-2.image", "one NATS release"},
		{"a shared host port", "${TRIBUNAL_NATS_PORT_3:-4224}", "${TRIBUNAL_NATS_PORT_2:-4223}", "service nats-3", "services.nats-3.ports", "also published by nats-2"},
		{"a client without every server", "TRIBUNAL_NATS_URL: nats://nats:4222,nats://nats-2:4222,nats://nats-3:4222", "TRIBUNAL_NATS_URL: nats://nats:4222,nats://nats-2:4222",
			"service judge", "services.judge.environment.TRIBUNAL_NATS_URL", "lacks nats://nats-3:4222"},
		{"one replica", `TRIBUNAL_REPLICAS: "3"`, `TRIBUNAL_REPLICAS: "1"`, "service aggregator", "services.aggregator.environment.TRIBUNAL_REPLICAS", `want "3"`},
		{"not waiting for a server", "    nats-3:\n      condition: service_healthy\n", "", "service renderer", "services.renderer.depends_on.nats-3", "service_healthy"},
		{"a fourth server", "  renderer: *cluster-client", "  nats-4:\n    <<: *nats-member\n    command: [\"-js\"]\n  renderer: *cluster-client", "", "services", "4 NATS servers, want 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(shipped, tc.old) {
				t.Fatalf("docker-compose.cluster.yml has no %q", tc.old)
			}
			ps := checkCluster(t, strings.Replace(shipped, tc.old, tc.new, 1))
			wantProblem(t, ps, "docker-compose.cluster.yml", tc.object, tc.field, tc.msg)
		})
	}
}

// findObject is the object of kind and name among objs (nil if none).
func findObject(objs []Object, kind, name string) any {
	for _, o := range objs {
		if o.GVK.Kind == kind && o.Name == name {
			return o.Obj
		}
	}
	return nil
}

// containerEnv is the environment a container starts with, of the values the manifests
// hold: its ConfigMaps' keys (envFrom, later sources winning), then its own env values,
// which win over them as the kubelet has it.
func containerEnv(objs []Object, c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			continue
		}
		if cm, ok := findObject(objs, "ConfigMap", ef.ConfigMapRef.Name).(*corev1.ConfigMap); ok {
			for k, v := range cm.Data {
				env[ef.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

// TestRenderedNATSCluster renders deploy/k8s with components/nats-cluster, as an
// operator's overlay does, holds it to every check of the base, and to the cluster's
// shape: the NATS StatefulSet runs natsClusterSize pods started together, each named
// after its pod and routed to every pod by its stable name under the headless Service,
// on the port the container exposes; its stores are new claims, not the single server's;
// no two pods share a node, one at a time may be evicted, and the route port is open
// between NATS pods and to nothing else; every `tribunal serve` Deployment starts with
// the three URLs and TRIBUNAL_REPLICAS=3. The base alone stays one server.
func TestRenderedNATSCluster(t *testing.T) {
	base := checkRendered(t, "kustomize deploy/k8s", kustomize(t, filepath.Join(repo, "deploy", "k8s")))
	objs := checkRendered(t, "kustomize nats-cluster overlay", kustomize(t, overlay(t, []string{"nats-cluster"}, "", nil)))

	baseSts := findObject(base, "StatefulSet", "nats").(*appsv1.StatefulSet)
	if r := baseSts.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("base StatefulSet/nats: replicas %v, want 1: the cluster is opt-in", r)
	}
	if v, ok := findObject(base, "ConfigMap", "tribunal-config").(*corev1.ConfigMap).Data["TRIBUNAL_REPLICAS"]; ok {
		t.Errorf("base tribunal-config sets TRIBUNAL_REPLICAS=%s: a single server refuses replicas", v)
	}

	sts, ok := findObject(objs, "StatefulSet", "nats").(*appsv1.StatefulSet)
	if !ok {
		t.Fatal("no StatefulSet/nats")
	}
	if r := sts.Spec.Replicas; r == nil || *r != natsClusterSize {
		t.Fatalf("StatefulSet/nats: replicas %v, want %d", r, natsClusterSize)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("StatefulSet/nats: podManagementPolicy %q: a member is healthy only with the others up, so ordered start-up never passes the first pod", sts.Spec.PodManagementPolicy)
	}
	podLabels := sts.Spec.Template.Labels
	c := sts.Spec.Template.Spec.Containers[0]
	args := c.Args
	if name, _ := natsFlag(args, "server_name", "name", "n"); name != "$(POD_NAME)" ||
		!slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
			return e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
		}) {
		t.Errorf("StatefulSet/nats: server name %q, want $(POD_NAME) from metadata.name: stable across restarts, one per pod", name)
	}
	if name, _ := natsFlag(args, "cluster_name"); name == "" {
		t.Error("StatefulSet/nats: no --cluster_name")
	}
	listen, _ := natsFlag(args, "cluster", "cluster_listen")
	lu, err := url.Parse(listen)
	routePort, perr := strconv.Atoi(lu.Port())
	if err != nil || perr != nil {
		t.Fatalf("StatefulSet/nats: --cluster %q: want nats://0.0.0.0:<port>", listen)
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == int32(routePort) }) {
		t.Errorf("StatefulSet/nats: the route port %d is not a container port", routePort)
	}
	routes, _ := natsFlag(args, "routes")
	var got, want []string
	for r := range strings.SplitSeq(routes, ",") {
		if u, err := url.Parse(r); err == nil && u.Scheme == "nats" {
			got = append(got, u.Host)
		}
	}
	clientPort := defaultNATSClientPort
	if p, ok := natsFlag(args, "p", "port"); ok {
		clientPort, _ = strconv.Atoi(p)
	}
	var clients []string
	for i := range natsClusterSize {
		pod := fmt.Sprintf("%s-%d.%s", sts.Name, i, sts.Spec.ServiceName)
		want = append(want, fmt.Sprintf("%s:%d", pod, routePort))
		clients = append(clients, fmt.Sprintf("%s:%d", pod, clientPort))
	}
	if slices.Sort(got); !slices.Equal(got, want) {
		t.Errorf("StatefulSet/nats: routes %v, want every pod by its stable name %v", got, want)
	}
	headless, ok := findObject(objs, "Service", sts.Spec.ServiceName).(*corev1.Service)
	if !ok || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Errorf("Service/%s: want it headless, publishing not-ready pods (a member resolves the others before they are ready)", sts.Spec.ServiceName)
	} else if !slices.ContainsFunc(headless.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(routePort) }) {
		t.Errorf("Service/%s: no port %d", sts.Spec.ServiceName, routePort)
	}

	// Each pod's store is a claim of its own, and not the single server's: a server that
	// joins a cluster deletes the streams it kept alone.
	store, _ := natsFlag(args, "store_dir", "sd")
	claim := ""
	for _, m := range c.VolumeMounts {
		if m.MountPath == store {
			claim = m.Name
		}
	}
	if !slices.ContainsFunc(sts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == claim }) {
		t.Errorf("StatefulSet/nats: the store %s is on %q, not a volume claim template", store, claim)
	}
	if slices.ContainsFunc(baseSts.Spec.VolumeClaimTemplates, func(p corev1.PersistentVolumeClaim) bool { return p.Name == claim }) {
		t.Errorf("StatefulSet/nats: the store is on the single server's claim %q", claim)
	}

	// Spread: no two pods on one node.
	spread := false
	if a := sts.Spec.Template.Spec.Affinity; a != nil && a.PodAntiAffinity != nil {
		for _, term := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
			sel, err := metav1.LabelSelectorAsSelector(term.LabelSelector)
			spread = spread || (term.TopologyKey == "kubernetes.io/hostname" && err == nil && sel.Matches(labels.Set(podLabels)))
		}
	}
	if !spread {
		t.Error("StatefulSet/nats: no required pod anti-affinity on kubernetes.io/hostname against its own pods")
	}

	// One pod at a time may be evicted.
	budget := false
	for _, o := range objs {
		pdb, ok := o.Obj.(*policyv1.PodDisruptionBudget)
		if !ok {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(labels.Set(podLabels)) {
			budget = pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 1
		}
	}
	if !budget {
		t.Error("no PodDisruptionBudget with maxUnavailable 1 selects the NATS pods")
	}

	// The routes: open between NATS pods, closed to the services, closed in the base.
	if !IngressFromPodsAllowed(objs, podLabels, routePort, podLabels) || !EgressToPodsAllowed(objs, podLabels, routePort, podLabels) {
		t.Errorf("the network policies do not open port %d between NATS pods", routePort)
	}
	judge := findObject(objs, "Deployment", "judge").(*appsv1.Deployment).Spec.Template.Labels
	if IngressFromPodsAllowed(objs, podLabels, routePort, judge) {
		t.Errorf("the judges may reach the NATS route port %d", routePort)
	}
	if IngressFromPodsAllowed(base, podLabels, routePort, podLabels) || EgressToPodsAllowed(base, podLabels, routePort, podLabels) {
		t.Errorf("the base opens the route port %d", routePort)
	}

	// Every tribunal process: all three servers, three replicas.
	served := 0
	for _, o := range objs {
		d, ok := o.Obj.(*appsv1.Deployment)
		if !ok {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if !strings.HasPrefix(c.Image, tribunalImagePrefix) || len(c.Args) < 2 || c.Args[0] != "serve" {
				continue
			}
			served++
			env := containerEnv(objs, c)
			if env["TRIBUNAL_REPLICAS"] != strconv.Itoa(natsClusterSize) {
				t.Errorf("%s: TRIBUNAL_REPLICAS %q, want %d", o.Ref(), env["TRIBUNAL_REPLICAS"], natsClusterSize)
			}
			var hosts []string
			for u := range strings.SplitSeq(env["TRIBUNAL_NATS_URL"], ",") {
				if pu, err := url.Parse(u); err == nil && pu.Scheme == "nats" {
					hosts = append(hosts, pu.Host)
				}
			}
			if slices.Sort(hosts); !slices.Equal(hosts, clients) {
				t.Errorf("%s: TRIBUNAL_NATS_URL %q, want every pod's client address %v", o.Ref(), env["TRIBUNAL_NATS_URL"], clients)
			}
		}
	}
	if served != 6 {
		t.Errorf("%d Deployments run tribunal serve, want the six services'", served)
	}
}
