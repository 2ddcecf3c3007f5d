package kv

import "testing"

func TestToken(t *testing.T) {
	for in, want := range map[string]string{
		"":          "=",
		"team-a_1":  "team-a_1",
		"a.b":       "a=2Eb",
		"gpt-4o.*>": "gpt-4o=2E=2A=3E",
		"ä":         "=C3=A4",
		"team=a":    "team=3Da",
	} {
		if got := Token(in); got != want {
			t.Errorf("Token(%q) = %q, want %q", in, got, want)
		}
	}
}
