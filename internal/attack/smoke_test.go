package attack

import "testing"

// TestWorldRuns: the whole flow runs under the generated authorization, each service on
// its own user, teams through the ingress (the world fails the test on any permission
// violation of a service or the ingress).
func TestWorldRuns(t *testing.T) {
	w := newWorld(t, worldOptions{})
	c, sub := w.victim(3)
	w.victimIntact(c, sub)
}
