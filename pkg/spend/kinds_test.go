package spend_test

// A job's ask comes from its kind (kind.Spending), which the registry points the
// allowance at when a program starts.
import _ "github.com/tribunal-dev/tribunal/pkg/registry"
