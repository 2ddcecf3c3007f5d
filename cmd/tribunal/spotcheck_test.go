package main

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/argus"
)

// TestAskSpotcheck: the terminal's HE-2 prompt asks again until the answer is y or one of
// the rubric's dimensions, so "reject" is never recorded as a dimension.
func TestAskSpotcheck(t *testing.T) {
	for _, tc := range []struct {
		in           string
		approved, ok bool
		dim          string
		reasks       int
	}{
		{"y\n", true, true, "", 0},
		{"reject\ntypograpy\n\ntypography\n", false, true, "typography", 2},
		{"reject\n", false, false, "", 1},
		{"", false, false, "", 0},
		{"hierarchy", false, true, "hierarchy", 0},
	} {
		var out bytes.Buffer
		a, d, ok := askSpotcheck(bufio.NewReader(strings.NewReader(tc.in)), &out, argus.DefaultRubric())
		if a != tc.approved || d != tc.dim || ok != tc.ok || strings.Count(out.String(), "spot-check: ") != tc.reasks {
			t.Errorf("%q: %v %q %v after %q", tc.in, a, d, ok, out.String())
		}
	}
}
