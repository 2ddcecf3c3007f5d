package deploy

import (
	"bytes"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/compose-spec/compose-go/v2/dotenv"
	"github.com/compose-spec/compose-go/v2/loader"
	"github.com/compose-spec/compose-go/v2/types"
)

// The compose project's shape.
var (
	composeProject = "tribunal"
	// composeServices must exist; the tribunal services among them run `tribunal serve`.
	composeServices  = []string{"nats", "objectstore", "renderer", "gater", "judge", "aggregator", "console", "ingress"}
	tribunalServeSvc = []string{"renderer", "gater", "judge", "aggregator", "console", "ingress"}
	// llmServices call the model: the judge, and the renderer, which runs equivalence
	// documents through it. Only they may receive the LLM key, and both need the judge
	// settings (the same ones), or equivalence jobs are run by another provider than the
	// one configured.
	llmServices = []string{"judge", "renderer"}
	// tribunalEnv must be set, non-empty, on every tribunal service.
	tribunalEnv = []string{"TRIBUNAL_NATS_URL", "TRIBUNAL_BLOB_URL", "TRIBUNAL_S3_ACCESS_KEY", "TRIBUNAL_S3_SECRET_KEY"}
	// judgeEnv must be defined on the llmServices (TRIBUNAL_JUDGE non-empty; the others
	// may be empty for the offline scripted judge).
	judgeEnv = []string{"TRIBUNAL_JUDGE", "TRIBUNAL_JUDGE_MODEL", "TRIBUNAL_OPENAI_BASE_URL", "OPENAI_API_KEY"}
)

// ParseDotEnv reads a .env file the way docker compose does (compose-go's dotenv parser),
// without looking at the process environment.
func ParseDotEnv(file string, data []byte) (map[string]string, []Problem) {
	env, err := dotenv.ParseWithLookup(bytes.NewReader(data), func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, []Problem{{File: file, Msg: "dotenv: " + err.Error()}}
	}
	return env, nil
}

// LoadCompose loads a compose file with compose-go as `docker compose` does: schema
// validation, ${...} interpolation from env only, project name "tribunal", paths relative
// to workingDir.
func LoadCompose(file string, data []byte, env map[string]string, workingDir string) (*types.Project, error) {
	return LoadComposeFiles([]types.ConfigFile{{Filename: file, Content: data}}, env, workingDir)
}

// LoadComposeFiles loads several compose files as one project, each later file merged
// over the earlier ones, as `docker compose -f a.yml -f b.yml` does.
func LoadComposeFiles(files []types.ConfigFile, env map[string]string, workingDir string) (*types.Project, error) {
	return loader.LoadWithContext(context.Background(), types.ConfigDetails{
		WorkingDir:  workingDir,
		ConfigFiles: files,
		Environment: types.Mapping(env),
	}, func(o *loader.Options) { o.SetProjectName(composeProject, true) })
}

// CheckCompose loads a compose file with compose-go, as `docker compose` would (schema
// validation, ${...} interpolation from env only, project name "tribunal", paths relative
// to workingDir), and holds it to tribunal's policy:
//
//   - the services nats, objectstore, renderer, gater, judge and aggregator exist, and
//     every service has an image or a build (whose Dockerfile exists);
//   - the tribunal services (the console and the ingress too) run `serve <name>`, have an exec-form
//     healthcheck on /readyz (their images have no shell), wait for NATS to be healthy
//     and for the object store, run read-only with all capabilities dropped, and have the
//     TRIBUNAL_* connection variables set; their images carry a version tag, never
//     latest, the same for all;
//   - only the judge and the renderer get OPENAI_API_KEY, and both have the judge
//     variables, with the same values;
//   - the judge can be scaled (`--scale judge=N`): no container_name, no published port;
//   - the renderer builds from Dockerfile.renderer and has TRIBUNAL_CHROMIUM;
//   - the aggregator's spill folder (TRIBUNAL_SPILL_DIR, --spill-dir) is set and on a
//     named volume or a bind mount, never a tmpfs (memory);
//   - NATS runs JetStream with its store on a named volume, and has a healthcheck; its
//     image is the nats-server release (major.minor) embedded in tribunal, natsVersion.
func CheckCompose(file string, data []byte, env map[string]string, workingDir, natsVersion string) []Problem {
	project, err := LoadCompose(file, data, env, workingDir)
	if err != nil {
		return []Problem{{File: file, Msg: "compose-go: " + err.Error()}}
	}
	return checkComposeProject(file, project, workingDir, natsVersion)
}

// checkComposeProject holds a loaded project to CheckCompose's policy; problems name file.
func checkComposeProject(file string, project *types.Project, workingDir, natsVersion string) []Problem {
	ps := problems{file: file}
	for _, name := range composeServices {
		if _, ok := project.Services[name]; !ok {
			ps.add("service "+name, "services."+name, "missing")
		}
	}
	names := make([]string, 0, len(project.Services))
	for name := range project.Services {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		svc := project.Services[name]
		obj, at := "service "+name, "services."+name
		if svc.Image == "" && svc.Build == nil {
			ps.add(obj, at+".image", "neither image nor build")
		}
		if b := svc.Build; b != nil && workingDir != "" {
			df := b.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			if !filepath.IsAbs(df) {
				df = filepath.Join(b.Context, df)
			}
			if _, err := os.Stat(df); err != nil {
				ps.add(obj, at+".build.dockerfile", "%v", err)
			}
		}
		if _, ok := svc.Environment["OPENAI_API_KEY"]; ok && !slices.Contains(llmServices, name) {
			ps.add(obj, at+".environment.OPENAI_API_KEY", "only the judge and the renderer may receive the LLM API key")
		}
		if slices.Contains(tribunalServeSvc, name) {
			checkTribunalService(&ps, obj, at, name, svc)
		}
	}
	checkComposeSpill(&ps, project)
	if judge, ok := project.Services["judge"]; ok {
		if judge.ContainerName != "" {
			ps.add("service judge", "services.judge.container_name", "%q: a fixed name prevents `docker compose up --scale judge=N`", judge.ContainerName)
		}
		for i, p := range judge.Ports {
			ps.add("service judge", "services.judge.ports", "port %d (%d published as %q): replicas cannot share a host port; judges need none", i, p.Target, p.Published)
		}
	}
	for _, name := range llmServices {
		svc, ok := project.Services[name]
		if !ok {
			continue
		}
		for _, k := range judgeEnv {
			v, ok := svc.Environment[k]
			if !ok || v == nil || (k == "TRIBUNAL_JUDGE" && *v == "") {
				ps.add("service "+name, "services."+name+".environment."+k, "not set: %s calls the model", name)
				continue
			}
			if j := project.Services["judge"].Environment[k]; name != "judge" && j != nil && *j != *v {
				ps.add("service "+name, "services."+name+".environment."+k, "%q, but the judge has %q: both must call the same provider", *v, *j)
			}
		}
	}
	checkImageTags(&ps, project)
	if r, ok := project.Services["renderer"]; ok {
		if r.Build == nil || filepath.Base(r.Build.Dockerfile) != "Dockerfile.renderer" {
			ps.add("service renderer", "services.renderer.build.dockerfile", "want Dockerfile.renderer (the image with chromium)")
		}
		if v := r.Environment["TRIBUNAL_CHROMIUM"]; v == nil || *v == "" {
			ps.add("service renderer", "services.renderer.environment.TRIBUNAL_CHROMIUM", "not set")
		}
	}
	if nats, ok := project.Services["nats"]; ok {
		checkNATS(&ps, project, "nats", nats, natsVersion)
	}
	return ps.list
}

// checkImageTags holds tribunal's images to one pinned version tag.
func checkImageTags(ps *problems, project *types.Project) {
	tags := map[string]string{}
	for _, name := range tribunalServeSvc {
		svc, ok := project.Services[name]
		if !ok {
			continue
		}
		repo, tag, _ := strings.Cut(strings.TrimPrefix(svc.Image, tribunalImagePrefix), ":")
		if !strings.HasPrefix(svc.Image, tribunalImagePrefix) || repo == "" {
			continue
		}
		if tag == "" || tag == "latest" {
			ps.add("service "+name, "services."+name+".image", "%q: pin a version tag (TRIBUNAL_VERSION), never latest", svc.Image)
			continue
		}
		tags[tag] = name
	}
	if len(tags) > 1 {
		ps.add("", "services.*.image", "tribunal images use different tags %v: every container must run the same build", slices.Sorted(maps.Keys(tags)))
	}
}

func checkTribunalService(ps *problems, obj, at, name string, svc types.ServiceConfig) {
	if len(svc.Command) < 2 || svc.Command[0] != "serve" || svc.Command[1] != name {
		ps.add(obj, at+".command", "want [serve %s ...], got %q", name, []string(svc.Command))
	}
	hc := svc.HealthCheck
	switch {
	case hc == nil || len(hc.Test) == 0:
		ps.add(obj, at+".healthcheck", "missing: add one that asks /readyz")
	case hc.Disable || hc.Test[0] == "NONE":
		ps.add(obj, at+".healthcheck", "disabled")
	case hc.Test[0] != "CMD":
		ps.add(obj, at+".healthcheck.test", "%q: the image has no shell, use the exec form [\"CMD\", ...]", hc.Test[0])
	case !slices.ContainsFunc(hc.Test[1:], func(s string) bool { return strings.Contains(s, "/readyz") }):
		ps.add(obj, at+".healthcheck.test", "%q does not ask /readyz", []string(hc.Test))
	}
	if d, ok := svc.DependsOn["nats"]; !ok || d.Condition != types.ServiceConditionHealthy {
		ps.add(obj, at+".depends_on.nats", "want condition service_healthy")
	}
	store := false
	for dep, d := range svc.DependsOn {
		if strings.HasPrefix(dep, "objectstore") && (d.Condition == types.ServiceConditionHealthy || d.Condition == types.ServiceConditionCompletedSuccessfully) {
			store = true
		}
	}
	if !store {
		ps.add(obj, at+".depends_on", "wait for the object store (service_healthy, or its bucket init service_completed_successfully)")
	}
	if !svc.ReadOnly {
		ps.add(obj, at+".read_only", "want true")
	}
	if !slices.Contains(svc.CapDrop, "ALL") {
		ps.add(obj, at+".cap_drop", "want [ALL]")
	}
	for _, k := range tribunalEnv {
		if v := svc.Environment[k]; v == nil || *v == "" {
			ps.add(obj, at+".environment."+k, "not set")
		}
	}
}

// checkNATS holds the NATS service name to the policy: the embedded release, a
// healthcheck, JetStream with its store on a named volume.
func checkNATS(ps *problems, project *types.Project, name string, nats types.ServiceConfig, natsVersion string) {
	obj, at := "service "+name, "services."+name
	if msg := natsImageMismatch(nats.Image, natsVersion); msg != "" {
		ps.add(obj, at+".image", "%s", msg)
	}
	if hc := nats.HealthCheck; hc == nil || len(hc.Test) == 0 || hc.Disable || hc.Test[0] == "NONE" {
		ps.add(obj, at+".healthcheck", "missing: ask the monitoring port's /healthz")
	}
	cmd := []string(nats.Command)
	if !slices.Contains(cmd, "-js") && !slices.Contains(cmd, "--jetstream") {
		ps.add(obj, at+".command", "JetStream is not enabled (-js)")
	}
	store, _ := natsFlag(cmd, "sd", "store_dir")
	if store == "" {
		ps.add(obj, at+".command", "no JetStream store directory (-sd)")
		return
	}
	for _, v := range nats.Volumes {
		if v.Target == store {
			if _, declared := project.Volumes[v.Source]; v.Type != types.VolumeTypeVolume || !declared {
				ps.add(obj, at+".volumes", "%s is on %s %q: want a named volume", store, v.Type, v.Source)
			}
			return
		}
	}
	ps.add(obj, at+".volumes", "the JetStream store %s is not on a named volume: it is lost with the container", store)
}

// natsFlag is the value of a nats-server flag in cmd, given its names without dashes
// ("sd", "store_dir"): nats-server parses flags with Go's flag package, so each may be
// written -name or --name, its value the next argument or after "=".
func natsFlag(cmd []string, names ...string) (string, bool) {
	for i, a := range cmd {
		if !strings.HasPrefix(a, "-") {
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-"), "=")
		if !slices.Contains(names, name) {
			continue
		}
		if hasValue {
			return value, true
		}
		if i+1 < len(cmd) {
			return cmd[i+1], true
		}
	}
	return "", false
}

// natsStoreVolume is the volume holding the JetStream store of a NATS service ("" when
// its store is on none).
func natsStoreVolume(svc types.ServiceConfig) string {
	store, _ := natsFlag(svc.Command, "sd", "store_dir")
	for _, v := range svc.Volumes {
		if store != "" && v.Target == store && v.Type == types.VolumeTypeVolume {
			return v.Source
		}
	}
	return ""
}
