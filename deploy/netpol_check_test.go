package deploy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// policiesSelecting returns the NetworkPolicies among objs whose podSelector selects a pod
// with podLabels (all in one namespace, as the kustomization puts them).
func policiesSelecting(objs []Object, podLabels map[string]string) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range objs {
		np, ok := o.Obj.(*networkingv1.NetworkPolicy)
		if !ok {
			continue
		}
		if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil && sel.Matches(labels.Set(podLabels)) {
			out = append(out, np)
		}
	}
	return out
}

// portAllowed reports whether a rule's ports admit TCP port (no ports: every port).
func portAllowed(ports []networkingv1.NetworkPolicyPort, port int) bool {
	if len(ports) == 0 {
		return true
	}
	for _, p := range ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		if p.Port == nil {
			return true
		}
		lo := p.Port.IntValue()
		hi := lo
		if p.EndPort != nil {
			hi = int(*p.EndPort)
		}
		if port >= lo && port <= hi {
			return true
		}
	}
	return false
}

// EgressAllowed reports whether the policies among objs let a pod with podLabels open a
// TCP connection on port to an ipBlock covering cidr ("0.0.0.0/0": the internet), as
// Kubernetes evaluates them: the union of every egress rule of every policy selecting
// the pod.
func EgressAllowed(objs []Object, podLabels map[string]string, port int, cidr string) bool {
	want, err := netip.ParsePrefix(cidr)
	if err != nil {
		panic(fmt.Sprintf("EgressAllowed: %v", err))
	}
	for _, np := range policiesSelecting(objs, podLabels) {
		for _, r := range np.Spec.Egress {
			if !portAllowed(r.Ports, port) {
				continue
			}
			if len(r.To) == 0 {
				return true
			}
			for _, peer := range r.To {
				if peer.IPBlock == nil {
					continue
				}
				if p, err := netip.ParsePrefix(peer.IPBlock.CIDR); err == nil && p.Bits() <= want.Bits() && p.Contains(want.Addr()) {
					return true
				}
			}
		}
	}
	return false
}

// IngressFromNamespaceAllowed reports whether the policies among objs admit TCP port on
// a pod with podLabels from pods of the namespace named namespace (a namespaceSelector on
// kubernetes.io/metadata.name), as Prometheus in that namespace scrapes it.
func IngressFromNamespaceAllowed(objs []Object, podLabels map[string]string, port int, namespace string) bool {
	ns := labels.Set{"kubernetes.io/metadata.name": namespace}
	for _, np := range policiesSelecting(objs, podLabels) {
		for _, r := range np.Spec.Ingress {
			if !portAllowed(r.Ports, port) {
				continue
			}
			if len(r.From) == 0 {
				return true
			}
			for _, peer := range r.From {
				if peer.NamespaceSelector == nil {
					continue
				}
				if sel, err := metav1.LabelSelectorAsSelector(peer.NamespaceSelector); err == nil && sel.Matches(ns) {
					return true
				}
			}
		}
	}
	return false
}

// CheckImages holds every container image to the deployment's versions: no "latest"
// (or untagged) image; a NATS image of the release line tribunal embeds (natsVersion, from
// go.mod); and a container that starts a pinned third-party image's program by path (its
// command) names the path that image has (knownImageBinaries).
func CheckImages(objs []Object, natsVersion string) []Problem {
	var out []Problem
	for _, o := range objs {
		spec, base, ok := podTemplate(o)
		if !ok {
			continue
		}
		ps := problems{file: o.File}
		for i, c := range append(append([]corev1.Container(nil), spec.InitContainers...), spec.Containers...) {
			at := fmt.Sprintf("%s.containers[%d].image", base, i)
			if i < len(spec.InitContainers) {
				at = fmt.Sprintf("%s.initContainers[%d].image", base, i)
			}
			_, tag, _ := strings.Cut(c.Image[strings.LastIndex(c.Image, "/")+1:], ":")
			if tag == "latest" {
				ps.add(o.Ref(), at, "container %q: image %q: pin a release, never latest", c.Name, c.Image)
			}
			if msg := natsImageMismatch(c.Image, natsVersion); msg != "" {
				ps.add(o.Ref(), at, "container %q: %s", c.Name, msg)
			}
			known, isKnown := knownImageBinaries[c.Image]
			name, _, _ := strings.Cut(c.Image, ":")
			if len(c.Command) == 0 {
				continue
			}
			if !isKnown {
				for img := range knownImageBinaries {
					if strings.HasPrefix(img, name+":") {
						ps.add(o.Ref(), at, "container %q: image %q starts a command of its own, but only %s's paths are known: check its Dockerfile and record it in knownImageBinaries", c.Name, c.Image, img)
					}
				}
				continue
			}
			cmdline := strings.Join(append(append([]string(nil), c.Command...), c.Args...), " ")
			if c.Command[0] == "/bin/sh" && !known.shell {
				ps.add(o.Ref(), at, "container %q: image %q has no /bin/sh", c.Name, c.Image)
			}
			if !strings.Contains(cmdline, known.binary) {
				ps.add(o.Ref(), at, "container %q: command %q does not start %s, where image %q has its program", c.Name, cmdline, known.binary, c.Image)
			}
		}
		out = append(out, ps.list...)
	}
	return out
}

// peerIsPods reports whether a policy peer is a podSelector of the policy's own
// namespace (no namespaceSelector) that selects pods with podLabels.
func peerIsPods(peer networkingv1.NetworkPolicyPeer, podLabels map[string]string) bool {
	if peer.PodSelector == nil || peer.NamespaceSelector != nil || peer.IPBlock != nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(peer.PodSelector)
	return err == nil && sel.Matches(labels.Set(podLabels))
}

// IngressFromPodsAllowed reports whether the policies among objs admit TCP port on a
// pod with podLabels from pods of the same namespace with fromLabels.
func IngressFromPodsAllowed(objs []Object, podLabels map[string]string, port int, fromLabels map[string]string) bool {
	return podPeerAllowed(objs, podLabels, port, fromLabels, false)
}

// EgressToPodsAllowed reports whether the policies among objs let a pod with podLabels
// open a TCP connection on port to pods of the same namespace with toLabels.
func EgressToPodsAllowed(objs []Object, podLabels map[string]string, port int, toLabels map[string]string) bool {
	return podPeerAllowed(objs, podLabels, port, toLabels, true)
}

// podPeerAllowed is the union, over the policies selecting a pod with podLabels, of their
// ingress (or egress) rules admitting TCP port from (or to) pods with peerLabels.
func podPeerAllowed(objs []Object, podLabels map[string]string, port int, peerLabels map[string]string, egress bool) bool {
	type rule struct {
		ports []networkingv1.NetworkPolicyPort
		peers []networkingv1.NetworkPolicyPeer
	}
	for _, np := range policiesSelecting(objs, podLabels) {
		var rules []rule
		if egress {
			for _, r := range np.Spec.Egress {
				rules = append(rules, rule{r.Ports, r.To})
			}
		} else {
			for _, r := range np.Spec.Ingress {
				rules = append(rules, rule{r.Ports, r.From})
			}
		}
		for _, r := range rules {
			if portAllowed(r.ports, port) && (len(r.peers) == 0 ||
				slices.ContainsFunc(r.peers, func(p networkingv1.NetworkPolicyPeer) bool { return peerIsPods(p, peerLabels) })) {
				return true
			}
		}
	}
	return false
}
