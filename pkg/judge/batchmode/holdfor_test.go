package batchmode

import (
	"testing"
	"time"
)

// TestHoldForOutlastsParkedCall: a budget reservation of a parked call lasts past the
// longest the call can wait, defaults or not.
func TestHoldForOutlastsParkedCall(t *testing.T) {
	for _, c := range []Config{{}, {MaxWait: 2 * time.Hour, Linger: time.Minute, SubmitStale: time.Minute, PollMax: time.Minute}} {
		d := c.withDefaults()
		if got, least := c.HoldFor(), d.Linger+d.SubmitStale+d.MaxWait+d.PollMax; got <= least {
			t.Errorf("%+v: HoldFor %s, want more than %s", c, got, least)
		}
	}
}
