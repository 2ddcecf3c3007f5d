// Package freeport finds loopback addresses for tests that start servers or processes
// which must be told their address before they listen.
package freeport

import (
	"net"
	"testing"
)

// Addr is a loopback address ("127.0.0.1:port") whose port is free at the time of the
// call. Another process may take it before the caller listens; tests that can let the
// server pick its own port (":0") should.
func Addr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
