package deploy

import (
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"
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
