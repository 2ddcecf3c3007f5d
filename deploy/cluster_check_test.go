package deploy

import (
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"
)

// natsClusterSize is the number of NATS servers in the cluster shapes of the compose
// override and the Kubernetes component: three, the smallest cluster that keeps a
// majority when one server is lost, and the replica count the services are given.
const natsClusterSize = 3

// defaultNATSClientPort is nats-server's client port when no -p is given.
const defaultNATSClientPort = 4222

// isNATSImage reports whether image is a nats-server image.
func isNATSImage(image string) bool {
	name, _, _ := strings.Cut(image, ":")
	return name == "nats" || strings.HasSuffix(name, "/nats")
}

// natsMember is what a NATS service of a compose project says about its place in a
// cluster.
type natsMember struct {
	service, serverName, clusterName string
	clientPort, clusterPort          int
	volume                           string
	routes                           []string // host:port of each route
}

// CheckComposeCluster loads the cluster override over the base file, as
// `docker compose -f <base> -f <cluster>` does, and holds the result to CheckCompose's
// policy and to the cluster's:
//
//   - exactly natsClusterSize NATS services, each the base file's NATS image, JetStream
//     on, with a server name of its own, the same cluster name, a cluster listen address
//     and routes to every member's cluster port (its own included: every member gets the
//     same list), its store on a named volume of its own that is not the base's single
//     server's (a server that joins a cluster deletes the streams it kept alone, as
//     orphans the cluster does not know), and host ports of its own;
//   - every tribunal service gets every member's client address in TRIBUNAL_NATS_URL and
//     no other, TRIBUNAL_REPLICAS equal to the number of members, and waits for every
//     member to be healthy.
func CheckComposeCluster(base, cluster types.ConfigFile, env map[string]string, workingDir, natsVersion string) []Problem {
	ps := problems{file: cluster.Filename}
	single, err := LoadComposeFiles([]types.ConfigFile{base}, env, workingDir)
	if err != nil {
		ps.add("", "", "compose-go: %s: %v", base.Filename, err)
		return ps.list
	}
	project, err := LoadComposeFiles([]types.ConfigFile{base, cluster}, env, workingDir)
	if err != nil {
		ps.add("", "", "compose-go: %v", err)
		return ps.list
	}
	ps.list = append(ps.list, checkComposeProject(cluster.Filename, project, workingDir, natsVersion)...)
	singleNATS := single.Services["nats"]
	singleVolume := natsStoreVolume(singleNATS)

	var members []natsMember
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for n, svc := range project.Services {
			if isNATSImage(svc.Image) && !yield(n) {
				return
			}
		}
	}) {
		svc := project.Services[name]
		obj, at := "service "+name, "services."+name
		if name != "nats" {
			checkNATS(&ps, project, name, svc, natsVersion)
		}
		if svc.Image != singleNATS.Image {
			ps.add(obj, at+".image", "%q, but %s runs %q: one NATS release in the cluster", svc.Image, base.Filename, singleNATS.Image)
		}
		members = append(members, parseNATSMember(&ps, name, svc))
	}
	if len(members) != natsClusterSize {
		ps.add("", "services", "%d NATS servers, want %d", len(members), natsClusterSize)
	}

	var wantRoutes, wantClients []string
	for _, m := range members {
		wantRoutes = append(wantRoutes, net.JoinHostPort(m.service, strconv.Itoa(m.clusterPort)))
		wantClients = append(wantClients, net.JoinHostPort(m.service, strconv.Itoa(m.clientPort)))
	}
	names, volumes, hostPorts := map[string]string{}, map[string]string{}, map[string]string{}
	for _, m := range members {
		obj, at := "service "+m.service, "services."+m.service
		if other, ok := names[m.serverName]; ok && m.serverName != "" {
			ps.add(obj, at+".command", "server name %q is also %s's: JetStream knows its peers by name", m.serverName, other)
		}
		names[m.serverName] = m.service
		if m.clusterName != members[0].clusterName {
			ps.add(obj, at+".command", "cluster name %q, but %s's is %q: one cluster has one name", m.clusterName, members[0].service, members[0].clusterName)
		}
		if m.volume != "" {
			if other, ok := volumes[m.volume]; ok {
				ps.add(obj, at+".volumes", "the store's volume %q is also %s's: each server needs a store of its own", m.volume, other)
			}
			volumes[m.volume] = m.service
			if m.volume == singleVolume {
				ps.add(obj, at+".volumes", "the store is on %q, the single server's of %s: a server joining a cluster deletes the streams it kept alone; give the cluster new volumes", m.volume, base.Filename)
			}
		}
		for _, p := range project.Services[m.service].Ports {
			if other, ok := hostPorts[p.HostIP+":"+p.Published]; ok {
				ps.add(obj, at+".ports", "host port %s is also published by %s", p.Published, other)
			}
			hostPorts[p.HostIP+":"+p.Published] = m.service
		}
		for _, r := range wantRoutes {
			if !slices.Contains(m.routes, r) {
				ps.add(obj, at+".command", "--routes lacks %s: every member routes to all %d", r, len(members))
			}
		}
		for _, r := range m.routes {
			if !slices.Contains(wantRoutes, r) {
				ps.add(obj, at+".command", "route %s is no member's cluster address (members: %s)", r, strings.Join(wantRoutes, ", "))
			}
		}
	}

	replicas := strconv.Itoa(len(members))
	for _, name := range tribunalServeSvc {
		svc, ok := project.Services[name]
		if !ok {
			continue
		}
		obj, at := "service "+name, "services."+name
		var got []string
		if v := svc.Environment["TRIBUNAL_NATS_URL"]; v != nil {
			for _, u := range strings.Split(*v, ",") {
				pu, err := url.Parse(strings.TrimSpace(u))
				if err != nil || pu.Scheme != "nats" {
					ps.add(obj, at+".environment.TRIBUNAL_NATS_URL", "%q: want nats://host:port", u)
					continue
				}
				got = append(got, pu.Host)
			}
		}
		for _, c := range wantClients {
			if !slices.Contains(got, c) {
				ps.add(obj, at+".environment.TRIBUNAL_NATS_URL", "lacks nats://%s: a client given fewer than every server loses NATS with that one", c)
			}
		}
		for _, c := range got {
			if !slices.Contains(wantClients, c) {
				ps.add(obj, at+".environment.TRIBUNAL_NATS_URL", "%s is no member's client address", c)
			}
		}
		if v := svc.Environment["TRIBUNAL_REPLICAS"]; v == nil || *v != replicas {
			ps.add(obj, at+".environment.TRIBUNAL_REPLICAS", "want %q: the stream, consumers and buckets on every server", replicas)
		}
		for _, m := range members {
			if d, ok := svc.DependsOn[m.service]; !ok || d.Condition != types.ServiceConditionHealthy {
				ps.add(obj, at+".depends_on."+m.service, "want condition service_healthy: three replicas need every server")
			}
		}
	}
	return ps.list
}

// parseNATSMember reads a NATS service's cluster flags, adding a problem for each that
// is missing or malformed.
func parseNATSMember(ps *problems, name string, svc types.ServiceConfig) natsMember {
	obj, at := "service "+name, "services."+name+".command"
	cmd := []string(svc.Command)
	m := natsMember{service: name, clientPort: defaultNATSClientPort, volume: natsStoreVolume(svc)}
	if p, ok := natsFlag(cmd, "p", "port"); ok {
		n, err := strconv.Atoi(p)
		if err != nil {
			ps.add(obj, at, "client port %q is not a number", p)
		}
		m.clientPort = n
	}
	var ok bool
	if m.serverName, ok = natsFlag(cmd, "n", "name", "server_name"); !ok || m.serverName == "" {
		ps.add(obj, at, "no --server_name: every member needs its own, kept across restarts")
	}
	if m.clusterName, ok = natsFlag(cmd, "cluster_name"); !ok || m.clusterName == "" {
		ps.add(obj, at, "no --cluster_name: without one each server makes one up")
	}
	listen, ok := natsFlag(cmd, "cluster", "cluster_listen")
	u, err := url.Parse(listen)
	if !ok || err != nil || u.Port() == "" {
		ps.add(obj, at, "--cluster %q: want the routes' listen address, nats://0.0.0.0:6222", listen)
	} else {
		m.clusterPort, _ = strconv.Atoi(u.Port())
	}
	routes, ok := natsFlag(cmd, "routes")
	if !ok {
		ps.add(obj, at, "no --routes to the other members")
	}
	for r := range strings.SplitSeq(routes, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats" || u.Port() == "" {
			ps.add(obj, at, "route %q: want nats://<service>:<cluster port>", r)
			continue
		}
		m.routes = append(m.routes, u.Host)
	}
	return m
}

// clusterServerNames maps each NATS service of a project to its server name, as stream
// info names a leader.
func clusterServerNames(project *types.Project) map[string]string {
	out := map[string]string{}
	for name, svc := range project.Services {
		if !isNATSImage(svc.Image) {
			continue
		}
		if n, ok := natsFlag(svc.Command, "n", "name", "server_name"); ok {
			out[n] = name
		}
	}
	return out
}
