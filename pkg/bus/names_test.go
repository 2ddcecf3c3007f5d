package bus

import (
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/events"
)

// TestReservedTenantsCoverEveryDurable holds events.ReservedTenants to the durable names
// the services use: a name a team could make its own per-tenant durable take
// ("tribunal-<service>-<tenant>") must be a reserved tenant, so no team shares a durable
// with the service (a team "dlq" once had the aggregator's dead-letter durable's name, and
// was never served).
func TestReservedTenantsCoverEveryDurable(t *testing.T) {
	fixed := []string{DeadLetterConsumerName}
	for _, svc := range Services {
		fixed = append(fixed, ConsumerName(svc))
	}
	for _, name := range fixed {
		for _, svc := range Services {
			tenant, ok := strings.CutPrefix(name, TenantConsumerName(svc, ""))
			if !ok || tenant == "" {
				continue
			}
			if events.ValidateTenant(tenant) == nil {
				t.Errorf("tenant %q would name %s's durable %q, which the service uses itself: add it to events.ReservedTenants", tenant, svc, name)
			}
		}
	}
	for _, r := range events.ReservedTenants {
		if err := events.ValidateTenant(r); err == nil || !strings.Contains(err.Error(), "reserved") {
			t.Errorf("ValidateTenant(%q) = %v, want reserved", r, err)
		}
	}
}
