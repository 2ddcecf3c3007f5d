package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/pkg/audit"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// serveConsole runs the web console against running services until ctx ends. The
// console reads the services' key-value state, so it connects like the client commands
// but needs the services' NATS user; teams are kept apart by the console's own tokens
// (tokensFile: {"<token>": "<tenant>"}, "*" for a token that sees every tenant).
//
// Without a tokens file the console is open and shows every tenant. That is meant for a
// single team on one machine, so it is refused on anything but a loopback address.
//
// Like the services it serves /healthz, /readyz and /metrics on health. It starts
// before the services have created their buckets (a deployment starts everything at
// once): pages and /readyz answer 503 until the buckets exist.
func serveConsole(ctx context.Context, conn *connFlags, addr, tokensFile, health string) error {
	teamTokens, err := tokens.Load(tokensFile)
	if err != nil {
		return exitError{2, err}
	}
	if len(teamTokens) == 0 && !loopbackAddr(addr) {
		return exitError{2, fmt.Errorf("console on %s without a tokens file would show every team's batches to anyone who reaches it: give a tokens file ({\"<token>\": \"<tenant>\"}) or listen on 127.0.0.1", addr)}
	}
	env, err := connectClient(ctx, conn)
	if err != nil {
		return err
	}
	defer env.close()
	var page console.Starting
	ready := func() error { return bucketsReady(page.Ready()) }
	haddr, stopHealth, err := serveHealth(health, ready)
	if err != nil {
		return err
	}
	defer stopHealth()
	bound, wait, err := startConsoleHandler(ctx, addr, &page)
	if err != nil {
		return err
	}
	slog.Info("console serving", "url", "http://"+bound, "health", haddr, "tokens", len(teamTokens), "open", len(teamTokens) == 0)
	b, err := console.WaitForBuckets(ctx, env.js, time.Second, slog.Default())
	if err == nil {
		page.Start(console.Config{Buckets: b, Store: env.store, Pub: env.pub, Tenants: teamTokens, Logger: slog.Default(),
			Audit: auditHook(env.js, b, env.store, conn.stream), Report: reportHook(env.js, b, conn.stream)})
		slog.Info("console ready")
	}
	<-ctx.Done()
	wait()
	return nil
}

// startConsole serves the console on addr until ctx ends. It returns the bound address
// (addr may name port 0) and a wait func that returns once the server has shut down,
// so the caller can keep NATS and the blob store open until the last request is done.
// The all-in-one mode calls it with its embedded buckets, store and publisher.
func startConsole(ctx context.Context, addr string, cfg console.Config) (string, func(), error) {
	return startConsoleHandler(ctx, addr, console.New(cfg))
}

// startConsoleHandler serves h as the console (startConsole).
func startConsoleHandler(ctx context.Context, addr string, h http.Handler) (string, func(), error) {
	return startHTTP(ctx, "console", addr, h, 30*time.Second)
}

// startHTTP serves h on addr until ctx ends, reading a whole request within readTimeout;
// what names the server in errors and logs. It returns the bound address and a wait func
// that returns once the server has shut down.
func startHTTP(ctx context.Context, what, addr string, h http.Handler, readTimeout time.Duration) (string, func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("%s %s: %w", what, addr, err)
	}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       readTimeout,
		WriteTimeout:      2 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error(what+" stopped", "addr", addr, "err", err)
		}
	}()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		select {
		case <-ctx.Done():
		case <-done:
			return
		}
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}()
	return ln.Addr().String(), func() { <-stopped }, nil
}

// loopbackAddr reports whether a listen address only accepts local connections.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// auditHook lets the console show a batch's audit: replay the stream, re-derive, and
// check the aggregator's state.
func auditHook(js jetstream.JetStream, b bus.Buckets, store blob.Store, stream string) func(context.Context, string, string) (any, error) {
	return func(ctx context.Context, tenant, batch string) (any, error) {
		rep, err := audit.Run(ctx, js, audit.Filter{Tenant: tenant, BatchID: batch, Stream: stream}, store)
		if err != nil {
			return nil, err
		}
		checkAuditState(ctx, b, nil, &rep)
		return &rep, nil
	}
}
