package app

import (
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/judge/openai"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
)

// The judge service holds a quarter more messages than its provider has slots when the
// provider's bound is the narrower one, and what it was told otherwise.
func TestJudgeConcurrency(t *testing.T) {
	unbounded, err := scripted.New(scripted.Options{Fixtures: map[string]string{"ab": "A"}, Named: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	bounded := func(slots int) *openai.Provider {
		p, err := openai.New(openai.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m", Concurrency: slots})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name        string
		concurrency int
		p           judge.Provider
		want        int
	}{
		{"no bound of its own", 64, unbounded, 64},
		{"as many slots as messages", 64, bounded(64), 80},
		{"16 slots of 16", 16, bounded(16), 20},
		{"one slot", 1, bounded(1), 2},
		{"fewer slots, room already", 64, bounded(16), 64},
		{"fewer slots, some room", 64, bounded(60), 75},
		{"more slots than messages", 64, bounded(100), 64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgeConcurrency(tc.concurrency, tc.p); got != tc.want {
				t.Fatalf("judgeConcurrency(%d, %s) = %d, want %d", tc.concurrency, tc.name, got, tc.want)
			}
		})
	}
}
