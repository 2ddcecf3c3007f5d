package rulebook

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// TestFoldDigestIsTheChainDigest: the completion's digest, built without a string per
// link, is records.ChainDigest over every job's links in batch order, packed or not (a
// link that is no id:sha256 pair is kept as it is).
func TestFoldDigestIsTheChainDigest(t *testing.T) {
	id := func(c string) string { return strings.Repeat(c, 32) }
	sum := func(c string) string { return strings.Repeat(c, 64) }
	first := []string{id("a") + ":" + sum("1"), id("b") + ":" + sum("2")}
	second := []string{"not-a-link", id("c") + ":" + sum("3"), id("D") + ":" + sum("4")}
	f := NewFold("t", "b")
	f.links.Add(spillsort.IntKey(nil, 1), packLinks(second))
	f.links.Add(spillsort.IntKey(nil, 0), packLinks(first))
	want := records.ChainDigest(append(append([]string(nil), first...), second...))
	if got := f.Digest(); got != want {
		t.Fatalf("digest %s, want %s", got, want)
	}
	if got := NewFold("t", "b").Digest(); got != "" {
		t.Fatalf("no jobs: digest %q, want none", got)
	}
}
