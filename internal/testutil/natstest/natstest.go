// Package natstest starts a real nats-server with JetStream for tests, listening on a
// random loopback port so tests take the same network path as against a remote server.
package natstest

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
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
	nc, err := nats.Connect(s.URL, nats.MaxReconnects(-1))
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
	ns, err := bus.StartEmbedded(bus.EmbeddedOptions{StoreDir: filepath.Join(dir, "js"), Listen: "127.0.0.1:0", ConfigFile: file, ReadyTimeout: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	return ns
}
