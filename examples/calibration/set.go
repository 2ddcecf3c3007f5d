// Package calibrationset embeds the calibration set shipped in this folder, so that
// `tribunal calibrate` finds it from the binary when it runs outside a checkout (an
// installed binary, a container). The folder stays the set's source: the files are read
// from here at build time.
package calibrationset

import "embed"

// Files are the set: batch.yaml, expectations.yaml, thresholds.yaml, answers.json and the
// texts the batch names.
//
//go:embed batch.yaml expectations.yaml thresholds.yaml answers.json texts
var Files embed.FS
