package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
)

// --timeline writes one line per chat request with its arrival and end, in arrival order.
func TestWriteTimeline(t *testing.T) {
	s := fakellm.New(fakellm.Options{})
	defer s.Close()
	for range 3 {
		resp, err := http.Post(s.BaseURL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	path := filepath.Join(t.TempDir(), "timeline.jsonl")
	if err := writeTimeline(path, s.Records()); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []timelineEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e timelineEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		got = append(got, e)
	}
	if len(got) != 3 {
		t.Fatalf("%d lines, want 3", len(got))
	}
	for i, e := range got {
		if e.N != i+1 || e.Start == 0 || e.End < e.Start || (i > 0 && e.Start < got[i-1].Start) {
			t.Errorf("line %d = %+v: want request %d, an end after its start, in arrival order", i, e, i+1)
		}
	}
}
