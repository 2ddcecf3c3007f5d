// Package s3server gives tests a real S3-compatible server. Fakes of S3 agree with the
// driver author's reading of the protocol, which is exactly what an integration test
// must not assume; versitygw over a temporary directory is small enough to start per
// test binary and strict enough to catch signing, metadata and error-code mistakes.
//
// Start uses, in order: an external server named by TRIBUNAL_TEST_S3_ENDPOINT (with
// TRIBUNAL_TEST_S3_ACCESS_KEY, TRIBUNAL_TEST_S3_SECRET_KEY and optionally
// TRIBUNAL_TEST_S3_REGION and TRIBUNAL_TEST_S3_SECURE); a versitygw binary on PATH or
// in $(go env GOPATH)/bin; or it skips the test.
package s3server

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// SkipMessage is why Start skips when no server is available.
const SkipMessage = "versitygw not installed: .ci/run installs it with `go install github.com/versity/versitygw/cmd/versitygw@v1.8.0`"

const (
	startTimeout = 30 * time.Second
	stopTimeout  = 10 * time.Second
	healthPath   = "/health"
)

// Server is a running S3-compatible endpoint.
type Server struct {
	// Endpoint is "host:port", as minio-go wants it.
	Endpoint string
	// AccessKey and SecretKey are the root credentials; random per local server, so
	// a test cannot pass by accident with some default pair.
	AccessKey string
	SecretKey string
	// Region is the region the server expects in signatures.
	Region string
	// Secure means the endpoint speaks TLS.
	Secure bool

	tb       testing.TB
	external bool
	bin      string
	dataDir  string
	metaDir  string // non-empty when the filesystem lacks user xattrs
	logPath  string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited
	args []string
}

// Start returns a server for tb, stopped by tb.Cleanup, or skips tb when there is none.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if ep := os.Getenv("TRIBUNAL_TEST_S3_ENDPOINT"); ep != "" {
		return external(tb, ep)
	}
	bin := findBinary()
	if bin == "" {
		tb.Skip(SkipMessage)
	}
	dir := tb.TempDir()
	s := &Server{
		AccessKey: "tribunal" + randHex(6),
		SecretKey: randHex(20),
		Region:    "us-east-1",
		tb:        tb,
		bin:       bin,
		dataDir:   filepath.Join(dir, "data"),
		logPath:   filepath.Join(dir, "versitygw.log"),
	}
	if err := os.Mkdir(s.dataDir, 0o750); err != nil {
		tb.Fatalf("s3server: %v", err)
	}
	if !xattrSupported(s.dataDir) {
		// The posix backend keeps object metadata in user xattrs; tmpfs and some
		// container filesystems refuse them, so fall back to a sidecar directory.
		s.metaDir = filepath.Join(dir, "meta")
		if err := os.Mkdir(s.metaDir, 0o750); err != nil {
			tb.Fatalf("s3server: %v", err)
		}
	}

	// Picking a free port and then binding it in another process races with other
	// tests doing the same, so retry a few times with fresh ports.
	var err error
	for range 3 {
		var port int
		port, err = freePort()
		if err != nil {
			break
		}
		s.Endpoint = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		s.args = s.buildArgs()
		if err = s.start(); err == nil {
			break
		}
	}
	if err != nil {
		tb.Fatalf("s3server: start versitygw: %v", err)
	}
	tb.Logf("s3server: versitygw listening on %s (data %s)", s.Endpoint, s.dataDir)
	tb.Cleanup(func() {
		if err := s.stop(); err != nil {
			tb.Errorf("s3server: %v", err)
		}
	})
	return s
}

func external(tb testing.TB, ep string) *Server {
	s := &Server{
		Endpoint:  ep,
		AccessKey: os.Getenv("TRIBUNAL_TEST_S3_ACCESS_KEY"),
		SecretKey: os.Getenv("TRIBUNAL_TEST_S3_SECRET_KEY"),
		Region:    os.Getenv("TRIBUNAL_TEST_S3_REGION"),
		tb:        tb,
		external:  true,
	}
	if s.AccessKey == "" || s.SecretKey == "" {
		tb.Fatal("s3server: TRIBUNAL_TEST_S3_ENDPOINT is set but TRIBUNAL_TEST_S3_ACCESS_KEY or TRIBUNAL_TEST_S3_SECRET_KEY is not")
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	if v := os.Getenv("TRIBUNAL_TEST_S3_SECURE"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			tb.Fatalf("s3server: TRIBUNAL_TEST_S3_SECURE: invalid boolean %q", v)
		}
		s.Secure = b
	}
	return s
}

// Command returns the versitygw command line Start runs, for reports and debugging;
// empty for an external server.
func (s *Server) Command() string {
	if s.external {
		return ""
	}
	return s.bin + " " + strings.Join(s.args, " ")
}

// URL returns an "s3://" store URL for bucket on this server, credentials included.
func (s *Server) URL(bucket string) string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", s.Region)
	q.Set("path_style", "true")
	q.Set("secure", strconv.FormatBool(s.Secure))
	u := url.URL{Scheme: "s3", User: url.UserPassword(s.AccessKey, s.SecretKey), Host: bucket, RawQuery: q.Encode()}
	return u.String()
}

// Stop takes the server down, keeping its port and data for Restart. Chaos tests use
// it to check that clients fail promptly and recover. An external server cannot be
// stopped, so Stop skips the test. Stop and Restart report failures on the testing.TB
// given to Start, so call them from that test's goroutine.
func (s *Server) Stop() {
	s.tb.Helper()
	if s.external {
		s.tb.Skip("s3server: cannot stop an external S3 server (TRIBUNAL_TEST_S3_ENDPOINT)")
	}
	if err := s.stop(); err != nil {
		s.tb.Fatalf("s3server: %v", err)
	}
}

// Restart brings a stopped server back on the same port over the same data, so that
// objects written before Stop are readable again. It is a no-op on a running server.
func (s *Server) Restart() {
	s.tb.Helper()
	if s.external {
		s.tb.Skip("s3server: cannot restart an external S3 server (TRIBUNAL_TEST_S3_ENDPOINT)")
	}
	s.mu.Lock()
	running := s.cmd != nil
	s.mu.Unlock()
	if running {
		return
	}
	// The old socket may linger briefly; retry binding the same port for a while.
	deadline := time.Now().Add(startTimeout)
	for {
		err := s.start()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("s3server: restart versitygw on %s: %v", s.Endpoint, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (s *Server) buildArgs() []string {
	args := []string{
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--port", s.Endpoint,
		"--health", healthPath,
		"--quiet",
		"posix",
	}
	if s.metaDir != "" {
		args = append(args, "--sidecar", s.metaDir)
	}
	return append(args, s.dataDir)
}

// start launches versitygw and waits until it answers on its health endpoint.
func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o640)
	if err != nil {
		return err
	}
	cmd := exec.Command(s.bin, s.args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// Its own process group, so a ^C to the test run is not what stops it and a
	// SIGKILL can reach any children it might start.
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	done := make(chan struct{})
	go func() {
		cmd.Wait()
		logf.Close()
		close(done)
	}()

	if err := waitHealthy(s.Endpoint, done); err != nil {
		killGroup(cmd)
		<-done
		return fmt.Errorf("%w; log tail:\n%s", err, tail(s.logPath, 2048))
	}
	s.cmd, s.done = cmd, done
	return nil
}

// stop ends versitygw gracefully, or kills it after stopTimeout.
func (s *Server) stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(stopTimeout):
		killGroup(cmd)
		<-done
		return fmt.Errorf("versitygw did not stop within %s after SIGTERM; killed", stopTimeout)
	}
	// Wait until the port refuses connections, so the caller observes a down server.
	for deadline := time.Now().Add(stopTimeout); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		c, err := net.DialTimeout("tcp", s.Endpoint, 200*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
	}
	return fmt.Errorf("%s still accepts connections after versitygw exited", s.Endpoint)
}

func killGroup(cmd *exec.Cmd) {
	// Negative pid: the whole process group started for this server, and only it.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

func waitHealthy(endpoint string, exited <-chan struct{}) error {
	client := &http.Client{Timeout: time.Second}
	u := "http://" + endpoint + healthPath
	deadline := time.Now().Add(startTimeout)
	for {
		select {
		case <-exited:
			return errors.New("versitygw exited during startup")
		default:
		}
		resp, err := client.Get(u)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("versitygw not healthy after %s: %w", startTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Binary is the versitygw program the tests run ("" when it is not installed), for tests
// that start it with arguments of their own (a compose file's, say).
func Binary() string { return findBinary() }

// NeedsSidecar reports whether versitygw's posix backend needs --sidecar for object
// metadata on dir's filesystem (one without user extended attributes).
func NeedsSidecar(dir string) bool { return !xattrSupported(dir) }

func findBinary() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if out, err := exec.Command("go", "env", "GOBIN", "GOPATH").Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) == 2 {
			if lines[0] != "" {
				dirs = append(dirs, lines[0])
			}
			for _, p := range filepath.SplitList(lines[1]) {
				dirs = append(dirs, filepath.Join(p, "bin"))
			}
		}
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "versitygw")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(bytes.TrimSpace(b))
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var bucketUnsafe = regexp.MustCompile(`[^a-z0-9]+`)

// Bucket returns a bucket name unique to tb and valid for S3 (3-63 characters of
// lower-case letters, digits and hyphens), so that tests sharing one server never see
// each other's objects. It does not create the bucket.
func Bucket(tb testing.TB) string {
	name := bucketUnsafe.ReplaceAllString(strings.ToLower(tb.Name()), "-")
	name = strings.Trim(name, "-")
	suffix := randHex(4)
	if max := 63 - len("t--") - len(suffix); len(name) > max {
		name = strings.Trim(name[len(name)-max:], "-")
	}
	return "t-" + name + "-" + suffix
}

// Ping reports whether the server answers TCP connections now; chaos tests use it to
// assert the outage they caused.
func (s *Server) Ping(ctx context.Context) error {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", s.Endpoint)
	if err != nil {
		return err
	}
	return c.Close()
}
