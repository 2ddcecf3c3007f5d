package calibration_test

// The shipped set's positions are ab's own batch key (pkg/kind/ab/stages, stage.Keyed):
// the registry hands the kinds' keys to the batch format, so the set's entries parse as
// ab entries here as they do in tribunal calibrate. The internal tests cannot import it
// (pkg/kind/ab/stages imports this package).
import _ "github.com/tribunal-dev/tribunal/pkg/registry"
