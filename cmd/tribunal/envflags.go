package main

import (
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/agnivade/levenshtein"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
)

// Every flag of every command can also be set through an environment variable, so that a
// container or a systemd unit configures tribunal without a command line. The names are
// derived here, in one place, from the flag names (cobra and pflag have no environment
// support of their own; peterbourgon/ff works on the standard library's flag sets and
// viper keeps values beside the flags rather than in them): bindEnv names each flag's
// variables at start-up and writes them into its help, applyEnv sets the flags the
// command line left alone. The precedence is flag, then environment, then default.

// envPrefix starts every derived variable name.
const envPrefix = "TRIBUNAL_"

// envAnnotation is the pflag annotation that holds a flag's environment variables: the
// derived name first, then historical names still honoured.
const envAnnotation = "tribunal_env"

// envAliases are historical variable names that still set a flag, after the derived
// name. They predate the derived names; documented setups use them.
var envAliases = map[string][]string{
	"nats":            {"TRIBUNAL_NATS_URL"},
	"blob":            {"TRIBUNAL_BLOB_URL"},
	"health":          {"TRIBUNAL_HEALTH_ADDR"},
	"web-allow-host":  {"TRIBUNAL_WEB_ALLOW_HOSTS"},
	"openai-base-url": {"OPENAI_BASE_URL"},
	"serve tokens":    {"TRIBUNAL_CONSOLE_TOKENS"},
	// Seed 000's variable for its threshold.
	"cfn-ab-critic threshold": {"CFN_AB_CRITIC_THRESHOLD"},
}

// commandScoped are flags whose meaning differs between commands (`serve --tokens` is
// the console's token file, `contrast --tokens` a design-token file): their variable
// names the command as well, TRIBUNAL_<COMMAND>_<FLAG>, so that setting one for a
// deployment cannot change what another command does.
var commandScoped = map[string]bool{"out": true, "tokens": true, "listen": true}

// envVars are the variables of flag f of cmd, the derived name first.
func envVars(cmd *cobra.Command, f *pflag.Flag) []string {
	path := commandPath(cmd)
	name := f.Name
	if commandScoped[f.Name] && path != "" {
		name = path + "-" + f.Name
	}
	vars := []string{envPrefix + strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(name))}
	if a, ok := envAliases[path+" "+f.Name]; ok {
		return append(vars, a...)
	}
	return append(vars, envAliases[f.Name]...)
}

// commandPath is cmd's path below the root: "serve", "tenants".
func commandPath(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return ""
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}

// bindEnv names the variables of every flag of cmd and its subcommands and adds them to
// the flags' help ("[$TRIBUNAL_CONCURRENCY]"). Run it once the command tree is built.
func bindEnv(cmd *cobra.Command) {
	for _, fs := range []*pflag.FlagSet{cmd.PersistentFlags(), cmd.LocalNonPersistentFlags()} {
		fs.VisitAll(func(f *pflag.Flag) {
			if f.Name == "help" || f.Annotations[envAnnotation] != nil {
				return
			}
			vars := envVars(cmd, f)
			if f.Annotations == nil {
				f.Annotations = map[string][]string{}
			}
			f.Annotations[envAnnotation] = vars
			f.Usage += " [$" + strings.Join(vars, ", $") + "]"
		})
	}
	for _, c := range cmd.Commands() {
		bindEnv(c)
	}
}

// applyEnv sets every flag of cmd that the command line did not set from the first of
// its variables that is set and not empty. A value the flag cannot take is an error
// naming the variable.
func applyEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		vars := f.Annotations[envAnnotation]
		if err != nil || f.Changed || vars == nil {
			return
		}
		for _, name := range vars {
			v := os.Getenv(name)
			if v == "" {
				continue
			}
			if serr := setFromEnv(f, v); serr != nil {
				err = fmt.Errorf("%s=%q: invalid value for --%s: %w", name, v, f.Name, serr)
				return
			}
			f.Changed = true
			return
		}
	})
	return err
}

// setFromEnv sets f to v. A list flag takes a comma-separated list, and the variable
// replaces the default rather than adding to it, as a first use of the flag would.
func setFromEnv(f *pflag.Flag, v string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		return sv.Replace(splitList(v))
	}
	return f.Value.Set(v)
}

// otherEnv are the TRIBUNAL_ variables tribunal reads that are no flag's: secrets kept off
// the command line and the process's own settings. A name matching none of these, no
// flag's and no pattern of otherEnvPatterns is a typo, warned about (warnUnknownEnv).
var otherEnv = map[string]string{
	"TRIBUNAL_NATS_PASSWORD":       "the --nats-user's password",
	"TRIBUNAL_S3_ACCESS_KEY":       "the s3 blob store's access key",
	"TRIBUNAL_S3_SECRET_KEY":       "the s3 blob store's secret key",
	"TRIBUNAL_S3_SESSION_TOKEN":    "the s3 blob store's session token",
	"TRIBUNAL_AB_THRESHOLD":        "the ab threshold of a batch that sets none",
	web.EnvBrowser:                 "the Chromium binary the web sensor starts",
	"TRIBUNAL_CHROMIUM_NO_SANDBOX": "Chromium without its sandbox (containers)",
	// docker compose's own settings (.env.example), read by compose, not by tribunal.
	"TRIBUNAL_VERSION": "", "TRIBUNAL_BUCKET": "", "TRIBUNAL_TEAM": "", "TRIBUNAL_TEAM_TOKEN": "", "TRIBUNAL_CONSOLE_TOKEN": "",
}

// otherEnvPatterns are families of variables: each NATS user's password (tenants.PasswordEnv),
// compose's published ports, and the test suites' settings.
var otherEnvPatterns = []*regexp.Regexp{
	regexp.MustCompile(`^TRIBUNAL_NATS_[A-Z0-9_]+_PASSWORD$`),
	regexp.MustCompile(`^TRIBUNAL_[A-Z0-9_]*_PORT(_[0-9]+)?$`),
	regexp.MustCompile(`^TRIBUNAL_(TEST|LOADTEST|E2E)_`),
}

// knownEnv are the names of every flag's variables in the command tree of root.
func knownEnv(root *cobra.Command) map[string]bool {
	known := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.LocalNonPersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				for _, v := range f.Annotations[envAnnotation] {
					known[v] = true
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	for v := range otherEnv {
		known[v] = true
	}
	return known
}

// unknownEnv lists the TRIBUNAL_ variables of environ no command reads, each with the
// known name it probably misspells ("" when none is close).
func unknownEnv(root *cobra.Command, environ []string) [][2]string {
	known := knownEnv(root)
	names := make([]string, 0, len(known))
	for n := range known {
		names = append(names, n)
	}
	sort.Strings(names)
	var out [][2]string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix) || known[name] || slices.ContainsFunc(otherEnvPatterns, func(re *regexp.Regexp) bool { return re.MatchString(name) }) {
			continue
		}
		out = append(out, [2]string{name, closestName(name, names)})
	}
	return out
}

// warnUnknownEnv says, on standard error, which TRIBUNAL_ variables nothing reads: a typo
// there is otherwise ignored without a word.
func warnUnknownEnv(root *cobra.Command, w io.Writer) {
	for _, u := range unknownEnv(root, os.Environ()) {
		msg := "tribunal: warning: " + u[0] + " is set but no tribunal flag or setting reads it"
		if u[1] != "" {
			msg += " (did you mean " + u[1] + "?)"
		}
		fmt.Fprintln(w, msg)
	}
}

// closestName is the candidate name most likely meant by name, or "" when none is close:
// within a third of its length in edits (at least two, at most four).
func closestName(name string, candidates []string) string {
	best, bestDist := "", min(max(len(name)/3, 2), 4)+1
	for _, c := range candidates {
		if d := levenshtein.ComputeDistance(name, c); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best
}

// flagError adds to cobra's "unknown flag" the flag of the command that was probably
// meant: cobra suggests commands, not flags.
func flagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var name string
	switch {
	case strings.HasPrefix(msg, "unknown flag: --"):
		name = strings.TrimPrefix(msg, "unknown flag: --")
	default:
		return exitError{2, fmt.Errorf("%w\nsee `%s --help`", err, cmd.CommandPath())}
	}
	name, _, _ = strings.Cut(name, "=")
	var flags []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	cmd.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	if best := closestName(name, flags); best != "" {
		return exitError{2, fmt.Errorf("%w (did you mean --%s?)\nsee `%s --help`", err, best, cmd.CommandPath())}
	}
	return exitError{2, fmt.Errorf("%w\nsee `%s --help`", err, cmd.CommandPath())}
}
