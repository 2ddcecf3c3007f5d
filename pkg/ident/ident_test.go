package ident

import (
	"regexp"
	"strings"
	"testing"
)

// The byte loops say what the patterns they replaced say.
func TestPatterns(t *testing.T) {
	t.Parallel()
	tenant := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	name := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	long := strings.Repeat("a", 63)
	digest := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, s := range []string{"", "a", "0", "_a", "-a", "a_", "a-b", "A", "aB", "Ab-9_", "a.b", "a/b", "..", "é", "aé", "a\n", "a b", "a*", "a>",
		long, long + "a", strings.Repeat("Z", 128), strings.Repeat("Z", 129), "Z" + strings.Repeat("_", 127),
		digest, strings.ToUpper(digest), digest[:63], digest + "0", "g" + digest[1:], digest[:63] + "\n"} {
		if got, want := Tenant(s), tenant.MatchString(s); got != want {
			t.Errorf("Tenant(%q) = %v, want %v", s, got, want)
		}
		if got, want := Name(s), name.MatchString(s); got != want {
			t.Errorf("Name(%q) = %v, want %v", s, got, want)
		}
		if got, want := HexDigest(s), hex.MatchString(s); got != want {
			t.Errorf("HexDigest(%q) = %v, want %v", s, got, want)
		}
	}
}
