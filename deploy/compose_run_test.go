package deploy

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tribunal-dev/tribunal/internal/testutil/s3server"
)

// composeRun runs the services of a compose project as processes on this machine, for
// when no Docker engine is available: each service's own command and environment, as
// compose-go resolved them, with the program its image runs. The images map to:
//
//   - ghcr.io/tribunal-dev/tribunal*: the tribunal binary built from this repository,
//     with the service's command as arguments (the images' entrypoint is the binary);
//   - nats:*: `tribunal serve nats` (the same nats-server release, embedded), its
//     nats-server flags translated: -sd to --store, the client port to --listen, -m to a
//     monitoring listener, so the compose healthcheck's /healthz answers, -c's
//     configuration file (the authorization) into its --config, and a cluster member's
//     --server_name, --cluster_name, --cluster and --routes to their `serve nats` flags;
//   - versity/versitygw:*: the versitygw program with the service's command as
//     arguments (the image's entrypoint runs it with them) and its environment;
//   - the aws-cli bucket init: the same S3 calls (head-bucket, else create-bucket) with
//     its AWS_* environment.
//
// Container networking is mapped, not emulated: every "<service>:<port>" in a command
// or environment value, and a service's own ":<port>", "0.0.0.0:<port>" or
// "127.0.0.1:<port>", becomes 127.0.0.1 and a free port of this machine, one per
// service and container port. Volume, tmpfs and config targets become folders and files
// of the test (a config's inline content or its file's). Services start in depends_on order, each waiting for its dependencies'
// conditions, as compose does: every dependency is started first, then each condition is
// waited for (three NATS cluster members are healthy only together). service_healthy
// polls the URL in the dependency's healthcheck, and service_completed_successfully waits
// for the one-shot to finish.
type composeRun struct {
	t        *testing.T
	project  *types.Project
	tribunal string // the tribunal binary
	dir      string

	mu    sync.Mutex
	ports map[string]string // "service:port" -> "127.0.0.1:hostport"
	procs []*composeProc
	done  map[string]bool
}

type composeProc struct {
	name string
	cmd  *exec.Cmd
	log  *bytes.Buffer
	mu   *sync.Mutex
}

func (p *composeProc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

func newComposeRun(t *testing.T, project *types.Project, tribunal string) *composeRun {
	r := &composeRun{t: t, project: project, tribunal: tribunal, dir: t.TempDir(), ports: map[string]string{}, done: map[string]bool{}}
	t.Cleanup(r.stop)
	return r
}

// addr is the host address standing for port of service.
func (r *composeRun) addr(service string, port int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	key := fmt.Sprintf("%s:%d", service, port)
	if a, ok := r.ports[key]; ok {
		return a
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		r.t.Fatal(err)
	}
	a := l.Addr().String()
	l.Close()
	r.ports[key] = a
	return a
}

var (
	servicePort = regexp.MustCompile(`\b([a-z][a-z0-9_-]*):([0-9]{2,5})\b`)
	ownPort     = regexp.MustCompile(`^(?:0\.0\.0\.0|127\.0\.0\.1|localhost)?:([0-9]{2,5})$`)
	ownURLPort  = regexp.MustCompile(`(?:127\.0\.0\.1|localhost|0\.0\.0\.0):([0-9]{2,5})\b`)
)

// mapValue rewrites one command argument or environment value of service: addresses of
// services and the service's own listen address, and paths under its volumes and configs.
func (r *composeRun) mapValue(service, v string) string {
	if m := ownPort.FindStringSubmatch(v); m != nil {
		p, _ := strconv.Atoi(m[1])
		return r.addr(service, p)
	}
	v = servicePort.ReplaceAllStringFunc(v, func(s string) string {
		m := servicePort.FindStringSubmatch(s)
		if _, ok := r.project.Services[m[1]]; !ok {
			return s
		}
		p, _ := strconv.Atoi(m[2])
		return r.addr(m[1], p)
	})
	for target, local := range r.paths(service) {
		if v == target || strings.HasPrefix(v, target+"/") {
			return local + strings.TrimPrefix(v, target)
		}
	}
	return v
}

// paths maps service's volume, tmpfs and config targets to local folders and files.
func (r *composeRun) paths(service string) map[string]string {
	svc := r.project.Services[service]
	out := map[string]string{}
	local := func(target string) string {
		p := filepath.Join(r.dir, service, strings.ReplaceAll(strings.Trim(target, "/"), "/", "_"))
		return p
	}
	for _, v := range svc.Volumes {
		out[v.Target] = local(v.Target)
	}
	for _, tm := range svc.Tmpfs {
		out[tm] = local(tm)
	}
	for _, c := range svc.Configs {
		out[c.Target] = local(c.Target)
	}
	return out
}

// env is service's environment, mapped, with what the image's own ENV and a container's
// private HOME and TMPDIR provide.
func (r *composeRun) env(service string) []string {
	svc := r.project.Services[service]
	home := filepath.Join(r.dir, service, "home")
	tmp := filepath.Join(r.dir, service, "tmp")
	for _, d := range []string{home, tmp} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			r.t.Fatal(err)
		}
	}
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + tmp,
		"XDG_CONFIG_HOME=" + filepath.Join(tmp, ".config"), "XDG_CACHE_HOME=" + filepath.Join(tmp, ".cache")}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range svc.Environment {
			if !yield(k) {
				return
			}
		}
	}) {
		if v := svc.Environment[k]; v != nil {
			env = append(env, k+"="+r.mapValue(service, *v))
		}
	}
	return env
}

// prepare creates the service's volume folders and writes its configs.
func (r *composeRun) prepare(service string) {
	svc := r.project.Services[service]
	paths := r.paths(service)
	for _, v := range svc.Volumes {
		if err := os.MkdirAll(paths[v.Target], 0o750); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, tm := range svc.Tmpfs {
		if err := os.MkdirAll(paths[tm], 0o750); err != nil {
			r.t.Fatal(err)
		}
	}
	for _, c := range svc.Configs {
		cfg, ok := r.project.Configs[c.Source]
		content := []byte(cfg.Content)
		if ok && cfg.Content == "" && cfg.File != "" {
			var err error
			if content, err = os.ReadFile(cfg.File); err != nil {
				r.t.Fatalf("service %s: config %s: %v", service, c.Source, err)
			}
		}
		if !ok || len(content) == 0 {
			r.t.Fatalf("service %s: config %s has neither inline content nor a file", service, c.Source)
		}
		if err := os.WriteFile(paths[c.Target], content, 0o600); err != nil {
			r.t.Fatal(err)
		}
	}
}

// program is the process that runs service's image with its command.
func (r *composeRun) program(service string) (path string, args []string, oneShot func()) {
	svc := r.project.Services[service]
	var cmd []string
	for _, a := range svc.Command {
		cmd = append(cmd, r.mapValue(service, a))
	}
	image := svc.Image
	switch {
	case strings.HasPrefix(image, tribunalImagePrefix):
		return r.tribunal, cmd, nil
	case strings.HasPrefix(image, "nats:"):
		return r.tribunal, r.natsArgs(service, svc.Command), nil
	case strings.HasPrefix(image, "versity/versitygw:"):
		bin := s3server.Binary()
		if bin == "" {
			r.t.Skip(s3server.SkipMessage)
		}
		// A filesystem without user xattrs needs the posix backend's sidecar folder.
		if i := slices.Index(cmd, "posix"); i >= 0 && s3server.NeedsSidecar(r.dir) {
			meta := filepath.Join(r.dir, service, "meta")
			if err := os.MkdirAll(meta, 0o750); err != nil {
				r.t.Fatal(err)
			}
			cmd = slices.Insert(cmd, i+1, "--sidecar", meta)
		}
		return bin, cmd, nil
	case strings.Contains(image, "aws-cli"):
		return "", nil, func() { r.createBucket(service) }
	}
	r.t.Fatalf("service %s: no local program for image %q", service, image)
	return "", nil, nil
}

// natsArgs translates the nats-server flags of the compose file for `tribunal serve
// nats`, which embeds the same server.
func (r *composeRun) natsArgs(service string, flags []string) []string {
	var conf strings.Builder
	args := []string{"serve", "nats", "--listen", r.addr(service, 4222)}
	for i := 0; i < len(flags); i++ {
		switch f := flags[i]; f {
		case "-js", "--jetstream":
		case "-sd", "--store_dir":
			i++
			args = append(args, "--store", r.mapValue(service, flags[i]))
		case "-m", "--http_port":
			i++
			p, _ := strconv.Atoi(flags[i])
			fmt.Fprintf(&conf, "http: %q\n", r.addr(service, p))
		case "--server_name", "-n":
			i++
			args = append(args, "--server-name", flags[i])
		case "--cluster_name":
			i++
			args = append(args, "--cluster-name", flags[i])
		case "--cluster":
			// nats://0.0.0.0:6222: the service's own cluster port.
			i++
			u, err := url.Parse(flags[i])
			p, perr := strconv.Atoi(u.Port())
			if err != nil || perr != nil {
				r.t.Fatalf("service %s: --cluster %q: want nats://host:port", service, flags[i])
			}
			args = append(args, "--cluster-listen", r.addr(service, p))
		case "--routes":
			i++
			args = append(args, "--routes", r.mapValue(service, flags[i]))
		case "-c", "--config":
			// The configuration file (a config's target, prepared), merged into the one
			// `serve nats --config` reads; its variables come from the service's
			// environment, as the server's do.
			i++
			data, err := os.ReadFile(r.mapValue(service, flags[i]))
			if err != nil {
				r.t.Fatalf("service %s: -c %s: %v", service, flags[i], err)
			}
			conf.Write(data)
			conf.WriteString("\n")
		default:
			r.t.Fatalf("service %s: nats-server flag %q has no translation", service, f)
		}
	}
	if conf.Len() > 0 {
		file := filepath.Join(r.dir, service, "nats.conf")
		if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
			r.t.Fatal(err)
		}
		args = append(args, "--config", file)
	}
	return args
}

// createBucket does what the bucket init's script does through the S3 API: the bucket
// exists afterwards, whether or not it did before.
func (r *composeRun) createBucket(service string) {
	env := map[string]string{}
	for _, kv := range r.env(service) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	endpoint := strings.TrimPrefix(env["AWS_ENDPOINT_URL"], "http://")
	c, err := minio.New(endpoint, &minio.Options{Creds: credentials.NewStaticV4(env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], ""),
		Region: env["AWS_DEFAULT_REGION"]})
	if err != nil {
		r.t.Fatalf("service %s: %v", service, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if ok, err := c.BucketExists(ctx, env["BUCKET"]); err == nil && ok {
		return
	}
	if err := c.MakeBucket(ctx, env["BUCKET"], minio.MakeBucketOptions{Region: env["AWS_DEFAULT_REGION"]}); err != nil {
		r.t.Fatalf("service %s: create bucket %s: %v", service, env["BUCKET"], err)
	}
}

// healthURL is the URL service's healthcheck asks, mapped ("" when it has none).
func (r *composeRun) healthURL(service string) string {
	hc := r.project.Services[service].HealthCheck
	if hc == nil {
		return ""
	}
	for _, a := range hc.Test {
		if strings.HasPrefix(a, "http://") {
			// A healthcheck runs inside the container: its loopback is the service.
			return ownURLPort.ReplaceAllStringFunc(a, func(s string) string {
				p, _ := strconv.Atoi(ownURLPort.FindStringSubmatch(s)[1])
				return r.addr(service, p)
			})
		}
	}
	return ""
}

// up starts every service, in dependency order, or only those named and what they
// depend on.
func (r *composeRun) up(only ...string) {
	started := map[string]bool{}
	var start func(name string, stack []string)
	start = func(name string, stack []string) {
		if started[name] {
			return
		}
		if slices.Contains(stack, name) {
			r.t.Fatalf("depends_on cycle: %v", append(stack, name))
		}
		svc, ok := r.project.Services[name]
		if !ok {
			r.t.Fatalf("no service %s", name)
		}
		deps := slices.Sorted(func(yield func(string) bool) {
			for d := range svc.DependsOn {
				if !yield(d) {
					return
				}
			}
		})
		for _, dep := range deps {
			start(dep, append(stack, name))
		}
		for _, dep := range deps {
			switch cond := svc.DependsOn[dep].Condition; cond {
			case types.ServiceConditionHealthy:
				r.waitHealthy(dep)
			case types.ServiceConditionCompletedSuccessfully:
				if !r.done[dep] {
					r.t.Fatalf("%s depends on %s completing, which did not", name, dep)
				}
			}
		}
		started[name] = true
		r.prepare(name)
		r.launch(name)
	}
	names := only
	if len(names) == 0 {
		names = slices.Sorted(func(yield func(string) bool) {
			for n := range r.project.Services {
				if !yield(n) {
					return
				}
			}
		})
	}
	for _, n := range names {
		start(n, nil)
	}
	for _, n := range names {
		if r.healthURL(n) != "" {
			r.waitHealthy(n)
		}
	}
}

// launch starts service's program (or runs its one-shot to the end), with its
// folders prepared.
func (r *composeRun) launch(name string) {
	path, args, oneShot := r.program(name)
	if oneShot != nil {
		oneShot()
		r.done[name] = true
		return
	}
	cmd := exec.Command(path, args...)
	cmd.Env = r.env(name)
	cmd.Dir = filepath.Join(r.dir, name)
	p := &composeProc{name: name, cmd: cmd, log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	cmd.Stdout = lockedWriter{p.mu, p.log}
	cmd.Stderr = lockedWriter{p.mu, p.log}
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("service %s: start %s: %v", name, path, err)
	}
	r.procs = append(r.procs, p)
}

// kill ends service's running process with SIGKILL, as a crash or `docker kill` does:
// nothing is flushed or handed back.
func (r *composeRun) kill(service string) {
	for _, p := range r.procs {
		if p.name == service && p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
			return
		}
	}
	r.t.Fatalf("service %s has no running process to kill", service)
}

// restart starts service again with the same command, environment, ports and
// volumes, as compose's restart policy does after a crash, and waits for its healthcheck.
func (r *composeRun) restart(service string) {
	r.launch(service)
	if r.healthURL(service) != "" {
		r.waitHealthy(service)
	}
}

// waitHealthy polls service's healthcheck URL until it answers 2xx.
func (r *composeRun) waitHealthy(service string) {
	url := r.healthURL(service)
	if url == "" {
		r.t.Fatalf("service %s has no HTTP healthcheck to wait for", service)
	}
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode/100 == 2 {
				return
			}
		}
		if p := r.latest(service); p != nil && p.cmd.ProcessState != nil {
			r.t.Fatalf("service %s exited:\n%s", service, p.output())
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.t.Fatalf("service %s not healthy at %s after 90s\n%s", service, url, r.logs())
}

// latest is service's most recently started process (nil if none was).
func (r *composeRun) latest(service string) *composeProc {
	for i := len(r.procs) - 1; i >= 0; i-- {
		if r.procs[i].name == service {
			return r.procs[i]
		}
	}
	return nil
}

// logs is every process's output, for a failure message.
func (r *composeRun) logs() string {
	var b strings.Builder
	for _, p := range r.procs {
		out := p.output()
		if len(out) > 4000 {
			out = "..." + out[len(out)-4000:]
		}
		fmt.Fprintf(&b, "--- %s\n%s\n", p.name, out)
	}
	return b.String()
}

// stop sends every process SIGTERM, as `docker compose down` does, and waits for it.
func (r *composeRun) stop() {
	for i := len(r.procs) - 1; i >= 0; i-- {
		p := r.procs[i]
		if p.cmd.ProcessState != nil {
			continue // killed and reaped already
		}
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(45 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
			r.t.Errorf("service %s did not stop on SIGTERM within its grace period", p.name)
		}
	}
}
