package client

import "github.com/tribunal-dev/tribunal/pkg/events"

// The events a team originates. Each id is derived from the event's own fields, so
// whoever rebuilds an event from the same fields (the ingress, which never takes a
// client's id on its word) derives the same id.

// SubmittedEvent is the event that submits one job. Its id is derived from the tenant,
// batch, job and iteration alone, so whoever rebuilds it from the same fields (the
// ingress, which never takes a client's id on its word) gets the same id.
func SubmittedEvent(tenant, batchID, job string, iteration int, p *events.JobSubmitted) events.Event {
	return events.New(p, tenant, batchID, job, iteration, "", nil)
}

// SpotcheckEvent is the event of a spot-check, its id derived from the decision: the same
// decision made twice is one event, a changed mind another.
func SpotcheckEvent(tenant, batchID string, p *events.SpotcheckRecorded) events.Event {
	return events.SpotcheckEvent(tenant, batchID, p)
}

// OpenedEvent announces a batch before its first job: its size and plan. One per batch.
func OpenedEvent(tenant, batchID string, p *events.BatchOpened) events.Event {
	return events.New(p, tenant, batchID, "", 0, "", nil)
}

// CancelEvent asks for a batch's cancel; a team publishes its first page, the aggregator
// the rest.
func CancelEvent(tenant, batchID string, p *events.BatchCancelRequested) events.Event {
	return events.New(p, tenant, batchID, "", 0, "", nil)
}

// ResetEvent asks for a new loop of the rubric view a job names, its id derived from the
// loop it resets, so a second reset of the same loop is the same event.
func ResetEvent(tenant, batchID string, p *events.ViewReset) events.Event {
	return events.ResetEvent(tenant, batchID, p)
}
