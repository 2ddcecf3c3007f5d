// Package natstest starts a real nats-server with JetStream for tests, listening on a
// random loopback port so tests take the same network path as against a remote server.
package natstest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/freeport"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
)

// Server is a running test server.
type Server struct {
	*server.Server
	URL string
}

// Start runs a JetStream-enabled server for the test and shuts it down at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	opts := &server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoSigs:    true,
		NoLog:     true,
	}
	ns, err := server.NewServer(opts)
	if err != nil {
		t.Fatalf("nats server: %v", err)
	}
	go ns.Start()
	if !ns.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats server not ready")
	}
	t.Cleanup(ns.Shutdown)
	return &Server{Server: ns, URL: ns.ClientURL()}
}

// Connect returns a client connection and a JetStream handle, closed at cleanup.
func (s *Server) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return Connect(t, s.URL)
}

// Connect connects to the servers at urls (comma-separated), reconnecting for ever, and
// returns the connection and a JetStream handle, closed at cleanup.
func Connect(t testing.TB, urls string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return nc, js
}

// Provisioned starts a server, connects and provisions tribunal's stream, consumers and
// buckets with cfg.
func Provisioned(t testing.TB, cfg bus.Config) (*Server, *nats.Conn, jetstream.JetStream) {
	t.Helper()
	s := Start(t)
	nc, js := s.Connect(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, cfg); err != nil {
		t.Fatalf("provision: %v", err)
	}
	return s, nc, js
}

// Buckets starts a server provisioned with cfg and opens tribunal's buckets on it, for
// tests that read and write the services' state without running them.
func Buckets(t testing.TB, cfg bus.Config) bus.Buckets {
	t.Helper()
	_, _, js := Provisioned(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.OpenBuckets(ctx, js)
	if err != nil {
		t.Fatalf("open buckets: %v", err)
	}
	return b
}

// Cluster is a JetStream cluster of real nats-servers in this process, each listening on
// loopback for clients and routes, formed through natsserver.Start (the code behind
// `tribunal serve nats --cluster-listen`).
type Cluster struct {
	Servers []*server.Server
	opts    []natsserver.Options
	// URLs are the client URLs, comma separated as nats.Connect takes them.
	URLs string
}

// StartCluster starts n servers that route to each other, waits until JetStream has a
// meta leader and every server is current, and shuts them down at cleanup. Ports are
// picked free and may be taken by another process before a server binds them; the
// cluster is then started again on other ports.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	var err error
	for range 3 {
		var c *Cluster
		if c, err = startCluster(t, n); err == nil {
			t.Cleanup(func() {
				for _, ns := range c.Servers {
					ns.Shutdown()
				}
			})
			c.WaitReady(t)
			return c
		}
	}
	t.Fatalf("nats cluster: %v", err)
	return nil
}

func startCluster(t testing.TB, n int) (*Cluster, error) {
	var routes, clients []string
	var clusterAddrs []string
	for range n {
		ca := freeport.Addr(t)
		clusterAddrs = append(clusterAddrs, ca)
		routes = append(routes, "nats://"+ca)
		clients = append(clients, freeport.Addr(t))
	}
	c := &Cluster{Servers: make([]*server.Server, n)}
	errs := make(chan error, n)
	// Every member's options are made before any starts: a goroutine reads its own while
	// the slice would otherwise still grow.
	for i := range n {
		c.opts = append(c.opts, natsserver.Options{StoreDir: t.TempDir(), Listen: clients[i],
			ServerName: fmt.Sprintf("n%d", i+1), ClusterListen: clusterAddrs[i], Routes: routes})
	}
	for i := range n {
		go func() {
			ns, err := natsserver.Start(c.opts[i])
			c.Servers[i] = ns
			errs <- err
		}()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		for _, ns := range c.Servers {
			if ns != nil {
				ns.Shutdown()
			}
		}
		return nil, fmt.Errorf("cluster member: %w", first)
	}
	c.URLs = "nats://" + strings.Join(clients, ",nats://")
	return c, nil
}

// WaitReady waits until JetStream has a meta leader and every server is current.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !c.ready() {
		if time.Now().After(deadline) {
			t.Fatal("nats cluster: no JetStream meta leader with every server current after 30s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Restart stops server i and starts it again with the same name, addresses and store,
// as an operator restarting a node does, and waits until the cluster is whole again.
func (c *Cluster) Restart(t testing.TB, i int) {
	t.Helper()
	c.Stop(i)
	c.Start(t, i)
	c.WaitReady(t)
}

// Stop shuts server i down.
func (c *Cluster) Stop(i int) {
	c.Servers[i].Shutdown()
	c.Servers[i].WaitForShutdown()
}

// Start starts the stopped server i again with its name, addresses and store. It does
// not wait for the cluster (see WaitReady).
func (c *Cluster) Start(t testing.TB, i int) {
	t.Helper()
	ns, err := natsserver.Start(c.opts[i])
	if err != nil {
		t.Fatalf("restart %s: %v", c.opts[i].ServerName, err)
	}
	c.Servers[i] = ns
}

func (c *Cluster) ready() bool {
	leader := false
	for _, ns := range c.Servers {
		if ns.JetStreamIsLeader() {
			// The meta leader must also see every other member online and caught up.
			// It may still refuse to place a replicated asset until it has had a
			// member's statistics ("no suitable peers for placement, peer offline");
			// bus.Provision asks again then, as services starting with a cluster must.
			jsz, err := ns.Jsz(&server.JSzOptions{})
			if err != nil || jsz.Meta == nil || len(jsz.Meta.Replicas) < len(c.Servers)-1 {
				return false
			}
			for _, p := range jsz.Meta.Replicas {
				if p.Offline || !p.Current {
					return false
				}
			}
			leader = true
		}
		if !ns.JetStreamIsCurrent() {
			return false
		}
	}
	return leader
}

// Connect returns a client connection knowing every member, and a JetStream handle,
// closed at cleanup.
func (c *Cluster) Connect(t testing.TB) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	return Connect(t, c.URLs)
}

// StartConfig runs a server with the nats-server configuration conf (for example the
// authorization `tribunal tenants` writes) the way `tribunal serve nats --config` starts
// it, listening on a random loopback port, and shuts it down at cleanup.
func StartConfig(t testing.TB, conf string) *server.Server {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "nats.conf")
	if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	// Generously bounded: on a loaded machine JetStream's start can wait on the disk.
	ns, err := natsserver.Start(natsserver.Options{StoreDir: filepath.Join(dir, "js"), Listen: "127.0.0.1:0", ConfigFile: file, ReadyTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}

// SubjectCount is how many messages tribunal's event stream holds on the subjects
// matching filter.
func SubjectCount(t testing.TB, js jetstream.JetStream, filter string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// SubjectMsgs reads every message tribunal's event stream holds on subject (no
// wildcards), oldest first.
func SubjectMsgs(t testing.TB, js jetstream.JetStream, subject string) []*jetstream.RawStreamMsg {
	t.Helper()
	n := SubjectCount(t, js, subject)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "TRIBUNAL")
	if err != nil {
		t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	var seq uint64 = 1
	for uint64(len(out)) < n {
		m, err := st.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(subject))
		if err != nil {
			t.Fatalf("read %s from seq %d: %v", subject, seq, err)
		}
		out = append(out, m)
		seq = m.Sequence + 1
	}
	return out
}
