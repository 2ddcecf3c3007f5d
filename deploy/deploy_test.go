package deploy

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// repo is the repository root, relative to this package's folder (the test's working
// directory); file names in problems are relative to it.
const repo = ".."

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func repoRoot(t *testing.T) string {
	t.Helper()
	abs, err := filepath.Abs(repo)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func envExample(t *testing.T) map[string]string {
	t.Helper()
	env, ps := ParseDotEnv(".env.example", read(t, ".env.example"))
	if len(ps) > 0 {
		t.Fatalf(".env.example:\n%s", Report(ps))
	}
	return env
}

// wantProblem fails unless ps holds a problem of file, object and field whose message
// contains msg, and returns it.
func wantProblem(t *testing.T, ps []Problem, file, object, field, msg string) Problem {
	t.Helper()
	for _, p := range ps {
		if p.File == file && strings.HasPrefix(p.Object, object) && p.Field == field && strings.Contains(p.Msg, msg) {
			for _, part := range []string{file, object, field} {
				if !strings.Contains(p.String(), part) {
					t.Errorf("message %q does not name %q", p.String(), part)
				}
			}
			return p
		}
	}
	t.Fatalf("no problem %s: %s: %s (%q) among:\n%s", file, object, field, msg, Report(ps))
	return Problem{}
}

func TestComposeFile(t *testing.T) {
	ps := CheckCompose("docker-compose.yml", read(t, "docker-compose.yml"), envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
	if len(ps) > 0 {
		t.Fatalf("docker-compose.yml:\n%s", Report(ps))
	}
}

// Every variable docker-compose.yml and the cluster override substitute is documented
// in .env.example.
func TestEnvExampleCoversCompose(t *testing.T) {
	env := envExample(t)
	ref := regexp.MustCompile(`(^|[^$])\$\{([A-Za-z_][A-Za-z0-9_]*)`)
	for _, file := range []string{"docker-compose.yml", "docker-compose.cluster.yml"} {
		for _, m := range ref.FindAllStringSubmatch(string(read(t, file)), -1) {
			if _, ok := env[m[2]]; !ok {
				t.Errorf("%s uses ${%s}, which .env.example does not set", file, m[2])
			}
		}
	}
	for _, k := range []string{"TRIBUNAL_JUDGE", "TRIBUNAL_JUDGE_MODEL", "OPENAI_API_KEY", "TRIBUNAL_OPENAI_BASE_URL", "TRIBUNAL_S3_ACCESS_KEY", "TRIBUNAL_S3_SECRET_KEY"} {
		if _, ok := env[k]; !ok {
			t.Errorf(".env.example does not set %s", k)
		}
	}
}

// Without the S3 keys (no .env), loading fails and says which variable to set.
func TestComposeNeedsKeys(t *testing.T) {
	env := envExample(t)
	delete(env, "TRIBUNAL_S3_SECRET_KEY")
	ps := CheckCompose("docker-compose.yml", read(t, "docker-compose.yml"), env, repoRoot(t), EmbeddedNATSVersion(repo))
	wantProblem(t, ps, "docker-compose.yml", "", "", "TRIBUNAL_S3_SECRET_KEY")
}

func TestComposeMissingHealthcheckFails(t *testing.T) {
	const file = "deploy/testdata/compose-missing-healthcheck.yml"
	ps := CheckCompose(file, read(t, file), envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
	wantProblem(t, ps, file, "service judge", "services.judge.healthcheck", "missing")
	if len(ps) != 1 {
		t.Errorf("want only the judge's missing healthcheck, got:\n%s", Report(ps))
	}
}

// A compose file that would not scale judges or lets another service see the LLM key.
func TestComposeScalingAndKeyRules(t *testing.T) {
	const file = "deploy/testdata/compose-missing-healthcheck.yml"
	src := string(read(t, file))
	src = strings.Replace(src, "  judge:\n    image: ghcr.io/tribunal-dev/tribunal:dev\n",
		"  judge:\n    image: ghcr.io/tribunal-dev/tribunal:dev\n    container_name: judge\n    ports: [\"8080:8080\"]\n", 1)
	src = strings.Replace(src, "    command: [\"serve\", \"gater\"]\n", "    command: [\"serve\", \"gater\"]\n    environment:\n      <<: *env\n      OPENAI_API_KEY: sk-leak\n", 1)
	ps := CheckCompose(file, []byte(src), envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
	wantProblem(t, ps, file, "service judge", "services.judge.container_name", "--scale")
	wantProblem(t, ps, file, "service judge", "services.judge.ports", "host port")
	wantProblem(t, ps, file, "service gater", "services.gater.environment.OPENAI_API_KEY", "only the judge and the renderer")
}

func TestDockerfiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		want DockerfileWant
	}{
		{"Dockerfile", DockerfileWant{}},
		{"Dockerfile.renderer", DockerfileWant{Chromium: true}},
	} {
		if ps := CheckDockerfile(tc.file, read(t, tc.file), tc.want); len(ps) > 0 {
			t.Errorf("%s:\n%s", tc.file, Report(ps))
		}
	}
	// The main image is distroless static (no shell, nonroot), the renderer's Debian slim.
	if st := ParseDockerfile(read(t, "Dockerfile")); !strings.HasPrefix(st[len(st)-1].From.Args, "gcr.io/distroless/static-") {
		t.Errorf("Dockerfile: final stage is %q, want distroless static", st[len(st)-1].From.Args)
	}
	if st := ParseDockerfile(read(t, "Dockerfile.renderer")); !strings.Contains(st[len(st)-1].From.Args, "-slim") {
		t.Errorf("Dockerfile.renderer: final stage is %q, want Debian slim", st[len(st)-1].From.Args)
	}
}

func TestBrokenDockerfileFails(t *testing.T) {
	const file = "deploy/testdata/Dockerfile.root"
	ps := CheckDockerfile(file, read(t, file), DockerfileWant{})
	wantProblem(t, ps, file, "", "FROM", "multi-stage")
	wantProblem(t, ps, file, "final stage", "USER", "root")
	wantProblem(t, ps, file, "final stage", "ENTRYPOINT (line 6)", "exec form")
	wantProblem(t, ps, file, "final stage", "COPY", "healthcheck")
}

// manifests decodes every manifest under deploy/k8s and checks each kustomization's
// coverage of its folder.
func manifests(t *testing.T) (objs []Object, ps []Problem) {
	t.Helper()
	root := filepath.Join(repo, "deploy", "k8s")
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || (filepath.Ext(p) != ".yaml" && filepath.Ext(p) != ".yml") {
			return err
		}
		rel, _ := filepath.Rel(repo, p)
		rel = filepath.ToSlash(rel)
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if d.Name() == "kustomization.yaml" {
			entries, err := os.ReadDir(filepath.Dir(p))
			if err != nil {
				return err
			}
			var names []string
			for _, e := range entries {
				if !e.IsDir() {
					names = append(names, e.Name())
				}
			}
			ps = append(ps, CheckKustomization(rel, data, names)...)
			return nil
		}
		o, p2 := DecodeManifests(rel, data)
		objs, ps = append(objs, o...), append(ps, p2...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs, ps
}

func TestKubernetesManifests(t *testing.T) {
	objs, ps := manifests(t)
	ps = append(ps, CheckWorkloads(objs)...)
	ps = append(ps, CheckReferences(objs)...)
	ps = append(ps, CheckImages(objs, EmbeddedNATSVersion(repo))...)
	if len(ps) > 0 {
		t.Fatalf("deploy/k8s:\n%s", Report(ps))
	}

	find := func(kind, name string) Object {
		t.Helper()
		for _, o := range objs {
			if o.GVK.Kind == kind && o.Name == name {
				return o
			}
		}
		t.Fatalf("no %s/%s in deploy/k8s", kind, name)
		return Object{}
	}
	find("Namespace", "tribunal")
	cm := find("ConfigMap", "tribunal-config").Obj.(*corev1.ConfigMap)
	for _, k := range []string{"TRIBUNAL_NATS_URL", "TRIBUNAL_BLOB_URL", "TRIBUNAL_JUDGE", "TRIBUNAL_JUDGE_MODEL", "TRIBUNAL_OPENAI_BASE_URL"} {
		if cm.Data[k] == "" {
			t.Errorf("ConfigMap/tribunal-config: %s not set", k)
		}
	}
	for k := range cm.Data {
		if !strings.HasPrefix(k, "TRIBUNAL_") {
			t.Errorf("ConfigMap/tribunal-config: %s is not a TRIBUNAL_* setting", k)
		}
	}
	// The ConfigMap's URLs point at the Services in the manifests, and the bucket the
	// services use is the one the Job creates.
	servicePort := func(name string, port int32) {
		t.Helper()
		svc := find("Service", name).Obj.(*corev1.Service)
		if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == port }) {
			t.Errorf("Service/%s has no port %d", name, port)
		}
	}
	natsURL, err := url.Parse(cm.Data["TRIBUNAL_NATS_URL"])
	if err != nil || natsURL.Hostname() != "nats" || natsURL.Port() != "4222" {
		t.Errorf("TRIBUNAL_NATS_URL %q: want nats://nats:4222", cm.Data["TRIBUNAL_NATS_URL"])
	}
	servicePort("nats", 4222)
	servicePort("nats", 8222)
	blobURL, err := url.Parse(cm.Data["TRIBUNAL_BLOB_URL"])
	if err != nil || blobURL.Scheme != "s3" || blobURL.Query().Get("endpoint") != "objectstore:9000" || blobURL.Host != cm.Data["TRIBUNAL_BUCKET"] {
		t.Errorf("TRIBUNAL_BLOB_URL %q: want s3://<TRIBUNAL_BUCKET>?endpoint=objectstore:9000...", cm.Data["TRIBUNAL_BLOB_URL"])
	}
	servicePort("objectstore", 9000)

	// kustomization.yaml's image rewrites name images the manifests use (a misspelt name
	// would silently rewrite nothing), and its namespace is the one KEDA is pointed at.
	kobjs, _ := DecodeManifests("deploy/k8s/kustomization.yaml", read(t, "deploy/k8s/kustomization.yaml"))
	k := kobjs[0].Obj.(*Kustomization)
	var images []string
	for _, o := range objs {
		if spec, _, ok := podTemplate(o); ok {
			for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
				images = append(images, c.Image)
			}
		}
	}
	for _, img := range k.Images {
		if !slices.ContainsFunc(images, func(s string) bool { return strings.HasPrefix(s, img.Name+":") || strings.HasPrefix(s, img.Name+"@") }) {
			t.Errorf("kustomization.yaml: images entry %q matches no container image", img.Name)
		}
	}
	if k.Namespace != "tribunal" {
		t.Errorf("kustomization.yaml: namespace %q; the KEDA trigger's endpoint names tribunal", k.Namespace)
	}

	if _, ok := find("Secret", "tribunal-llm").Obj.(*corev1.Secret).StringData["OPENAI_API_KEY"]; !ok {
		t.Error("Secret/tribunal-llm has no OPENAI_API_KEY")
	}

	// NATS: JetStream on volumes from volumeClaimTemplates.
	nats := find("StatefulSet", "nats").Obj.(*appsv1.StatefulSet)
	if len(nats.Spec.VolumeClaimTemplates) == 0 || !slices.Contains(nats.Spec.Template.Spec.Containers[0].Args, "--jetstream") {
		t.Error("StatefulSet/nats: want --jetstream with its store on a volumeClaimTemplate")
	}
	find("Job", "objectstore-init")

	for _, svc := range append(slices.Clone(bus.Services), "console", "ingress") {
		d := find("Deployment", svc).Obj.(*appsv1.Deployment)
		c := d.Spec.Template.Spec.Containers[0]
		if len(c.Args) < 2 || c.Args[0] != "serve" || c.Args[1] != svc {
			t.Errorf("Deployment/%s runs %q, want serve %s", svc, c.Args, svc)
		}
		// The judges and the renderers (equivalence documents run through the model)
		// call the provider: they and only they read the key.
		llm := slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
			return e.SecretRef != nil && e.SecretRef.Name == "tribunal-llm"
		})
		if want := svc == bus.Judge || svc == bus.Renderer; llm != want {
			t.Errorf("Deployment/%s: reads the LLM key Secret: %v, want %v (only the judge and the renderer call the model)", svc, llm, want)
		}
		find("PodDisruptionBudget", svc)
	}
	for _, o := range objs {
		if pdb, ok := o.Obj.(*policyv1.PodDisruptionBudget); ok && pdb.Spec.MinAvailable != nil {
			t.Errorf("%s: use maxUnavailable; a minAvailable no single replica can meet blocks drains", o.Ref())
		}
	}

	// KEDA scales the judges on their durable consumer's backlog.
	so := find("ScaledObject", "judge").Obj.(*ScaledObject)
	if so.Spec.ScaleTargetRef.Name != "judge" || len(so.Spec.Triggers) != 1 {
		t.Fatalf("ScaledObject/judge: %+v", so.Spec)
	}
	tr := so.Spec.Triggers[0]
	want := map[string]string{"type": "nats-jetstream", "account": "$G", "stream": "TRIBUNAL", "consumer": bus.ConsumerName(bus.Judge)}
	got := map[string]string{"type": tr.Type, "account": tr.Metadata["account"], "stream": tr.Metadata["stream"], "consumer": tr.Metadata["consumer"]}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("ScaledObject/judge trigger: %s = %q, want %q", k, got[k], v)
		}
	}
	if ep := tr.Metadata["natsServerMonitoringEndpoint"]; ep != "nats.tribunal.svc.cluster.local:8222" {
		t.Errorf("ScaledObject/judge: natsServerMonitoringEndpoint %q, want the nats Service's monitoring port", ep)
	}

	// Network policies: default deny; in the base, the pods calling the model (judge,
	// renderer) and only they reach port 443 outside the cluster; Prometheus may scrape
	// 8080 of every tribunal service, each of which has a Service with its metrics port.
	find("NetworkPolicy", "default-deny")
	var base []Object
	for _, o := range objs {
		if !strings.HasPrefix(o.File, "deploy/k8s/components/") {
			base = append(base, o)
		}
	}
	for _, svc := range append(slices.Clone(bus.Services), "console", "ingress") {
		pod := find("Deployment", svc).Obj.(*appsv1.Deployment).Spec.Template.Labels
		llm := svc == bus.Judge || svc == bus.Renderer
		if got := EgressAllowed(base, pod, 443, "0.0.0.0/0"); got != llm {
			t.Errorf("Deployment/%s: egress to the internet on 443 %v, want %v", svc, got, llm)
		}
		if !IngressFromNamespaceAllowed(base, pod, 8080, "monitoring") {
			t.Errorf("Deployment/%s: no NetworkPolicy admits Prometheus (namespace monitoring) on 8080", svc)
		}
		s := find("Service", svc).Obj.(*corev1.Service)
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(pod)) ||
			!slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == "metrics" && p.Port == 8080 }) {
			t.Errorf("Service/%s: want it to select the %s pods with a port metrics: 8080", svc, svc)
		}
		if a := find("Deployment", svc).Obj.(*appsv1.Deployment).Spec.Template.Annotations; a["prometheus.io/scrape"] != "true" || a["prometheus.io/port"] != "8080" {
			t.Errorf("Deployment/%s: pod template scrape annotations %v", svc, a)
		}
	}
	// Teams reach tribunal through the ingress alone (docs/security.md): from where their
	// requests arrive (the ingress controller's namespace) the ingress's API port is open,
	// NATS and the object store are not.
	from := "ingress-nginx"
	if pod := find("Deployment", "ingress").Obj.(*appsv1.Deployment).Spec.Template.Labels; !IngressFromNamespaceAllowed(base, pod, 8095, from) {
		t.Errorf("Deployment/ingress: no NetworkPolicy admits the ingress controller (namespace %s) on 8095", from)
	}
	for _, svc := range []struct {
		name string
		port int
	}{{"nats", 4222}, {"objectstore", 9000}} {
		pod := find("StatefulSet", svc.name).Obj.(*appsv1.StatefulSet).Spec.Template.Labels
		if IngressFromNamespaceAllowed(base, pod, svc.port, from) {
			t.Errorf("StatefulSet/%s: port %d admits the namespace %s: teams would reach shared state", svc.name, svc.port, from)
		}
	}
	// The opt-in PodMonitor scrapes exactly the six tribunal services' pods.
	pm := find("PodMonitor", "tribunal").Obj.(*PodMonitor)
	sel, _ := metav1.LabelSelectorAsSelector(&pm.Spec.Selector)
	var scraped []string
	for _, o := range objs {
		if _, _, ok := podTemplate(o); ok && sel.Matches(labels.Set(templateLabels(o))) {
			scraped = append(scraped, o.Name)
		}
	}
	slices.Sort(scraped)
	if want := []string{"aggregator", "console", "gater", "ingress", "judge", "renderer"}; !slices.Equal(scraped, want) {
		t.Errorf("PodMonitor/tribunal scrapes %v, want %v", scraped, want)
	}
	// Every tribunal image is pinned to one release: .env.example's TRIBUNAL_VERSION.
	version := envExample(t)["TRIBUNAL_VERSION"]
	for _, img := range k.Images {
		if img.NewTag != version && img.Digest == "" {
			t.Errorf("kustomization.yaml: %s newTag %q, want the release %q (.env.example's TRIBUNAL_VERSION)", img.Name, img.NewTag, version)
		}
	}
	for _, img := range images {
		if strings.HasPrefix(img, tribunalImagePrefix) && !strings.HasSuffix(img, ":"+version) {
			t.Errorf("container image %q: want tag %q", img, version)
		}
	}
}

func TestUnknownFieldFails(t *testing.T) {
	const file = "deploy/testdata/k8s-unknown-field.yaml"
	objs, ps := DecodeManifests(file, read(t, file))
	p := wantProblem(t, ps, file, "Deployment/broken-typo (line 10)", "spec.template.spec.containers[0].readinessProbee", "unknown field")
	t.Log(p)
	if len(ps) != 1 || len(objs) != 1 || objs[0].Ref() != "ConfigMap/fine" {
		t.Errorf("want the ConfigMap decoded and one problem, got %d objects and:\n%s", len(objs), Report(ps))
	}
}

// workloadProblems decodes the manifest fixture file, which must decode cleanly, and
// returns what CheckWorkloads finds in it.
func workloadProblems(t *testing.T, file string) []Problem {
	t.Helper()
	objs, ps := DecodeManifests(file, read(t, file))
	if len(ps) > 0 {
		t.Fatalf("the fixture should decode:\n%s", Report(ps))
	}
	return CheckWorkloads(objs)
}

func TestMissingProbesAndLimitsFail(t *testing.T) {
	const file = "deploy/testdata/k8s-missing-probes-limits.yaml"
	ps := workloadProblems(t, file)
	base := "spec.template.spec.containers[0]."
	for _, field := range []string{"readinessProbe", "livenessProbe", "resources.limits.cpu", "resources.limits.memory"} {
		wantProblem(t, ps, file, "Deployment/no-probes", base+field, `container "judge"`)
	}
	if len(ps) != 4 {
		t.Errorf("want exactly those 4 problems, got:\n%s", Report(ps))
	}
}

func TestRootContainerFails(t *testing.T) {
	const file = "deploy/testdata/k8s-runs-as-root.yaml"
	ps := workloadProblems(t, file)
	base := "spec.template.spec.containers[0].securityContext."
	for _, field := range []string{"runAsNonRoot", "runAsUser", "allowPrivilegeEscalation", "readOnlyRootFilesystem", "capabilities.drop", "seccompProfile"} {
		wantProblem(t, ps, file, "StatefulSet/rooted", base+field, `container "nats"`)
	}
	// A StatefulSet needs at least liveness, which it has.
	for _, p := range ps {
		if strings.Contains(p.Field, "Probe") {
			t.Errorf("unexpected probe problem: %s", p)
		}
	}
}

func TestScaledObjectUnknownFieldFails(t *testing.T) {
	const file = "deploy/testdata/keda-unknown-field.yaml"
	_, ps := DecodeManifests(file, read(t, file))
	wantProblem(t, ps, file, "ScaledObject/judge", "spec.triggers[0].metdata", "unknown field")
}

func TestScaledObjectTriggerChecks(t *testing.T) {
	const file = "inline.yaml"
	objs, ps := DecodeManifests(file, []byte(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: judge}
spec:
  replicas: 3
  selector: {matchLabels: {app: judge}}
  template:
    metadata: {labels: {app: judge}}
    spec: {containers: [{name: judge, image: "x:1"}]}
---
apiVersion: keda.sh/v1alpha1
kind: ScaledObject
metadata: {name: judge}
spec:
  scaleTargetRef: {name: judge}
  triggers:
    - type: nats-jetstream
      metadata:
        natsServerMonitoringEndpoint: nats:8222
        account: "$G"
        stream: TRIBUNAL
        consumer: tribunal-judge
        lagTreshold: "32"
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny}
spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
`))
	if len(ps) > 0 {
		t.Fatalf("decode:\n%s", Report(ps))
	}
	ps = CheckReferences(objs)
	wantProblem(t, ps, file, "ScaledObject/judge", "spec.triggers[0].metadata.lagTreshold", "not a nats-jetstream scaler parameter")
	wantProblem(t, ps, file, "ScaledObject/judge", "spec.triggers[0].metadata.lagThreshold", "missing")
	wantProblem(t, ps, file, "Deployment/judge", "spec.replicas", "leave replicas unset")

	// KEDA's metadata values are strings: a bare number does not decode.
	_, ps = DecodeManifests(file, []byte("apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: j}\nspec:\n  scaleTargetRef: {name: j}\n  triggers: [{type: nats-jetstream, metadata: {lagThreshold: 32}}]\n"))
	wantProblem(t, ps, file, "ScaledObject/j (line 1)", "spec.triggers.metadata", "cannot unmarshal number")
	if len(ps) != 1 {
		t.Errorf("want one problem for a numeric metadata value, got:\n%s", Report(ps))
	}
}

func TestKustomizationCoverage(t *testing.T) {
	const file = "k/kustomization.yaml"
	k := []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - a.yaml\n  - gone.yaml\n  - ../base/\n")
	ps := CheckKustomization(file, k, []string{"kustomization.yaml", "a.yaml", "b.yaml", "README.md"})
	wantProblem(t, ps, file, "Kustomization", "resources[1]", `"gone.yaml" does not exist`)
	wantProblem(t, ps, file, "Kustomization", "resources", "b.yaml is in the folder but not listed")
	if len(ps) != 2 {
		t.Errorf("want 2 problems, got:\n%s", Report(ps))
	}
	_, ps = DecodeManifests(file, []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresource:\n  - a.yaml\n"))
	wantProblem(t, ps, file, "Kustomization/", "resource", "unknown field")
}

func TestSplitYAML(t *testing.T) {
	docs, lines := SplitYAML([]byte(`---
# only a comment
--- # a separator with a comment
a: 1
---
b: |
  text
  --- not a separator (indented, inside a block scalar)
---

`))
	if len(docs) != 2 || lines[0] != 4 || lines[1] != 6 {
		t.Fatalf("got %d documents at lines %v: %q", len(docs), lines, docs)
	}
	if !strings.Contains(string(docs[1]), "--- not a separator") {
		t.Errorf("block scalar split: %q", docs[1])
	}
}

// The renderer runs equivalence documents through the model: a compose file whose
// renderer lacks the judge settings (it would silently use the scripted runner) or names
// another provider than the judge fails, as do floating tribunal image tags and a NATS
// image of another release than the embedded server.
func TestComposeLLMAndVersionRules(t *testing.T) {
	const file = "deploy/testdata/compose-missing-healthcheck.yml"
	src := string(read(t, file))
	src = strings.Replace(src, "      <<: [*env, *llm]\n      TRIBUNAL_CHROMIUM", "      <<: *env\n      TRIBUNAL_CHROMIUM", 1)
	src = strings.Replace(src, "  aggregator:\n    <<: *service\n", "  aggregator:\n    <<: *service\n    image: ghcr.io/tribunal-dev/tribunal:latest\n", 1)
	src = strings.Replace(src, "nats:2.15.2-alpine", "nats:2.12-alpine", 1)
	ps := CheckCompose(file, []byte(src), envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
	wantProblem(t, ps, file, "service renderer", "services.renderer.environment.TRIBUNAL_JUDGE", "renderer calls the model")
	wantProblem(t, ps, file, "service aggregator", "services.aggregator.image", "never latest")
	wantProblem(t, ps, file, "service nats", "services.nats.image", "want NATS 2.15.x")

	src = strings.Replace(string(read(t, file)), "      <<: [*env, *llm]\n      TRIBUNAL_CHROMIUM", "      <<: [*env, *llm]\n      TRIBUNAL_JUDGE: openai\n      TRIBUNAL_CHROMIUM", 1)
	ps = CheckCompose(file, []byte(src), envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
	wantProblem(t, ps, file, "service renderer", "services.renderer.environment.TRIBUNAL_JUDGE", "same provider")
}

// The shipped compose file runs the embedded NATS release, pins every tribunal image to
// .env.example's TRIBUNAL_VERSION, and deploys the console.
func TestComposeVersionsAndConsole(t *testing.T) {
	env := envExample(t)
	if v := env["TRIBUNAL_VERSION"]; v == "" || v == "latest" || v == "dev" {
		t.Errorf(".env.example: TRIBUNAL_VERSION %q, want a release version", v)
	}
	if v := EmbeddedNATSVersion(repo); !strings.HasPrefix(v, "v2.") || strings.Contains(v, "-") {
		t.Errorf("go.mod pins nats-server %q, want a stable v2 release", v)
	}
	compose := string(read(t, "docker-compose.yml"))
	for _, want := range []string{`command: ["serve", "console"`, "nats:" + strings.TrimPrefix(EmbeddedNATSVersion(repo), "v") + "-alpine"} {
		if !strings.Contains(compose, want) {
			t.Errorf("docker-compose.yml lacks %q", want)
		}
	}
}

// A floating tag, a NATS of another release line than the embedded server, and an object
// store started by a path its image does not have are each a Problem.
func TestCheckImagesFails(t *testing.T) {
	const file = "inline.yaml"
	pod := func(name, image, command string) string {
		return `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: ` + name + `}
spec:
  serviceName: x
  selector: {matchLabels: {app: ` + name + `}}
  template:
    metadata: {labels: {app: ` + name + `}}
    spec: {containers: [{name: ` + name + `, image: "` + image + `"` + command + `}]}
---
`
	}
	objs, ps := DecodeManifests(file, []byte(pod("nats", "nats:2.12-alpine", "")+
		pod("store", "versity/versitygw:v1.8.0", `, command: ["/bin/sh", "-c"], args: ["exec /usr/bin/versitygw posix /data"]`)+
		pod("newstore", "versity/versitygw:v9.9.9", `, command: ["/usr/local/bin/versitygw"]`)+
		pod("app", "ghcr.io/tribunal-dev/tribunal:latest", "")))
	if len(ps) > 0 {
		t.Fatalf("decode:\n%s", Report(ps))
	}
	ps = CheckImages(objs, "v2.15.2")
	wantProblem(t, ps, file, "StatefulSet/nats", "spec.template.spec.containers[0].image", "want NATS 2.15.x")
	wantProblem(t, ps, file, "StatefulSet/store", "spec.template.spec.containers[0].image", "does not start /usr/local/bin/versitygw")
	wantProblem(t, ps, file, "StatefulSet/newstore", "spec.template.spec.containers[0].image", "check its Dockerfile")
	wantProblem(t, ps, file, "StatefulSet/app", "spec.template.spec.containers[0].image", "never latest")
	if len(ps) != 4 {
		t.Errorf("want 4 problems, got:\n%s", Report(ps))
	}
}

// With --tenants the judges consume one durable per team: the patch `tribunal tenants
// --keda` writes, applied over keda-judge.yaml as kustomize merges it (lists replaced,
// maps merged), scales the judges on every team's consumer and passes the checks.
func TestKEDATenantsPatch(t *testing.T) {
	teams := []string{"team-a", "team-b"}
	patch, err := tenants.KEDAPatch(teams, tenants.KEDAOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pobjs, ps := DecodeManifests("keda-tenants.yaml", []byte(patch))
	if len(ps) > 0 || len(pobjs) != 1 {
		t.Fatalf("the patch does not decode as a ScaledObject:\n%s\n%s", Report(ps), patch)
	}
	p := pobjs[0].Obj.(*ScaledObject)
	objs, _ := manifests(t)
	var so *ScaledObject
	for _, o := range objs {
		if s, ok := o.Obj.(*ScaledObject); ok && o.Name == pobjs[0].Name {
			so = s
		}
	}
	if so == nil {
		t.Fatal("the patch names no ScaledObject of deploy/k8s")
	}
	so.Spec.Triggers = p.Spec.Triggers
	so.Spec.Advanced.ScalingModifiers = p.Spec.Advanced.ScalingModifiers
	if ps := CheckReferences(objs); len(ps) > 0 {
		t.Fatalf("deploy/k8s with the patch:\n%s", Report(ps))
	}
	var consumers []string
	for _, tr := range so.Spec.Triggers {
		consumers = append(consumers, tr.Metadata["consumer"])
	}
	if want := bus.ConsumerNames(bus.Judge, teams); !slices.Equal(consumers, want) {
		t.Errorf("triggers on %v, want the judges' consumers %v", consumers, want)
	}
	if so.Spec.Advanced.HorizontalPodAutoscalerConfig == nil {
		t.Error("the patch dropped the base's scaling behaviour")
	}

	// A trigger the formula forgets is a Problem.
	so.Spec.Advanced.ScalingModifiers.Formula = tenants.KEDATriggerName("team-a")
	wantProblem(t, CheckReferences(objs), "deploy/k8s/keda-judge.yaml", "ScaledObject/judge", "spec.triggers[1].name", "not in the formula")
}

// The aggregator's spill folder must be on disk: unset (the temp dir, a tmpfs in
// docker-compose.yml), on a tmpfs, or on an emptyDir of medium Memory it is refused, in
// the compose file and the manifests alike.
func TestSpillDirOnDisk(t *testing.T) {
	src := string(read(t, "docker-compose.yml"))
	for _, c := range []struct{ name, from, to, field, msg string }{
		{"unset", "      TRIBUNAL_SPILL_DIR: /var/lib/tribunal/spill\n", "", ".environment.TRIBUNAL_SPILL_DIR", "not set"},
		{"tmpfs", "      TRIBUNAL_SPILL_DIR: /var/lib/tribunal/spill\n", "      TRIBUNAL_SPILL_DIR: /tmp/spill\n", ".volumes", "the tmpfs /tmp"},
		{"no volume", "      - aggregator-spill:/var/lib/tribunal/spill\n", "      - aggregator-spill:/var/lib/tribunal/other\n", ".volumes", "on no volume"},
	} {
		t.Run("compose "+c.name, func(t *testing.T) {
			broken := strings.Replace(src, c.from, c.to, 1)
			if broken == src {
				t.Fatalf("docker-compose.yml has no %q", c.from)
			}
			ps := CheckCompose("docker-compose.yml", []byte(broken), envExample(t), repoRoot(t), EmbeddedNATSVersion(repo))
			wantProblem(t, ps, "docker-compose.yml", "service aggregator", "services.aggregator"+c.field, c.msg)
		})
	}
	const file = "deploy/k8s/aggregator.yaml"
	k8s := string(read(t, file))
	for _, c := range []struct{ name, from, to, field, msg string }{
		{"unset", "            - name: TRIBUNAL_SPILL_DIR\n              value: /var/lib/tribunal/spill\n", "", ".env", "is not set"},
		{"memory", "          emptyDir:\n            sizeLimit: 8Gi\n", "          emptyDir:\n            medium: Memory\n", ".volumeMounts", "medium Memory"},
		{"no volume", "              mountPath: /var/lib/tribunal/spill\n", "              mountPath: /var/lib/tribunal/other\n", ".volumeMounts", "on no volume"},
	} {
		t.Run("k8s "+c.name, func(t *testing.T) {
			broken := strings.Replace(k8s, c.from, c.to, 1)
			if broken == k8s {
				t.Fatalf("%s has no %q", file, c.from)
			}
			objs, ps := DecodeManifests(file, []byte(broken))
			if len(ps) > 0 {
				t.Fatalf("decode:\n%s", Report(ps))
			}
			wantProblem(t, CheckWorkloads(objs), file, "Deployment/aggregator", "spec.template.spec.containers[0]"+c.field, c.msg)
		})
	}
}
