package deploy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/types"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/tenants"
)

// clusterComposeFiles are the files of the cluster shape, in the order compose merges them.
func clusterComposeFiles(t *testing.T) []types.ConfigFile {
	return []types.ConfigFile{
		{Filename: "docker-compose.yml", Content: read(t, "docker-compose.yml")},
		{Filename: "docker-compose.cluster.yml", Content: read(t, "docker-compose.cluster.yml")},
	}
}

// TestComposeClusterEndToEnd runs docker-compose.yml with docker-compose.cluster.yml
// over it, as `docker compose -f docker-compose.yml -f docker-compose.cluster.yml up`
// would, as processes (composeRun): three `tribunal serve nats`, the nats-server release
// the images run, stand in for the three NATS containers and form one JetStream cluster
// through the routes the override names; the services get its three URLs and
// TRIBUNAL_REPLICAS=3. The services keep the event stream, its consumers and their four
// state buckets on all three servers. A batch submitted from the host (given the three
// published ports) loses the server leading the event stream to SIGKILL right after it
// is submitted, and finishes with every AC exactly once; the server, restarted with its
// store, catches up, and the batch audits clean.
func TestComposeClusterEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tribunal and runs the compose cluster stack")
	}
	bin, remove, err := tribunalbin.Build("../cmd/tribunal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	env := stackEnv(t)
	project, err := LoadComposeFiles(clusterComposeFiles(t), env, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	stack := newComposeRun(t, project, bin)
	stack.up()

	servers := clusterServerNames(project) // server name -> compose service
	if len(servers) != natsClusterSize {
		t.Fatalf("server names %v, want %d", servers, natsClusterSize)
	}
	var urls []string
	for _, svc := range slices.Sorted(maps.Values(servers)) {
		urls = append(urls, "nats://"+stack.addr(svc, defaultNATSClientPort))
	}
	natsURL := strings.Join(urls, ",")
	blob := fmt.Sprintf("s3://%s?endpoint=%s&secure=false&path_style=true&region=us-east-1", env["TRIBUNAL_BUCKET"], stack.addr("objectstore", 9000))
	host := func(args ...string) (string, int, string) {
		t.Helper()
		return runOnHost(t, bin, append(operatorEnv(env), "TRIBUNAL_S3_ACCESS_KEY="+env["TRIBUNAL_S3_ACCESS_KEY"], "TRIBUNAL_S3_SECRET_KEY="+env["TRIBUNAL_S3_SECRET_KEY"]),
			append(args, "--nats", natsURL, "--blob", blob)...)
	}

	// The test reads the cluster's state as the operator, the only user that may.
	nc, err := nats.Connect(natsURL, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.UserInfo(tenants.OperatorUser, env[tenants.PasswordEnv(tenants.OperatorUser)]), nats.CustomInboxPrefix(tenants.InboxPrefix(tenants.OperatorUser)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// info polls stream info until the cluster answers it (an election in progress
	// leaves requests unanswered) and cond holds.
	info := func(stream string, cond func(*jetstream.StreamInfo) bool) *jetstream.StreamInfo {
		t.Helper()
		var last *jetstream.StreamInfo
		var lastErr error
		for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			s, err := js.Stream(ctx, stream)
			if err == nil {
				last, lastErr = s.CachedInfo(), nil
				if cond(last) {
					cancel()
					return last
				}
			} else {
				lastErr = err
			}
			cancel()
		}
		b, _ := json.Marshal(last)
		t.Fatalf("stream %s: %v; last info %s\n%s", stream, lastErr, b, stack.logs())
		return nil
	}
	replicated := func(si *jetstream.StreamInfo) bool {
		return si.Config.Replicas == natsClusterSize && si.Cluster != nil && si.Cluster.Leader != "" && len(si.Cluster.Replicas) == natsClusterSize-1
	}

	// The services provisioned everything with three replicas, consumers included.
	for _, stream := range []string{"TRIBUNAL", "KV_" + bus.BucketJobs, "KV_" + bus.BucketBatches, "KV_" + bus.BucketCache, "KV_" + bus.BucketViews} {
		info(stream, replicated)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stream, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	consumers := stream.ListConsumers(ctx)
	n := 0
	for ci := range consumers.Info() {
		n++
		if ci.Cluster == nil || len(ci.Cluster.Replicas) != natsClusterSize-1 {
			t.Errorf("consumer %s: cluster %+v, want %d replicas", ci.Name, ci.Cluster, natsClusterSize)
		}
	}
	if err := consumers.Err(); err != nil || n < len(bus.Services) {
		t.Fatalf("consumers of TRIBUNAL: %d, err %v; want the %d services' durables", n, err, len(bus.Services))
	}

	// Submit, then kill the server leading the event stream: the batch is in flight.
	out, code, errs := host("submit", "examples/quickstart")
	if code != 0 {
		t.Fatalf("submit: exit %d\n%s%s\n%s", code, out, errs, stack.logs())
	}
	id := strings.TrimSpace(out)
	leader := info("TRIBUNAL", replicated).Cluster.Leader
	killed, ok := servers[leader]
	if !ok {
		t.Fatalf("stream leader %q is none of the servers %v", leader, servers)
	}
	stack.kill(killed)
	t.Logf("killed %s (server %s, the stream's leader) after submitting %s", killed, leader, id)

	out, code, errs = host("watch", "--batch", id, "--quiet")
	if code != 1 || !strings.Contains(out, "8 ACs, 6 compared, 2 blocked") {
		t.Fatalf("watch %s with %s down: exit %d, want 1 and 8 ACs, 6 compared, 2 blocked\n%s%s\n%s", id, killed, code, out, errs, stack.logs())
	}
	out, _, errs = host("results", "--batch", id, "--json", "--out", t.TempDir())
	var res struct {
		Results []struct {
			ACID string `json:"ac_id"`
		} `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("results: %v\n%s\nstderr: %s", err, out, errs)
	}
	seen := map[string]int{}
	for _, r := range res.Results {
		seen[r.ACID]++
	}
	if len(res.Results) != 8 || len(seen) != 8 {
		t.Errorf("results: %d rows for %d ACs %v, want 8 ACs once each", len(res.Results), len(seen), seen)
	}

	// The server comes back with its store, catches up and is a current replica again.
	stack.restart(killed)
	info("TRIBUNAL", func(si *jetstream.StreamInfo) bool {
		if !replicated(si) {
			return false
		}
		back := si.Cluster.Leader == leader
		for _, p := range si.Cluster.Replicas {
			if !p.Current || p.Offline {
				return false
			}
			back = back || p.Name == leader
		}
		return back
	})
	if out, code, errs := host("audit", "--batch", id); code != 0 {
		t.Errorf("audit %s: exit %d\n%s%s", id, code, out, errs)
	}
}
