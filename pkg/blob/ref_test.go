package blob

import (
	"regexp"
	"strings"
	"testing"
)

// The byte loops say what the patterns they replaced say.
func TestRefPatterns(t *testing.T) {
	t.Parallel()
	tenant := regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)
	hex := regexp.MustCompile(`^[0-9a-f]{64}$`)
	long := strings.Repeat("a", 63)
	digest := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, s := range []string{"", "a", "0", "_a", "-a", "a_", "a-b", "A", "aB", "a.b", "a/b", "..", "é", "a\n", long, long + "a",
		digest, strings.ToUpper(digest), digest[:63], digest + "0", "g" + digest[1:], digest[:63] + "\n"} {
		if got, want := validTenant(s), tenant.MatchString(s); got != want {
			t.Errorf("validTenant(%q) = %v, want %v", s, got, want)
		}
		if got, want := validHex(s), hex.MatchString(s); got != want {
			t.Errorf("validHex(%q) = %v, want %v", s, got, want)
		}
	}
}
