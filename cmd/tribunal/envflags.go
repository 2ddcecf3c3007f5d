package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
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
