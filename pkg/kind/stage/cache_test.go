package stage

import (
	"testing"

	"github.com/tribunal-dev/tribunal/internal/testutil/judgetest"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestCacheKeyTenant: by default the tenant is part of every judge-cache key, so one
// team's answer is never served to another; an operator's opt-in (ShareCache) makes
// identical inputs share one key across tenants.
func TestCacheKeyTenant(t *testing.T) {
	t.Parallel()
	p, _ := judgetest.AnswersInTurn()
	private := &JudgeEnv{Provider: p}
	a := private.CacheKey(events.KindAB, "team-a", "m", "ab.v2:x", "criterion", "sha-a", "sha-b")
	b := private.CacheKey(events.KindAB, "team-b", "m", "ab.v2:x", "criterion", "sha-a", "sha-b")
	if a == b {
		t.Fatalf("two tenants share cache key %s", a)
	}
	if again := private.CacheKey(events.KindAB, "team-a", "m", "ab.v2:x", "criterion", "sha-a", "sha-b"); again != a {
		t.Fatalf("cache key not stable: %s vs %s", a, again)
	}
	shared := &JudgeEnv{Provider: p, ShareCache: true}
	sa := shared.CacheKey(events.KindAB, "team-a", "m", "ab.v2:x", "criterion", "sha-a", "sha-b")
	sb := shared.CacheKey(events.KindAB, "team-b", "m", "ab.v2:x", "criterion", "sha-a", "sha-b")
	if sa != sb {
		t.Fatalf("shared cache: tenants get keys %s and %s", sa, sb)
	}
	if sa == a || sa == b {
		t.Fatal("a shared key equals a tenant's private key: switching the option would mix both")
	}
	if shared.CacheKey(events.KindAB, "team-a", "m", "ab.v2:x", "criterion", "sha-a", "sha-c") == sa {
		t.Fatal("different inputs share a key")
	}
}
