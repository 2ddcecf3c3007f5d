package verdicts

// The kinds grade their own rows (kind.Grading), found through the registry, which a
// program registers at start.
import _ "github.com/tribunal-dev/tribunal/pkg/registry"
