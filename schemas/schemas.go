// Package schemas embeds the JSON Schemas of tribunal's input files so the binary
// validates exactly what the repository documents.
package schemas

import _ "embed"

// The batch file's schema, batch.schema.json, is not embedded: pkg/batch composes it from
// its common keys and the registered kinds' own (batch.Schema), and pkg/registry's test
// holds the file equal to what the kinds that ship compose.

// The Argus (rubric kind) schemas. spec, verdict and gate-result are the seed's own text
// (gate-result with one documented change: extra adapter gates); rubric is tribunal's,
// written from the seed's rubric.json.
var (
	//go:embed argus/spec.schema.json
	ArgusSpec []byte
	//go:embed argus/rubric.schema.json
	ArgusRubric []byte
	//go:embed argus/verdict.schema.json
	ArgusVerdict []byte
	//go:embed argus/gate-result.schema.json
	ArgusGateResult []byte
)
