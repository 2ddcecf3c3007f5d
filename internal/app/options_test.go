package app

import (
	"context"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
)

// Options that could only fail after provisioning, or mid-batch, are refused before
// anything starts, each with what is wrong.
func TestStartValidatesOptions(t *testing.T) {
	store, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"unknown service", Options{Services: []string{"renderer", "rendrer"}, Store: store}, `unknown service "rendrer"`},
		{"repeated service", Options{Services: []string{"gater", "gater"}, Store: store}, `service "gater" named twice`},
		{"no store", Options{Services: []string{bus.Aggregator}}, "blob store"},
		{"judge without provider", Options{Services: []string{bus.Judge}, Store: store}, "judge service needs a provider"},
		{"negative grace", Options{Services: []string{}, ShutdownGrace: -1}, "ShutdownGrace must not be negative"},
		{"quota over concurrency", Options{Services: []string{}, Concurrency: 4, TenantQuota: 8}, "TenantQuota 8 exceeds Concurrency 4"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// No connection: validation must refuse before touching the bus.
			_, err := Start(context.Background(), nil, tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
