// Package audit replays the event stream and re-derives every decision tribunal recorded
// from the recorded events alone, so an altered event, verdict, decision, artifact or
// manifest is found instead of trusted.
//
// The stream is the evidence: each job's outcome was derived by the aggregator from its
// job.submitted and the events that followed (verdicts, failed gates, rubric loop steps,
// dead letters), each of those carries the digest chain of the stages it passed through
// (render.requested, render.done, gates.done), and each manifest and sign-off carries a
// digest chained over the wire bytes of exactly those events. Replay reads the stream
// with bus.ReadStream and hands each message over as it is read; Run audits as it
// reads (Audit does the same over a slice), running the aggregator's rules again, with
// the same packages (pkg/rulebook, each kind's rules), in stream order, and compares
// every value it derives with the event (or blob) that records it. Every link of every
// chain is checked against the event it names, and every blob an event records is read
// back from blob storage and checked against its address, size and media type: the
// artifacts a render or its gates recorded, each judge call's record (the prompt and raw
// answer reviewers are shown, whose address the vote carries, so it is on the verdict's
// link of the chain), each page of a batch's plan, and each manifest, against what the
// aggregator wrote. A redrive (`tribunal redrive`) is replayed as the aggregator handles
// it: its attempt's events have ids of their own, a blocked job takes the newer attempt's
// outcome, and each completion of the batch (the first pass's, then one per redrive) is
// re-derived from the job records as they were at that moment. CheckBatchState then
// compares the aggregator's key-value state (batch header, job records) with what the
// replay derived, and CheckUnreplayed finds the header of a batch the stream holds no
// event of. What cannot be derived from events (the aggregator's clock, a key-value race,
// the judges' answers themselves) is listed as unverified, never silently passed.
package audit
