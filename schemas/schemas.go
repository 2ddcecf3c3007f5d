// Package schemas embeds the JSON Schemas of tribunal's input files so the binary
// validates exactly what the repository documents.
package schemas

import _ "embed"

// Batch is the JSON Schema of a batch file.
//
//go:embed batch.schema.json
var Batch []byte
