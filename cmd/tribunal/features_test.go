//go:build unix

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestFeatureServerRefusesFIFO: the all-in-one mode serves a rubric feature folder to
// the browser; a FIFO in it is refused at once instead of blocking the request.
func TestFeatureServerRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "page.html"), []byte("<p>hi</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	pipe := filepath.Join(dir, "pipe.html")
	if err := syscall.Mkfifo(pipe, 0o644); err != nil {
		t.Fatalf("mkfifo: %v", err)
	}
	t.Cleanup(func() {
		if f, err := os.OpenFile(pipe, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	var fsrv featureServer
	defer fsrv.Close()
	base, err := fsrv.serve(dir)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for page, want := range map[string]int{"page.html": http.StatusOK, "pipe.html": http.StatusForbidden} {
		resp, err := client.Get(base + "/" + page)
		if err != nil {
			t.Fatalf("GET %s: %v", page, err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", page, resp.StatusCode, want)
		}
	}
}
