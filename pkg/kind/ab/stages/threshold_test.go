package stages

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

func TestResolveThreshold(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	cases := []struct {
		name          string
		batch         *float64
		env, cfn, err string
		want          float64
	}{
		{"default", nil, "", "", "", 0.75},
		{"batch wins", f(0.6), "0.9", "0.8", "", 0.6},
		{"tribunal env", nil, "0.9", "0.8", "", 0.9},
		{"seed env", nil, "", "0.8", "", 0.8},
		{"bad env", nil, "lots", "", "TRIBUNAL_AB_THRESHOLD", 0},
		{"out of range", nil, "1.5", "", "TRIBUNAL_AB_THRESHOLD", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("TRIBUNAL_AB_THRESHOLD", c.env)
			t.Setenv("CFN_AB_CRITIC_THRESHOLD", c.cfn)
			got, err := ResolveThreshold(&batch.Batch{Parts: map[string]any{"ab": &ab.Defaults{Threshold: c.batch}}})
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("err %v, want one naming %s", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %v %v, want %v", got, err, c.want)
			}
		})
	}
}
