package client_test

import (
	"context"
	"encoding/json"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/bus/natsserver"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestWatchRidesOutServerLoss: `tribunal watch` keeps waiting through a NATS server
// going away and coming back (a node of a cluster lost and restarted, or a single
// server restarted) instead of failing on the first read that finds no server, and
// returns the completion recorded after the server is back.
func TestWatchRidesOutServerLoss(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	opts := natsserver.Options{StoreDir: t.TempDir(), Listen: addr}
	ns, err := natsserver.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Shutdown() })
	nc, err := nats.Connect("nats://"+addr, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Reads time out within the outage below, as they do when the server that was
	// asked dies before answering.
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := bus.Provision(ctx, js, bus.Config{}); err != nil {
		t.Fatal(err)
	}
	b, err := bus.OpenBuckets(ctx, js)
	if err != nil {
		t.Fatal(err)
	}
	header := records.Batch{Tenant: "default", Batch: "b1", Size: 2}
	put := func() {
		t.Helper()
		data, _ := json.Marshal(header)
		if _, err := b.Batches.Put(ctx, records.BatchKey("default", "b1"), data); err != nil {
			t.Fatal(err)
		}
	}
	put()
	type result struct {
		c   *records.Completion
		err error
	}
	done := make(chan result, 1)
	reads := make(chan struct{}, 1000)
	// No deadline, as under `tribunal watch`: each read gets the default timeout.
	wctx, wcancel := context.WithCancel(context.Background())
	defer wcancel()
	go func() {
		c, err := client.Watch(wctx, b, "default", "b1", 20*time.Millisecond, func(client.Progress) { reads <- struct{}{} })
		done <- result{c, err}
	}()
	<-reads
	ns.Shutdown()
	ns.WaitForShutdown()
	// Long enough for reads to fail: the client finds no server.
	time.Sleep(2 * time.Second)
	select {
	case r := <-done:
		t.Fatalf("watch ended while the server was down: %v", r.err)
	default:
	}
	if ns, err = natsserver.Start(opts); err != nil {
		t.Fatal(err)
	}
	header.Completion = &records.Completion{At: time.Now().UTC(), By: "AC-2"}
	for !nc.IsConnected() {
		time.Sleep(20 * time.Millisecond)
	}
	put()
	r := <-done
	if r.err != nil || r.c == nil || r.c.By != "AC-2" {
		t.Fatalf("watch after the server came back: %+v, %v", r.c, r.err)
	}
}
