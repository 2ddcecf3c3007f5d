// Package ab holds the deterministic half of the `ab` judge kind: a blind comparison of
// the build's artifact ("ours") with the artifact an acceptance criterion names as its
// reference.
//
// The model only ever sees two slots, A and B. Everything that gives those slots meaning
// lives here, so that it can be re-derived by the aggregator and by any reviewer without
// trusting a judge:
//
//   - Assign places ours and the reference in slots A and B from a hash of the AC id and
//     the iteration, exactly as the original shell helper does, so an assignment written
//     into a manifest can be checked by recomputing it.
//   - ParseRawVerdict and RawVerdict.Validate accept only a well-formed answer over the
//     slots; anything else is a schema violation, never a salvaged verdict.
//   - Unshuffle maps the slot the judge picked back to ours / reference / tie.
//   - Route turns a winner and a confidence into a suggestion tag and impact.
//   - BuildManifest and ExitCode produce the vote manifest and the process outcome.
//   - ParseVerifyMap and Resolve find the two artifacts for an AC.
//   - CombineSwap and Panel go beyond a single call: they control position bias by asking
//     twice with the slots swapped, and combine several judges' votes.
//
// The package does no I/O besides parsing bytes it is handed, reads no clock and uses no
// randomness: the same inputs always give the same outputs, which is what lets a replay of
// the event log reproduce every decision.
package ab
