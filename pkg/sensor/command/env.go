package command

import (
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
)

// inheritedEnv are the variables every adapter gets from its service's environment. The
// renderer and the gater hold credentials (storage, bus, model providers) that an
// adapter, which may build and run a team's code, has no business seeing; PassEnv names
// what a recipe needs beyond these (the seed's iOS recipe: ARGUS_SIM_UDID,
// SIMCTL_CHILD_*).
var inheritedEnv = []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR", "USER"}

// passEnvName is one PassEnv entry: a variable name, or a prefix of at least one
// character followed by '*'.
var passEnvName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*\*?$`)

// CheckPassEnv refuses a PassEnv entry that is not a variable name or a name prefix
// ending in '*'. A lone '*' is refused: it would hand an adapter the service's every
// credential, which is what the minimal environment is for.
func CheckPassEnv(names []string) error {
	for _, n := range names {
		if !passEnvName.MatchString(n) {
			return fmt.Errorf("adapter environment %q: want a variable name (ARGUS_SIM_UDID) or a prefix ending in '*' (SIMCTL_CHILD_*); a lone '*' would pass every variable", n)
		}
	}
	return nil
}

// Environ is an adapter's environment: the inherited variables, those of the current
// environment that pass names (a name exactly, or a prefix ending in '*'), then extra
// (KEY=VALUE entries, which win). pass is assumed checked (CheckPassEnv). The order is
// fixed, so two runs of one configuration see the same environment.
func Environ(pass, extra []string) []string {
	var env []string
	seen := map[string]bool{}
	add := func(k, v string) {
		if !seen[k] {
			seen[k] = true
			env = append(env, k+"="+v)
		}
	}
	for _, k := range inheritedEnv {
		if v, ok := os.LookupEnv(k); ok {
			add(k, v)
		}
	}
	if len(pass) > 0 {
		current := os.Environ()
		sort.Strings(current)
		for _, kv := range current {
			k, v, ok := strings.Cut(kv, "=")
			if ok && k != "" && passes(pass, k) {
				add(k, v)
			}
		}
	}
	return append(env, extra...)
}

// passes reports whether variable k is named by pass.
func passes(pass []string, k string) bool {
	for _, p := range pass {
		if prefix, ok := strings.CutSuffix(p, "*"); ok {
			if strings.HasPrefix(k, prefix) {
				return true
			}
		} else if k == p {
			return true
		}
	}
	return false
}
