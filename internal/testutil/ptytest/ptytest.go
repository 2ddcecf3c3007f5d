//go:build linux

// Package ptytest runs a command on a real pseudo-terminal, for tests of what a program
// does when a person sits at its terminal (isatty is true on its standard input). It opens
// the terminal pair through Linux's /dev/ptmx with golang.org/x/sys/unix, so it needs no
// package of its own.
package ptytest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Term is a command running on a pseudo-terminal: standard input, output and error are
// the terminal; what the command writes is kept, and Type writes as a person types.
type Term struct {
	t      testing.TB
	master *os.File
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer
	read   chan struct{}
	done   chan struct{}
	err    error
}

// Open makes a pseudo-terminal pair: the master side and the terminal (slave) a command
// is given.
func Open() (master, tty *os.File, err error) {
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("pty number: %w", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		return nil, nil, fmt.Errorf("open pty %d: %w", n, err)
	}
	return m, s, nil
}

// Start starts cmd on a new pseudo-terminal, in a session of its own with the terminal
// as its controlling terminal. The command is killed at the test's cleanup if it still
// runs.
func Start(t testing.TB, cmd *exec.Cmd) *Term {
	t.Helper()
	m, s, err := Open()
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = s, s, s
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		m.Close()
		s.Close()
		t.Fatal(err)
	}
	s.Close()
	term := &Term{t: t, master: m, cmd: cmd, read: make(chan struct{}), done: make(chan struct{})}
	go term.copy()
	go func() {
		term.err = cmd.Wait()
		close(term.done)
	}()
	t.Cleanup(func() {
		select {
		case <-term.done:
		default:
			_ = cmd.Process.Kill()
			<-term.done
		}
		m.Close()
		term.drained()
	})
	return term
}

func (p *Term) copy() {
	defer close(p.read)
	buf := make([]byte, 4096)
	for {
		n, err := p.master.Read(buf)
		p.mu.Lock()
		p.out.Write(buf[:n])
		p.mu.Unlock()
		if err != nil {
			// EIO once the last process holding the terminal has closed it.
			if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.EIO) {
				p.t.Logf("pty read: %v", err)
			}
			return
		}
	}
}

// drained waits a little for the output the command left in the terminal: a process it
// started may hold the terminal open after it ended.
func (p *Term) drained() {
	select {
	case <-p.read:
	case <-time.After(5 * time.Second):
	}
}

// Output is everything the command wrote so far (and the terminal's echo of what was
// typed).
func (p *Term) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// WaitFor waits until the output holds s, failing the test after d or when the command
// ends first.
func (p *Term) WaitFor(s string, d time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(d)
	for !strings.Contains(p.Output(), s) {
		select {
		case <-p.done:
			p.drained()
			if strings.Contains(p.Output(), s) {
				return
			}
			p.t.Fatalf("the command ended (%v) before writing %q:\n%s", p.err, s, p.Output())
		default:
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %q:\n%s", s, p.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Type writes s to the terminal, as a person typing it.
func (p *Term) Type(s string) {
	p.t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		p.t.Fatalf("type %q: %v", s, err)
	}
}

// Wait waits for the command to end, at most d, and returns its exit code.
func (p *Term) Wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("the command did not end within %s:\n%s", d, p.Output())
	}
	p.drained()
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		return ee.ExitCode()
	}
	if p.err != nil {
		p.t.Fatalf("wait: %v", p.err)
	}
	return 0
}
