//go:build unix

package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/fifotest"
)

// TestFeatureServerRefusesFIFO: the all-in-one mode serves a rubric feature folder to
// the browser; a FIFO in it is refused at once instead of blocking the request.
func TestFeatureServerRefusesFIFO(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "page.html"), []byte("<p>hi</p>"), 0o644); err != nil {
		t.Fatal(err)
	}
	fifotest.Make(t, filepath.Join(dir, "pipe.html"))
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
