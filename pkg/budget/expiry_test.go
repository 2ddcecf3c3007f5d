package budget_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/budget"
	"github.com/tribunal-dev/tribunal/pkg/price"
)

// TestReservationExpires: a reservation its judge never settles (the judge died, the
// call was parked in a provider batch) holds the budget back until its expiry and no
// longer; a restarted judge's new reservation then fits. A settlement arriving after the
// expiry spends what was used without taking back the reservation twice. However many
// calls are reserved over time, the budget's value keeps a bounded number of holds.
func TestReservationExpires(t *testing.T) {
	s := natstest.Start(t)
	_, js := s.Connect(t)
	ctx := context.Background()
	l, err := budget.Open(ctx, js, "", 1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	l.Now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	scopes := []budget.Scope{{Key: budget.BatchKey("team-a", "b-1"), Limit: price.Limit{Tokens: 1500}, What: "the batch's budget"}}
	est := budget.Amount{Tokens: 1000}
	const holdFor = 2 * time.Hour
	lost, err := l.Reserve(ctx, scopes, est, holdFor) // its judge dies: never settled
	if err != nil {
		t.Fatal(err)
	}
	var r *budget.Refusal
	if _, err := l.Reserve(ctx, scopes, est, holdFor); !errors.As(err, &r) || r.Reserved.Tokens != 1000 {
		t.Fatalf("a second call while the first is held: %v, want refused with 1000 reserved", err)
	}
	advance(holdFor - time.Minute)
	if st, _ := l.Status(ctx, scopes[0].Key); st.Reserved.Tokens != 1000 {
		t.Fatalf("before its expiry: %+v, want the reservation held", st)
	}
	advance(holdFor/12 + 2*time.Minute) // past the expiry step
	if st, _ := l.Status(ctx, scopes[0].Key); st.Reserved != (budget.Amount{}) {
		t.Fatalf("past its expiry: %+v, want nothing reserved", st)
	}
	again, err := l.Reserve(ctx, scopes, est, holdFor)
	if err != nil {
		t.Fatalf("the restarted judge's call: %v", err)
	}
	// The lost call's settlement, late: it spends, and the live hold stays whole.
	if err := l.Settle(ctx, lost, budget.Amount{Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.Status(ctx, scopes[0].Key); st.Reserved.Tokens != 1000 || st.Spent.Tokens != 100 {
		t.Fatalf("after the late settlement: %+v, want 1000 reserved, 100 spent", st)
	}
	if err := l.Settle(ctx, again, budget.Amount{Tokens: 200}); err != nil {
		t.Fatal(err)
	}
	if st, _ := l.Status(ctx, scopes[0].Key); st.Reserved != (budget.Amount{}) || st.Spent.Tokens != 300 || st.Calls != 2 {
		t.Fatalf("after both settlements: %+v, want nothing reserved, 300 spent by 2 calls", st)
	}

	// A thousand unsettled calls over two days, one every three minutes.
	wide := []budget.Scope{{Key: budget.TenantKey("team-a", "2026-12"), Limit: price.Limit{Tokens: 1 << 40}, What: "team a's budget"}}
	for range 1000 {
		if _, err := l.Reserve(ctx, wide, budget.Amount{Tokens: 1}, holdFor); err != nil {
			t.Fatal(err)
		}
		advance(3 * time.Minute)
	}
	kvb, err := js.KeyValue(ctx, budget.DefaultBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kvb.Get(ctx, wide[0].Key)
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Holds map[string]budget.Amount `json:"holds"`
	}
	if err := json.Unmarshal(e.Value(), &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Holds) > 14 {
		t.Errorf("%d hold entries after 1,000 calls; want at most 14", len(raw.Holds))
	}
	if st, _ := l.Status(ctx, wide[0].Key); st.Reserved.Tokens > 45 || st.Reserved.Tokens < 40 {
		t.Errorf("reserved %+v: want the last two hours' 40 calls and at most a step more", st.Reserved)
	}
}
