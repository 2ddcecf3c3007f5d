package scripted

// The scripted judge finds the kinds' canned answers through pkg/judge, which the
// registry of kinds whole (pkg/registry) fills when it starts: the tests link it in, as
// every program does.
import _ "github.com/tribunal-dev/tribunal/pkg/registry"
