package s3server

import (
	"os"
	"syscall"
)

// sysProcAttr puts versitygw in its own process group, so that killGroup reaches
// anything it starts, and asks the kernel to kill it if the test binary dies (a test
// timeout, say), so no server outlives its test run.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// xattrSupported reports whether dir's filesystem takes user extended attributes,
// where the posix backend keeps object metadata by default.
func xattrSupported(dir string) bool {
	f, err := os.CreateTemp(dir, ".xattr-probe-*")
	if err != nil {
		return false
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	return syscall.Setxattr(name, "user.tribunal.probe", []byte("1"), 0) == nil
}
