// Package argus is the deterministic half of tribunal's `rubric` judge kind, which
// follows the Argus visual-ATDD loop: a view of a UI is rendered, held to a floor of
// deterministic gates, scored by a separate judge against a per-dimension rubric, and
// iterated until it passes twice in a row.
//
// Everything here is a pure function of the bytes and values it is handed, so the
// gater and the aggregator can call it from event handlers, keep the results in
// JetStream key-value buckets, and a replay of the event log reaches the same
// decisions. The only file access is in feature.go (LoadFeature, LintSpecFile,
// LoadRubric), for the CLI and the renderer that read a feature folder.
//
// A feature folder holds:
//
//   - spec.json, the machine contract (Spec, LintSpec): targets, their states and
//     appearances, fixtures, the a11y contract and the reference manifest;
//   - spec.md, the prose acceptance criteria the judge reads as spec-text;
//   - tokens.json and contrast-pairs.json, the design-system mirror and the colour
//     pairs that must stay legible (ParseTokens, ParseContrastPairs);
//   - optionally rubric.json, replacing the built-in rubric (DefaultRubric, LoadRubric).
//
// The pieces, in the order the pipeline uses them:
//
//   - Spec.Views expands targets into (target, state, appearance) views; the canonical
//     view of each target needs a reference image, and one that is needed or a
//     candidate puts the feature in NEEDS_CONTEXT.
//   - The gates: CheckContrast (WCAG 2.x, alpha composited, exact comparison),
//     HarvestIDs and CheckA11yIDs (the a11y contract, '*' families), ParseAdapterGates
//     (the platform gates a project's command prints), CompareImages and SnapshotStatus
//     (unchanged-render detection and the snapshot gate), combined by
//     AssembleGateResult. all_green is always derived from the gates, never read.
//   - ParseVerdict and NormalizeVerdict accept only a schema-exact verdict and replace
//     the judge's all_pass and failed_dimensions with values derived from its scores,
//     reporting (and letting the caller count) any disagreement.
//   - LoopState.Record, Unchanged and GateFail advance a view's streak, attempts and
//     freezes and return the Decision: sign off, budget spent, what to fix.
//   - NewSignOff and FoldFeatureStatus produce the sign-off record and the feature's
//     DONE / DONE_WITH_CONCERNS / BLOCKED / NEEDS_CONTEXT status.
//
// The JSON field names and enum values of spec.json, the verdict, the gate result,
// rubric.json, the loop state and the sign-off record are those of the Argus schemas,
// so documents written for Argus are read unchanged.
package argus
