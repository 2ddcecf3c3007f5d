package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

// quotaFlags are the ingress's per-team quotas (ingress.Quotas): one team filling the
// blob store or the queues must never become another team's failure, so every team has
// one by default.
type quotaFlags struct {
	stored  byteSize
	batches int
	acs     int
	tenants []string
}

func (q *quotaFlags) register(fs *pflag.FlagSet) {
	q.stored = byteSize(ingress.DefaultQuota.Stored)
	fs.Var(&q.stored, "tenant-max-stored", "ingress: the bytes one team's objects may take in the blob store (its artifacts and what the services store for it); 0: no bound")
	fs.IntVar(&q.batches, "tenant-max-batches", ingress.DefaultQuota.Batches, "ingress: the batches one team may have in flight (opened, not complete or cancelled); 0: no bound")
	fs.IntVar(&q.acs, "tenant-max-acs", ingress.DefaultQuota.ACs, "ingress: the ACs of one team's batches in flight; 0: no bound")
	fs.StringArrayVar(&q.tenants, "tenant-limits", nil, "ingress: one team's own quotas in place of the above, team:stored=SIZE,batches=N,acs=N (any of the three; repeatable)")
}

// bound is a flag's figure as a quota field: 0 on the command line sets no bound.
func bound(n int64) int64 {
	if n == 0 {
		return -1
	}
	return n
}

// quotas checks the flags and returns the quotas they set.
func (q *quotaFlags) quotas() (ingress.Quotas, error) {
	if q.batches < 0 || q.acs < 0 {
		return ingress.Quotas{}, fmt.Errorf("--tenant-max-batches %d, --tenant-max-acs %d: want 0 (no bound) or more", q.batches, q.acs)
	}
	out := ingress.Quotas{Default: ingress.Quota{Stored: bound(int64(q.stored)), Batches: int(bound(int64(q.batches))), ACs: int(bound(int64(q.acs)))}}
	for _, spec := range q.tenants {
		team, fields, ok := strings.Cut(spec, ":")
		if !ok || fields == "" {
			return out, fmt.Errorf("--tenant-limits %q: want team:stored=SIZE,batches=N,acs=N", spec)
		}
		if err := events.ValidateTenant(team); err != nil {
			return out, fmt.Errorf("--tenant-limits %q: %w", spec, err)
		}
		tq := out.Default
		for _, f := range strings.Split(fields, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
			var err error
			switch k {
			case "stored":
				var n uint64
				if n, err = humanize.ParseBytes(v); err == nil {
					tq.Stored = bound(int64(n))
				}
			case "batches", "acs":
				var n int
				if n, err = strconv.Atoi(v); err == nil && n < 0 {
					err = fmt.Errorf("negative")
				}
				if k == "batches" {
					tq.Batches = int(bound(int64(n)))
				} else {
					tq.ACs = int(bound(int64(n)))
				}
			default:
				err = fmt.Errorf("unknown quota %q (want stored, batches or acs)", k)
			}
			if err != nil {
				return out, fmt.Errorf("--tenant-limits %q: %s: %w", spec, f, err)
			}
		}
		if out.Tenants == nil {
			out.Tenants = map[string]ingress.Quota{}
		}
		out.Tenants[team] = tq
	}
	return out, nil
}

// checkQuotaStore refuses a stored-bytes quota over a store that cannot count a team's
// bytes: the quota would not hold, and never silently.
func checkQuotaStore(q ingress.Quotas, store blob.Store) error {
	if _, ok := store.(blob.Usager); ok {
		return nil
	}
	bounded := q.Default.Stored >= 0
	for _, tq := range q.Tenants {
		bounded = bounded || tq.Stored >= 0
	}
	if bounded {
		return fmt.Errorf("--tenant-max-stored: the blob store cannot count a team's bytes; give --tenant-max-stored 0 to run without the quota")
	}
	return nil
}
