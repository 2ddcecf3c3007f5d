package main

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

func TestQuotaFlags(t *testing.T) {
	q := quotaFlags{stored: 1 << 30, batches: 0, acs: 500, tenants: []string{"team-a:stored=2GiB,acs=0", "team-b:batches=3"}}
	got, err := q.quotas()
	if err != nil {
		t.Fatal(err)
	}
	if want := (ingress.Quota{Stored: 1 << 30, Batches: -1, ACs: 500}); got.Default != want {
		t.Errorf("default %+v, want %+v", got.Default, want)
	}
	if a, b := got.For("team-a"), got.For("team-b"); a.Stored != 2<<30 || a.ACs != -1 || a.Batches != -1 || b.Batches != 3 || b.Stored != 1<<30 {
		t.Errorf("team-a %+v, team-b %+v", a, b)
	}
	for _, bad := range []string{"team-a", "team-a:", "team-a:size=1", "team-a:acs=-1", "dlq:acs=1", "Team:acs=1", "team-a:stored=lots"} {
		q := quotaFlags{tenants: []string{bad}}
		if _, err := q.quotas(); err == nil || !strings.Contains(err.Error(), "--tenant-limits") {
			t.Errorf("--tenant-limits %q: %v", bad, err)
		}
	}
}
