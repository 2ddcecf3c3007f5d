package deploy

import (
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
	corev1 "k8s.io/api/core/v1"
)

// spillEnv names the aggregator's spill folder (`tribunal serve --spill-dir`): where a
// large batch's completion writes its rows out to sorted runs (pkg/spillsort). Unset, they
// go to the temp dir, which the compose file makes a tmpfs: memory, the spill defeated.
const spillEnv = "TRIBUNAL_SPILL_DIR"

// serveFlag is the value of a `tribunal serve` flag in args (--name value, --name=value).
func serveFlag(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v, true
		}
		if a == "--"+name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

// within says whether path is mount or below it.
func within(path, mount string) bool {
	mount = strings.TrimRight(mount, "/")
	return path == mount || strings.HasPrefix(path, mount+"/")
}

// checkComposeSpill holds the compose aggregator's spill folder to being set and on a
// volume that is not a tmpfs (a named volume or a bind mount: disk).
func checkComposeSpill(ps *problems, project *types.Project) {
	svc, ok := project.Services["aggregator"]
	if !ok {
		return
	}
	obj, at := "service aggregator", "services.aggregator"
	dir := ""
	if v := svc.Environment[spillEnv]; v != nil {
		dir = *v
	}
	if d, ok := serveFlag(svc.Command, "spill-dir"); ok {
		dir = d
	}
	if dir == "" {
		ps.add(obj, at+".environment."+spillEnv, "not set: the completion's spill files go to the temp dir, a tmpfs (memory)")
		return
	}
	// The deepest mount holding the folder is where its files are written.
	mount, kind := "", ""
	for _, v := range svc.Volumes {
		if within(dir, v.Target) && len(v.Target) > len(mount) {
			mount, kind = v.Target, v.Type
		}
	}
	for _, tm := range svc.Tmpfs {
		target, _, _ := strings.Cut(tm, ":")
		if within(dir, target) && len(target) >= len(mount) {
			mount, kind = target, types.VolumeTypeTmpfs
		}
	}
	switch {
	case mount == "":
		ps.add(obj, at+".volumes", "the spill folder %s is on no volume: the root is read-only", dir)
	case kind == types.VolumeTypeTmpfs:
		ps.add(obj, at+".volumes", "the spill folder %s is on the tmpfs %s: memory, not disk", dir, mount)
	case kind != types.VolumeTypeVolume && kind != types.VolumeTypeBind:
		ps.add(obj, at+".volumes", "the spill folder %s is on a %s mount: want a named volume or a bind mount", dir, kind)
	}
}

// checkPodSpill holds an aggregator container's spill folder to being set (env or
// --spill-dir) and mounted from a disk-backed volume: an emptyDir without medium Memory,
// a persistent volume claim, or an ephemeral volume.
func checkPodSpill(ps *problems, ref, at string, spec *corev1.PodSpec, c *corev1.Container) {
	name := fmt.Sprintf("container %q", c.Name)
	dir := ""
	for _, e := range c.Env {
		if e.Name == spillEnv {
			dir = e.Value
		}
	}
	if d, ok := serveFlag(c.Args, "spill-dir"); ok {
		dir = d
	}
	if dir == "" {
		ps.add(ref, at+".env", "%s: %s is not set: the completion's spill files go to the temp dir", name, spillEnv)
		return
	}
	mount := corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		if within(dir, m.MountPath) && len(m.MountPath) > len(mount.MountPath) {
			mount = m
		}
	}
	if mount.Name == "" {
		ps.add(ref, at+".volumeMounts", "%s: the spill folder %s is on no volume: the root is read-only", name, dir)
		return
	}
	for _, v := range spec.Volumes {
		if v.Name != mount.Name {
			continue
		}
		switch {
		case v.EmptyDir != nil && v.EmptyDir.Medium == corev1.StorageMediumMemory:
			ps.add(ref, at+".volumeMounts", "%s: the spill folder %s is on volume %q, an emptyDir of medium Memory: memory, not disk", name, dir, v.Name)
		case v.EmptyDir == nil && v.PersistentVolumeClaim == nil && v.Ephemeral == nil && v.HostPath == nil:
			ps.add(ref, at+".volumeMounts", "%s: the spill folder %s is on volume %q: want an emptyDir on disk or a persistent volume", name, dir, v.Name)
		}
		return
	}
	ps.add(ref, at+".volumeMounts", "%s: volume %q of the spill folder is not declared", name, mount.Name)
}
