// Command healthcheck asks a tribunal process's health endpoint whether it is ready, for
// container runtimes whose health checks execute a program inside the container
// (docker compose's healthcheck, Docker's HEALTHCHECK). tribunal's images carry no shell
// and no curl or wget, so they ship this static probe next to the tribunal binary.
// Kubernetes does not need it: its probes are httpGet.
//
// Usage:
//
//	healthcheck [-timeout 3s] [URL | /path]
//
// With no argument it asks http://127.0.0.1:<port>/readyz, the port taken from
// TRIBUNAL_HEALTH_ADDR (default :8080, the same default as `tribunal serve --health`). An
// argument starting with "/" replaces the path; any other argument is the whole URL. The
// exit status is 0 for a 2xx answer and 1 for anything else, with the reason on stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"
)

// defaultHealthAddr is `tribunal serve --health`'s default.
const defaultHealthAddr = ":8080"

func main() {
	os.Exit(run(os.Args[1:], os.Getenv, os.Stderr))
}

// run probes the target named by args and the environment and returns the exit status.
func run(args []string, getenv func(string) string, stderr io.Writer) int {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 3*time.Second, "give up after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 1 {
		fmt.Fprintln(stderr, "healthcheck: at most one URL or path")
		return 2
	}
	target, err := targetURL(fs.Arg(0), getenv("TRIBUNAL_HEALTH_ADDR"))
	if err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 2
	}
	if err := probe(target, *timeout); err != nil {
		fmt.Fprintln(stderr, "healthcheck:", err)
		return 1
	}
	return 0
}

// targetURL builds the URL to ask from the command-line argument (empty, a path or a
// URL) and the health listen address.
func targetURL(arg, healthAddr string) (string, error) {
	if arg != "" && !strings.HasPrefix(arg, "/") {
		if !strings.HasPrefix(arg, "http://") && !strings.HasPrefix(arg, "https://") {
			return "", fmt.Errorf("%q: want an http(s) URL or a path starting with /", arg)
		}
		return arg, nil
	}
	path := arg
	if path == "" {
		path = "/readyz"
	}
	if healthAddr == "" {
		healthAddr = defaultHealthAddr
	}
	host, port, err := net.SplitHostPort(healthAddr)
	if err != nil {
		return "", fmt.Errorf("TRIBUNAL_HEALTH_ADDR %q: %v", healthAddr, err)
	}
	// A wildcard listen address is reached on loopback from inside the container.
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}

// probe GETs target and fails unless the answer is 2xx.
func probe(target string, timeout time.Duration) error {
	// No proxy: the endpoint is local, whatever HTTP(S)_PROXY the judges need.
	client := &http.Client{Timeout: timeout, Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Get(target)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		msg := strings.TrimSpace(string(body))
		if msg == "" {
			return errors.New(target + ": " + resp.Status)
		}
		return fmt.Errorf("%s: %s: %s", target, resp.Status, msg)
	}
	return nil
}
