//go:build unix && !linux

package s3server

import "syscall"

// sysProcAttr puts versitygw in its own process group, so that killGroup reaches
// anything it starts.
func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// xattrSupported assumes extended attributes work: the platforms that get here
// (macOS, BSDs) support them on their default filesystems.
func xattrSupported(string) bool { return true }
