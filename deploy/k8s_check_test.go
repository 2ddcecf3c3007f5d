package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// The Go types manifests are decoded into: the built-in API groups tribunal's manifests
// use (from k8s.io/api, registered here without client-go), plus local types for the
// kinds that have no Go types in this module: KEDA's ScaledObject and kustomize's
// Kustomization and Component.
var (
	scheme       = runtime.NewScheme()
	strictDecode runtime.Decoder

	scaledObjectGVK  = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.config.k8s.io", Version: "v1beta1", Kind: "Kustomization"}
	componentGVK     = schema.GroupVersionKind{Group: "kustomize.config.k8s.io", Version: "v1alpha1", Kind: "Component"}
	podMonitorGVK    = schema.GroupVersionKind{Group: "monitoring.coreos.com", Version: "v1", Kind: "PodMonitor"}
)

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, policyv1.AddToScheme,
		networkingv1.AddToScheme, rbacv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	scheme.AddKnownTypeWithName(scaledObjectGVK, &ScaledObject{})
	scheme.AddKnownTypeWithName(kustomizationGVK, &Kustomization{})
	scheme.AddKnownTypeWithName(componentGVK, &Kustomization{})
	scheme.AddKnownTypeWithName(podMonitorGVK, &PodMonitor{})
	// Strict: unknown and duplicate fields are errors, reported with their full path.
	strictDecode = serializer.NewCodecFactory(scheme, serializer.EnableStrict).UniversalDeserializer()
}

// ScaledObject is the part of KEDA's keda.sh/v1alpha1 ScaledObject that tribunal's
// manifests may use. Decoding is strict, so a field outside it (or a misspelt one) fails.
type ScaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ScaledObjectSpec `json:"spec"`
}

// ScaledObjectSpec is a ScaledObject's spec.
type ScaledObjectSpec struct {
	ScaleTargetRef        ScaleTarget     `json:"scaleTargetRef"`
	PollingInterval       *int32          `json:"pollingInterval,omitempty"`
	InitialCooldownPeriod *int32          `json:"initialCooldownPeriod,omitempty"`
	CooldownPeriod        *int32          `json:"cooldownPeriod,omitempty"`
	IdleReplicaCount      *int32          `json:"idleReplicaCount,omitempty"`
	MinReplicaCount       *int32          `json:"minReplicaCount,omitempty"`
	MaxReplicaCount       *int32          `json:"maxReplicaCount,omitempty"`
	Advanced              *ScaledAdvanced `json:"advanced,omitempty"`
	Fallback              *ScaledFallback `json:"fallback,omitempty"`
	Triggers              []ScaleTrigger  `json:"triggers"`
}

// ScaleTarget names the workload a ScaledObject scales.
type ScaleTarget struct {
	APIVersion             string `json:"apiVersion,omitempty"`
	Kind                   string `json:"kind,omitempty"`
	Name                   string `json:"name"`
	EnvSourceContainerName string `json:"envSourceContainerName,omitempty"`
}

// ScaledAdvanced is a ScaledObject's spec.advanced.
type ScaledAdvanced struct {
	RestoreToOriginalReplicaCount bool              `json:"restoreToOriginalReplicaCount,omitempty"`
	HorizontalPodAutoscalerConfig *HPAConfig        `json:"horizontalPodAutoscalerConfig,omitempty"`
	ScalingModifiers              *ScalingModifiers `json:"scalingModifiers,omitempty"`
}

// ScalingModifiers combine a ScaledObject's named triggers into one metric (KEDA 2.12+).
type ScalingModifiers struct {
	Formula          string                         `json:"formula,omitempty"`
	Target           string                         `json:"target,omitempty"`
	ActivationTarget string                         `json:"activationTarget,omitempty"`
	MetricType       autoscalingv2.MetricTargetType `json:"metricType,omitempty"`
}

// HPAConfig configures the HorizontalPodAutoscaler KEDA creates.
type HPAConfig struct {
	Name     string                                         `json:"name,omitempty"`
	Behavior *autoscalingv2.HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// ScaledFallback is a ScaledObject's spec.fallback.
type ScaledFallback struct {
	FailureThreshold int32  `json:"failureThreshold"`
	Replicas         int32  `json:"replicas"`
	Behavior         string `json:"behavior,omitempty"`
}

// ScaleTrigger is one of a ScaledObject's triggers. KEDA's metadata values are strings.
type ScaleTrigger struct {
	Type              string                            `json:"type"`
	Name              string                            `json:"name,omitempty"`
	UseCachedMetrics  bool                              `json:"useCachedMetrics,omitempty"`
	MetricType        autoscalingv2.MetricTargetType    `json:"metricType,omitempty"`
	Metadata          map[string]string                 `json:"metadata"`
	AuthenticationRef *corev1.TypedLocalObjectReference `json:"authenticationRef,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (o *ScaledObject) DeepCopyObject() runtime.Object { return deepCopy(o, &ScaledObject{}) }

// PodMonitor is the part of the Prometheus Operator's monitoring.coreos.com/v1 PodMonitor
// that tribunal's manifests may use.
type PodMonitor struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              PodMonitorSpec `json:"spec"`
}

// PodMonitorSpec is a PodMonitor's spec.
type PodMonitorSpec struct {
	Selector            metav1.LabelSelector `json:"selector"`
	PodMetricsEndpoints []PodMetricsEndpoint `json:"podMetricsEndpoints"`
	PodTargetLabels     []string             `json:"podTargetLabels,omitempty"`
	JobLabel            string               `json:"jobLabel,omitempty"`
}

// PodMetricsEndpoint is one scrape of a PodMonitor's pods.
type PodMetricsEndpoint struct {
	Port          string `json:"port"`
	Path          string `json:"path,omitempty"`
	Interval      string `json:"interval,omitempty"`
	ScrapeTimeout string `json:"scrapeTimeout,omitempty"`
	Scheme        string `json:"scheme,omitempty"`
	HonorLabels   bool   `json:"honorLabels,omitempty"`
}

// DeepCopyObject implements runtime.Object.
func (p *PodMonitor) DeepCopyObject() runtime.Object { return deepCopy(p, &PodMonitor{}) }

// Kustomization is the part of kustomize's Kustomization (and Component) that tribunal's
// kustomizations may use.
type Kustomization struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Namespace         string             `json:"namespace,omitempty"`
	NamePrefix        string             `json:"namePrefix,omitempty"`
	NameSuffix        string             `json:"nameSuffix,omitempty"`
	Resources         []string           `json:"resources,omitempty"`
	Components        []string           `json:"components,omitempty"`
	Images            []KustomizeImage   `json:"images,omitempty"`
	Labels            []KustomizeLabel   `json:"labels,omitempty"`
	CommonAnnotations map[string]string  `json:"commonAnnotations,omitempty"`
	Patches           []KustomizePatch   `json:"patches,omitempty"`
	Replicas          []KustomizeReplica `json:"replicas,omitempty"`
}

// KustomizeImage rewrites an image reference.
type KustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// KustomizeLabel adds labels.
type KustomizeLabel struct {
	Pairs            map[string]string `json:"pairs"`
	IncludeSelectors bool              `json:"includeSelectors,omitempty"`
	IncludeTemplates bool              `json:"includeTemplates,omitempty"`
}

// KustomizePatch is a strategic-merge or JSON 6902 patch, inline or from a file.
type KustomizePatch struct {
	Path    string            `json:"path,omitempty"`
	Patch   string            `json:"patch,omitempty"`
	Target  map[string]string `json:"target,omitempty"`
	Options map[string]bool   `json:"options,omitempty"`
}

// KustomizeReplica sets a workload's replica count.
type KustomizeReplica struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// DeepCopyObject implements runtime.Object.
func (k *Kustomization) DeepCopyObject() runtime.Object { return deepCopy(k, &Kustomization{}) }

func deepCopy[T runtime.Object](in, out T) runtime.Object {
	b, err := json.Marshal(in)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		panic(err)
	}
	return out
}

// Object is one decoded document of a manifest file.
type Object struct {
	// File is the file's name as given to DecodeManifests.
	File string
	// Line is the document's first line in the file that is not a comment or blank.
	Line int
	// GVK is the document's apiVersion and kind.
	GVK schema.GroupVersionKind
	// Name is the object's metadata.name.
	Name string
	// Obj is the typed object: *appsv1.Deployment, *ScaledObject, ...
	Obj runtime.Object
}

// Ref names the object as Kind/name, the way kubectl does.
func (o Object) Ref() string { return o.GVK.Kind + "/" + o.Name }

// SplitYAML splits a multi-document YAML stream at its "---" separator lines (a line
// starting with three dashes followed by nothing but blanks or a comment, the rule of
// apimachinery's YAMLReader), dropping documents that hold only comments and blank lines.
// It returns each document with the number of its first line that is not a comment or
// blank.
func SplitYAML(data []byte) (docs [][]byte, lines []int) {
	var cur bytes.Buffer
	first, n := 0, 0
	flush := func() {
		if first > 0 {
			docs = append(docs, bytes.Clone(cur.Bytes()))
			lines = append(lines, first)
		}
		cur.Reset()
		first = 0
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for sc.Scan() {
		n++
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "---"); ok {
			if r := strings.TrimSpace(rest); r == "" || strings.HasPrefix(r, "#") {
				flush()
				continue
			}
		}
		if t := strings.TrimSpace(line); first == 0 && t != "" && !strings.HasPrefix(t, "#") {
			first = n
		}
		cur.WriteString(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs, lines
}

// fieldInError finds the field path in apimachinery's strict-decoding messages
// (`unknown field "spec.x"`, `duplicate field "spec.y"`).
var fieldInError = regexp.MustCompile(`(?:unknown|duplicate) field "([^"]*)"`)

// fieldInTypeError finds the field path in encoding/json's type errors ("cannot
// unmarshal number into Go struct field ScaleTrigger.spec.triggers.metadata of type
// string").
var fieldInTypeError = regexp.MustCompile(`Go struct field [A-Za-z0-9_]+\.(\S+) of type`)

// DecodeManifests splits file's YAML into documents and decodes each strictly into its
// registered Go type. Unknown kinds, unknown or duplicate fields and type mismatches are
// Problems naming the file, the document's line and object, and the field.
func DecodeManifests(file string, data []byte) ([]Object, []Problem) {
	ps := problems{file: file}
	var objs []Object
	docs, lines := SplitYAML(data)
	if len(docs) == 0 {
		ps.add("", "", "no Kubernetes object in the file")
	}
	for i, doc := range docs {
		where := fmt.Sprintf("document at line %d", lines[i])
		obj, gvk, err := strictDecode.Decode(doc, nil, nil)
		if obj == nil {
			// Not decodable at all (unknown kind, wrong type): name the object from a
			// lenient read, and the field from encoding/json's message.
			var head struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if yaml.Unmarshal(doc, &head) == nil && head.Kind != "" {
				where = fmt.Sprintf("%s/%s (line %d)", head.Kind, head.Metadata.Name, lines[i])
			}
			field := ""
			if m := fieldInTypeError.FindStringSubmatch(err.Error()); m != nil {
				field = m[1]
			}
			ps.add(where, field, "%v", err)
			continue
		}
		o := Object{File: file, Line: lines[i], GVK: *gvk, Obj: obj}
		if m, ok := obj.(metav1.Object); ok {
			o.Name = m.GetName()
		}
		ref := o.Ref() + " (line " + strconv.Itoa(o.Line) + ")"
		if err != nil {
			if strict, ok := runtime.AsStrictDecodingError(err); ok {
				for _, e := range strict.Errors() {
					field := ""
					if m := fieldInError.FindStringSubmatch(e.Error()); m != nil {
						field = m[1]
					}
					ps.add(ref, field, "strict decoding: %v", e)
				}
			} else {
				ps.add(ref, "", "%v", err)
			}
			continue
		}
		if o.Name == "" && gvk.Kind != "Kustomization" && gvk.Kind != "Component" {
			ps.add(ref, "metadata.name", "missing")
		}
		objs = append(objs, o)
	}
	return objs, ps.list
}

// Pod policy. Containers running `tribunal serve <service>` are recognised by their image
// and first argument.
var (
	tribunalImagePrefix = "ghcr.io/tribunal-dev/"
	tribunalServices    = []string{"renderer", "gater", "judge", "aggregator", "all", "console", "ingress"}
)

// podTemplate returns the pod spec of a workload and the path to it.
func podTemplate(o Object) (*corev1.PodSpec, string, bool) {
	switch w := o.Obj.(type) {
	case *appsv1.Deployment:
		return &w.Spec.Template.Spec, "spec.template.spec", true
	case *appsv1.StatefulSet:
		return &w.Spec.Template.Spec, "spec.template.spec", true
	case *appsv1.DaemonSet:
		return &w.Spec.Template.Spec, "spec.template.spec", true
	case *batchv1.Job:
		return &w.Spec.Template.Spec, "spec.template.spec", true
	case *batchv1.CronJob:
		return &w.Spec.JobTemplate.Spec.Template.Spec, "spec.jobTemplate.spec.template.spec", true
	}
	return nil, "", false
}

// CheckWorkloads holds every workload's pods to tribunal's policy:
//
//   - every container of a Deployment or DaemonSet has readiness and liveness probes, of a
//     StatefulSet at least a liveness probe; a `tribunal serve` container's readiness
//     probe asks /readyz and its liveness probe /healthz; a named probe port exists;
//   - every container (init containers too) has CPU and memory requests and limits;
//   - every container runs with runAsNonRoot true and a non-zero runAsUser (its own or
//     the pod's), allowPrivilegeEscalation false, a read-only root filesystem, all
//     capabilities dropped and the RuntimeDefault (or a Localhost) seccomp profile;
//   - every image has a tag or a digest;
//   - an aggregator's spill folder (TRIBUNAL_SPILL_DIR, --spill-dir) is set and on a
//     disk-backed volume, never an emptyDir of medium Memory.
func CheckWorkloads(objs []Object) []Problem {
	var out []Problem
	for _, o := range objs {
		spec, base, ok := podTemplate(o)
		if !ok {
			continue
		}
		ps := problems{file: o.File}
		ref := o.Ref()
		needReadiness := false
		needLiveness := false
		switch o.Obj.(type) {
		case *appsv1.Deployment, *appsv1.DaemonSet:
			needReadiness, needLiveness = true, true
		case *appsv1.StatefulSet:
			needLiveness = true
		}
		check := func(kind string, i int, c *corev1.Container, probes bool) {
			at := fmt.Sprintf("%s.%s[%d]", base, kind, i)
			name := fmt.Sprintf("container %q", c.Name)
			if !strings.Contains(c.Image, ":") && !strings.Contains(c.Image, "@") {
				ps.add(ref, at+".image", "%s: image %q has no tag or digest", name, c.Image)
			}
			serve := strings.HasPrefix(c.Image, tribunalImagePrefix) && len(c.Args) >= 2 && c.Args[0] == "serve" && slices.Contains(tribunalServices, c.Args[1])
			if probes {
				checkProbe(&ps, ref, at+".readinessProbe", name, c, c.ReadinessProbe, needReadiness || serve, serve, "/readyz")
				checkProbe(&ps, ref, at+".livenessProbe", name, c, c.LivenessProbe, needLiveness || serve, serve, "/healthz")
				checkProbe(&ps, ref, at+".startupProbe", name, c, c.StartupProbe, false, false, "")
			}
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if _, ok := c.Resources.Requests[r]; !ok {
					ps.add(ref, at+".resources.requests."+string(r), "%s has no %s request", name, r)
				}
				if _, ok := c.Resources.Limits[r]; !ok {
					ps.add(ref, at+".resources.limits."+string(r), "%s has no %s limit", name, r)
				}
			}
			checkSecurity(&ps, ref, at+".securityContext", base+".securityContext", name, spec.SecurityContext, c.SecurityContext)
			if serve && probes && (c.Args[1] == "aggregator" || c.Args[1] == "all") {
				checkPodSpill(&ps, ref, at, spec, c)
			}
		}
		for i := range spec.InitContainers {
			check("initContainers", i, &spec.InitContainers[i], false)
		}
		for i := range spec.Containers {
			check("containers", i, &spec.Containers[i], true)
		}
		if len(spec.Containers) == 0 {
			ps.add(ref, base+".containers", "no containers")
		}
		out = append(out, ps.list...)
	}
	return out
}

func checkProbe(ps *problems, ref, at, name string, c *corev1.Container, p *corev1.Probe, required, serve bool, wantPath string) {
	if p == nil {
		if required {
			ps.add(ref, at, "%s has no %s", name, at[strings.LastIndex(at, ".")+1:])
		}
		return
	}
	if p.HTTPGet == nil {
		if serve {
			ps.add(ref, at+".httpGet", "%s runs `tribunal serve`: probe its health endpoint with httpGet", name)
		}
		return
	}
	if serve && p.HTTPGet.Path != wantPath {
		ps.add(ref, at+".httpGet.path", "%s runs `tribunal serve`: want %s, got %q", name, wantPath, p.HTTPGet.Path)
	}
	if p.HTTPGet.Port.Type == intstr.String {
		found := false
		for _, cp := range c.Ports {
			found = found || cp.Name == p.HTTPGet.Port.StrVal
		}
		if !found {
			ps.add(ref, at+".httpGet.port", "%s has no port named %q", name, p.HTTPGet.Port.StrVal)
		}
	}
}

func checkSecurity(ps *problems, ref, at, podAt, name string, pod *corev1.PodSecurityContext, c *corev1.SecurityContext) {
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	if c == nil {
		c = &corev1.SecurityContext{}
	}
	nonRoot, user, seccomp := pod.RunAsNonRoot, pod.RunAsUser, pod.SeccompProfile
	if c.RunAsNonRoot != nil {
		nonRoot = c.RunAsNonRoot
	}
	if c.RunAsUser != nil {
		user = c.RunAsUser
	}
	if c.SeccompProfile != nil {
		seccomp = c.SeccompProfile
	}
	if nonRoot == nil || !*nonRoot {
		ps.add(ref, at+".runAsNonRoot", "%s: runAsNonRoot must be true (here or in %s)", name, podAt)
	}
	switch {
	case user == nil:
		ps.add(ref, at+".runAsUser", "%s: set a numeric non-root runAsUser (here or in %s), so the kubelet can verify runAsNonRoot", name, podAt)
	case *user == 0:
		ps.add(ref, at+".runAsUser", "%s: runAsUser is 0 (root)", name)
	}
	if c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation {
		ps.add(ref, at+".allowPrivilegeEscalation", "%s: must be false", name)
	}
	if c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem {
		ps.add(ref, at+".readOnlyRootFilesystem", "%s: must be true (mount an emptyDir where it writes)", name)
	}
	if c.Privileged != nil && *c.Privileged {
		ps.add(ref, at+".privileged", "%s: must not be privileged", name)
	}
	if c.Capabilities == nil || !slices.Contains(c.Capabilities.Drop, "ALL") {
		ps.add(ref, at+".capabilities.drop", "%s: must drop ALL capabilities", name)
	} else if len(c.Capabilities.Add) > 0 {
		ps.add(ref, at+".capabilities.add", "%s: adds capabilities %v", name, c.Capabilities.Add)
	}
	if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
		ps.add(ref, at+".seccompProfile", "%s: want seccompProfile RuntimeDefault (here or in %s)", name, podAt)
	}
}

// knownJetStreamMetadata are the metadata keys of KEDA's nats-jetstream scaler; a
// misspelt key would be ignored by KEDA and its default used, so it is a Problem here.
var knownJetStreamMetadata = []string{"natsServerMonitoringEndpoint", "account", "stream", "consumer", "lagThreshold", "activationLagThreshold", "useHttps"}

// CheckReferences checks what the manifests rely on across objects: Services, PodDisruption
// Budgets and NetworkPolicies select existing pods; StatefulSets name a headless Service;
// pods use existing ServiceAccounts, ConfigMaps and Secrets (and their keys); ScaledObjects
// scale an existing Deployment that sets no replica count of its own, with nats-jetstream
// triggers whose metadata is complete and correctly spelt; a default-deny NetworkPolicy
// exists. Objects are matched by kind and name, whatever their file.
func CheckReferences(objs []Object) []Problem {
	var out []Problem
	byKind := map[string]map[string]Object{}
	var templates []map[string]string
	for _, o := range objs {
		if byKind[o.GVK.Kind] == nil {
			byKind[o.GVK.Kind] = map[string]Object{}
		}
		byKind[o.GVK.Kind][o.Name] = o
		if spec, _, ok := podTemplate(o); ok && spec != nil {
			templates = append(templates, templateLabels(o))
		}
	}
	selects := func(sel labels.Selector) bool {
		for _, t := range templates {
			if sel.Matches(labels.Set(t)) {
				return true
			}
		}
		return false
	}
	secretKeys := func(name string) (map[string]bool, bool) {
		o, ok := byKind["Secret"][name]
		if !ok {
			return nil, false
		}
		s := o.Obj.(*corev1.Secret)
		keys := map[string]bool{}
		for k := range s.Data {
			keys[k] = true
		}
		for k := range s.StringData {
			keys[k] = true
		}
		return keys, true
	}
	configKeys := func(name string) (map[string]bool, bool) {
		o, ok := byKind["ConfigMap"][name]
		if !ok {
			return nil, false
		}
		keys := map[string]bool{}
		for k := range o.Obj.(*corev1.ConfigMap).Data {
			keys[k] = true
		}
		return keys, true
	}
	hasDefaultDeny := false
	for _, o := range objs {
		ps := problems{file: o.File}
		ref := o.Ref()
		switch w := o.Obj.(type) {
		case *corev1.Service:
			if len(w.Spec.Selector) > 0 && !selects(labels.SelectorFromSet(w.Spec.Selector)) {
				ps.add(ref, "spec.selector", "selects no pod template in the manifests")
			}
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(w.Spec.Selector)
			if err != nil || w.Spec.Selector == nil || !selects(sel) {
				ps.add(ref, "spec.selector", "selects no pod template in the manifests")
			}
		case *networkingv1.NetworkPolicy:
			sel, err := metav1.LabelSelectorAsSelector(&w.Spec.PodSelector)
			switch {
			case err != nil:
				ps.add(ref, "spec.podSelector", "%v", err)
			case sel.Empty():
				if len(w.Spec.Ingress) == 0 && len(w.Spec.Egress) == 0 &&
					slices.Contains(w.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) &&
					slices.Contains(w.Spec.PolicyTypes, networkingv1.PolicyTypeEgress) {
					hasDefaultDeny = true
				}
			case !selects(sel):
				ps.add(ref, "spec.podSelector", "selects no pod template in the manifests")
			}
		case *PodMonitor:
			sel, err := metav1.LabelSelectorAsSelector(&w.Spec.Selector)
			if err != nil || sel.Empty() || !selects(sel) {
				ps.add(ref, "spec.selector", "selects no pod template in the manifests")
				break
			}
			for i, ep := range w.Spec.PodMetricsEndpoints {
				for _, o2 := range objs {
					spec, _, ok := podTemplate(o2)
					if !ok || !sel.Matches(labels.Set(templateLabels(o2))) {
						continue
					}
					if !slices.ContainsFunc(spec.Containers, func(c corev1.Container) bool {
						return slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == ep.Port })
					}) {
						ps.add(ref, fmt.Sprintf("spec.podMetricsEndpoints[%d].port", i), "%s selected, but it has no container port named %q", o2.Ref(), ep.Port)
					}
				}
			}
		case *appsv1.StatefulSet:
			svc, ok := byKind["Service"][w.Spec.ServiceName]
			if !ok {
				ps.add(ref, "spec.serviceName", "no Service %q in the manifests", w.Spec.ServiceName)
			} else if svc.Obj.(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone {
				ps.add(ref, "spec.serviceName", "Service %q is not headless (clusterIP: None)", w.Spec.ServiceName)
			}
		case *ScaledObject:
			t := w.Spec.ScaleTargetRef
			target, ok := byKind["Deployment"][t.Name]
			if (t.Kind != "" && t.Kind != "Deployment") || !ok {
				ps.add(ref, "spec.scaleTargetRef", "no Deployment %q in the manifests", t.Name)
			} else if target.Obj.(*appsv1.Deployment).Spec.Replicas != nil {
				ps.add(target.Ref(), "spec.replicas", "is scaled by ScaledObject/%s: leave replicas unset, or every apply resets KEDA's count", o.Name)
			}
			if len(w.Spec.Triggers) == 0 {
				ps.add(ref, "spec.triggers", "no triggers")
			}
			if a := w.Spec.Advanced; a != nil && a.ScalingModifiers != nil {
				sm := a.ScalingModifiers
				if sm.Formula == "" {
					ps.add(ref, "spec.advanced.scalingModifiers.formula", "missing")
				}
				if n, err := strconv.ParseFloat(sm.Target, 64); err != nil || n <= 0 {
					ps.add(ref, "spec.advanced.scalingModifiers.target", "want a positive number, got %q", sm.Target)
				}
				// A trigger the formula leaves out does not count; a name it uses that no
				// trigger has fails in KEDA.
				formulaNames := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`).FindAllString(sm.Formula, -1)
				for i, tr := range w.Spec.Triggers {
					if tr.Name == "" || !slices.Contains(formulaNames, tr.Name) {
						ps.add(ref, fmt.Sprintf("spec.triggers[%d].name", i), "%q is not in the formula %q: every trigger must count", tr.Name, sm.Formula)
					}
				}
				for _, n := range formulaNames {
					if !slices.ContainsFunc(w.Spec.Triggers, func(tr ScaleTrigger) bool { return tr.Name == n }) {
						ps.add(ref, "spec.advanced.scalingModifiers.formula", "%q names no trigger", n)
					}
				}
			}
			for i, tr := range w.Spec.Triggers {
				if tr.Type != "nats-jetstream" {
					continue
				}
				at := fmt.Sprintf("spec.triggers[%d].metadata", i)
				for k := range tr.Metadata {
					if !slices.Contains(knownJetStreamMetadata, k) {
						ps.add(ref, at+"."+k, "not a nats-jetstream scaler parameter (known: %s)", strings.Join(knownJetStreamMetadata, ", "))
					}
				}
				for _, k := range knownJetStreamMetadata[:5] {
					if tr.Metadata[k] == "" {
						ps.add(ref, at+"."+k, "missing")
					}
				}
				for _, k := range []string{"lagThreshold", "activationLagThreshold"} {
					if v, ok := tr.Metadata[k]; ok {
						if n, err := strconv.ParseInt(v, 10, 64); err != nil || n < 0 || (k == "lagThreshold" && n == 0) {
							ps.add(ref, at+"."+k, "want a positive integer, got %q", v)
						}
					}
				}
			}
		}
		if spec, base, ok := podTemplate(o); ok {
			if sa := spec.ServiceAccountName; sa != "" {
				if _, ok := byKind["ServiceAccount"][sa]; !ok {
					ps.add(ref, base+".serviceAccountName", "no ServiceAccount %q in the manifests", sa)
				}
			}
			all := append(slices.Clone(spec.InitContainers), spec.Containers...)
			for _, c := range all {
				at := fmt.Sprintf("%s.containers[%q]", base, c.Name)
				for j, ef := range c.EnvFrom {
					if ef.ConfigMapRef != nil && (ef.ConfigMapRef.Optional == nil || !*ef.ConfigMapRef.Optional) {
						if _, ok := configKeys(ef.ConfigMapRef.Name); !ok {
							ps.add(ref, fmt.Sprintf("%s.envFrom[%d].configMapRef", at, j), "no ConfigMap %q in the manifests", ef.ConfigMapRef.Name)
						}
					}
					if ef.SecretRef != nil && (ef.SecretRef.Optional == nil || !*ef.SecretRef.Optional) {
						if _, ok := secretKeys(ef.SecretRef.Name); !ok {
							ps.add(ref, fmt.Sprintf("%s.envFrom[%d].secretRef", at, j), "no Secret %q in the manifests", ef.SecretRef.Name)
						}
					}
				}
				for _, e := range c.Env {
					if e.ValueFrom == nil {
						continue
					}
					if r := e.ValueFrom.SecretKeyRef; r != nil {
						if keys, ok := secretKeys(r.Name); !ok || !keys[r.Key] {
							ps.add(ref, fmt.Sprintf("%s.env[%s].valueFrom.secretKeyRef", at, e.Name), "no key %q in a Secret %q in the manifests", r.Key, r.Name)
						}
					}
					if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
						if keys, ok := configKeys(r.Name); !ok || !keys[r.Key] {
							ps.add(ref, fmt.Sprintf("%s.env[%s].valueFrom.configMapKeyRef", at, e.Name), "no key %q in a ConfigMap %q in the manifests", r.Key, r.Name)
						}
					}
				}
			}
		}
		out = append(out, ps.list...)
	}
	if len(objs) > 0 && !hasDefaultDeny {
		out = append(out, Problem{File: path.Dir(objs[0].File), Object: "NetworkPolicy", Msg: "no default-deny NetworkPolicy (empty podSelector, Ingress and Egress, no rules)"})
	}
	return out
}

func templateLabels(o Object) map[string]string {
	switch w := o.Obj.(type) {
	case *appsv1.Deployment:
		return w.Spec.Template.Labels
	case *appsv1.StatefulSet:
		return w.Spec.Template.Labels
	case *appsv1.DaemonSet:
		return w.Spec.Template.Labels
	case *batchv1.Job:
		return w.Spec.Template.Labels
	case *batchv1.CronJob:
		return w.Spec.JobTemplate.Spec.Template.Labels
	}
	return nil
}

// CheckKustomization checks that a kustomization lists exactly the manifests beside it:
// every resource it names is one of dirFiles (the names of the files in its folder) or
// a sub-folder reference ending in "/", and every YAML file of the folder other than the
// kustomization itself is listed. Components are checked the same way by their own call.
func CheckKustomization(file string, data []byte, dirFiles []string) []Problem {
	ps := problems{file: file}
	objs, decodeProblems := DecodeManifests(file, data)
	if len(decodeProblems) > 0 {
		return decodeProblems
	}
	if len(objs) != 1 {
		ps.add("", "", "want exactly one Kustomization document, got %d", len(objs))
		return ps.list
	}
	k, ok := objs[0].Obj.(*Kustomization)
	if !ok {
		ps.add(objs[0].Ref(), "kind", "want Kustomization or Component")
		return ps.list
	}
	ref := objs[0].GVK.Kind
	listed := map[string]bool{}
	for i, r := range k.Resources {
		clean := path.Clean(r)
		switch {
		case strings.Contains(r, "://"):
			ps.add(ref, fmt.Sprintf("resources[%d]", i), "%q is remote: vendor it, so the checks here see it", r)
		case strings.Contains(clean, "/"):
			// A sub-folder or another kustomization, checked by its own call.
		case !slices.Contains(dirFiles, clean):
			ps.add(ref, fmt.Sprintf("resources[%d]", i), "%q does not exist", r)
		case listed[clean]:
			ps.add(ref, fmt.Sprintf("resources[%d]", i), "%q is listed twice", r)
		}
		listed[clean] = true
	}
	base := path.Base(file)
	for _, f := range dirFiles {
		if f == base || (!strings.HasSuffix(f, ".yaml") && !strings.HasSuffix(f, ".yml")) {
			continue
		}
		if !listed[f] {
			ps.add(ref, "resources", "%s is in the folder but not listed: list it, or move it out", f)
		}
	}
	return ps.list
}
