package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// maxQueues bounds a reviewer's index to the team's newest batches: each one's queue is
// drawn from all its job records, as its queue page draws it. An older batch's queue
// still opens at its own address.
const maxQueues = 50

type queueRow struct {
	Batch, Href string
	Items, Done int
}

type queuesPage struct {
	Tenant string
	Queues []queueRow
	// Older counts the team's batches past maxQueues, not looked at.
	Older int
}

// home is `/`: the batches to a team (index), the team's review queues to a reviewer,
// whose token opens nothing else of them.
func (s *server) home(w http.ResponseWriter, r *http.Request, c caller) {
	if c.role == tokens.RoleReviewer {
		s.reviewQueues(w, r, c)
		return
	}
	s.index(w, r, c)
}

// reviewQueues is a reviewer's index, what `/` shows its token: the team's batches that
// have a review queue, newest first, each with its items and how many the caller
// answered (through the console or the ingress: one name, tokens.Reviewer). It shows
// nothing of a batch but its id: no progress, summary or cost, which would say what the
// judges decided.
func (s *server) reviewQueues(w http.ResponseWriter, r *http.Request, c caller) {
	batches, err := s.newestBatches(r.Context(), c.tenant)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	p := queuesPage{Tenant: c.tenant}
	if len(batches) > maxQueues {
		p.Older, batches = len(batches)-maxQueues, batches[:maxQueues]
	}
	me := s.reviewer(c)
	for _, b := range batches {
		q, _, err := client.ReviewQueue(r.Context(), s.cfg.Buckets, c.tenant, b)
		if err != nil {
			s.fail(w, r, fmt.Errorf("review queue of %s/%s: %w", c.tenant, b, err))
			return
		}
		if len(q) == 0 {
			continue
		}
		row := queueRow{Batch: b, Href: "/t/" + c.tenant + "/b/" + b + "/review", Items: len(q)}
		for _, e := range q {
			for _, by := range e.Reviewers {
				if by == me {
					row.Done++
					break
				}
			}
		}
		p.Queues = append(p.Queues, row)
	}
	s.render(w, r, http.StatusOK, "queues.html", view{Title: "Review queues of " + c.tenant, Page: p})
}

// newestBatches are a tenant's batch ids, newest first, read from the batch headers.
func (s *server) newestBatches(ctx context.Context, tenant string) ([]string, error) {
	wt, err := s.cfg.Buckets.Batches.Watch(ctx, tenant+".*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("list batches of %s: %w", tenant, err)
	}
	defer wt.Stop()
	type head struct {
		batch string
		at    time.Time
	}
	var hs []head
	for e := range wt.Updates() {
		if e == nil {
			break
		}
		_, batch, ok := strings.Cut(e.Key(), ".")
		if !ok || strings.Contains(batch, ".") {
			continue
		}
		var h records.Batch
		if err := json.Unmarshal(e.Value(), &h); err != nil {
			s.log.Warn("corrupt batch header", "key", e.Key(), "err", err)
			continue
		}
		hs = append(hs, head{batch, h.CreatedAt})
	}
	sort.Slice(hs, func(i, j int) bool {
		if !hs[i].at.Equal(hs[j].at) {
			return hs[i].at.After(hs[j].at)
		}
		return hs[i].batch > hs[j].batch
	})
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = h.batch
	}
	return out, nil
}
