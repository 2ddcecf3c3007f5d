package main

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

var updateREADME = flag.Bool("update-readme", false, "rewrite README.md's configuration table from the flags")

// eachFlag calls fn with every flag of every command below root, root's own included,
// once per command that has it.
func eachFlag(root *cobra.Command, fn func(cmd *cobra.Command, f *pflag.Flag)) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.PersistentFlags(), c.LocalNonPersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if f.Name != "help" {
					fn(c, f)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// TestEveryFlagHasAnEnvironmentVariable: every flag of every command is named in the
// environment, in its help too, and one variable never means two kinds of value.
func TestEveryFlagHasAnEnvironmentVariable(t *testing.T) {
	root := newRoot()
	types := map[string]string{}
	n := 0
	eachFlag(root, func(cmd *cobra.Command, f *pflag.Flag) {
		n++
		where := cmd.CommandPath() + " --" + f.Name
		vars := f.Annotations[envAnnotation]
		if len(vars) == 0 {
			t.Errorf("%s has no environment variable", where)
			return
		}
		want := "TRIBUNAL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if commandScoped[f.Name] {
			want = "TRIBUNAL_" + strings.ToUpper(strings.NewReplacer("-", "_", " ", "_").Replace(commandPath(cmd)+"_"+f.Name))
		}
		if vars[0] != want {
			t.Errorf("%s: variable %s, want %s", where, vars[0], want)
		}
		if !strings.Contains(f.Usage, "[$"+vars[0]) {
			t.Errorf("%s: help %q does not name $%s", where, f.Usage, vars[0])
		}
		for _, v := range vars {
			if prev, ok := types[v]; ok && prev != f.Value.Type() {
				t.Errorf("$%s sets a %s (%s) and a %s elsewhere", v, f.Value.Type(), where, prev)
			}
			types[v] = f.Value.Type()
		}
	})
	if n < 100 {
		t.Fatalf("walked only %d flags", n)
	}
	// Within one command, no two flags share a variable.
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		seen := map[string]string{}
		c.Flags().VisitAll(func(f *pflag.Flag) {
			for _, v := range f.Annotations[envAnnotation] {
				if other, dup := seen[v]; dup {
					t.Errorf("%s: --%s and --%s share $%s", c.CommandPath(), other, f.Name, v)
				}
				seen[v] = f.Name
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// parsed builds the command tree and parses args for the command at path, the way
// cobra does before running it, then applies the environment.
func parsed(t *testing.T, path []string, args ...string) (*cobra.Command, error) {
	t.Helper()
	root := newRoot()
	cmd, _, err := root.Find(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return cmd, applyEnv(cmd)
}

func TestEnvironmentPrecedence(t *testing.T) {
	get := func(t *testing.T, cmd *cobra.Command, name string) string {
		t.Helper()
		f := cmd.Flags().Lookup(name)
		if f == nil {
			t.Fatalf("no flag --%s", name)
		}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			return strings.Join(sv.GetSlice(), ",")
		}
		return f.Value.String()
	}
	t.Run("default", func(t *testing.T) {
		cmd, err := parsed(t, []string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, cmd, "concurrency"); got != "64" {
			t.Errorf("concurrency %s, want the default 64", got)
		}
	})
	t.Run("environment over default", func(t *testing.T) {
		t.Setenv("TRIBUNAL_CONCURRENCY", "7")
		t.Setenv("TRIBUNAL_JUDGE_TIMEOUT", "3s")
		t.Setenv("TRIBUNAL_SCRIPTED_CRITIC", "1,2,3") // a kind's fixture flag (kind.Fixtured) is a string the kind reads
		t.Setenv("TRIBUNAL_GATES_ADAPTER", "a=/x.sh,b=/y.sh")
		t.Setenv("TRIBUNAL_TENANTS", "team-a, team-b")
		t.Setenv("TRIBUNAL_LOG_LEVEL", "debug")
		cmd, err := parsed(t, []string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"concurrency": "7", "judge-timeout": "3s", "scripted-critic": "1,2,3",
			"gates-adapter": "a=/x.sh,b=/y.sh", "tenants": "team-a,team-b", "log-level": "debug"} {
			if got := get(t, cmd, name); got != want {
				t.Errorf("--%s = %q, want %q", name, got, want)
			}
		}
	})
	t.Run("flag over environment", func(t *testing.T) {
		t.Setenv("TRIBUNAL_CONCURRENCY", "7")
		t.Setenv("TRIBUNAL_TENANTS", "team-a")
		cmd, err := parsed(t, []string{"serve"}, "--concurrency", "9", "--tenants", "team-c")
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, cmd, "concurrency"); got != "9" {
			t.Errorf("concurrency %s, want the flag's 9", got)
		}
		if got := get(t, cmd, "tenants"); got != "team-c" {
			t.Errorf("tenants %s, want the flag's team-c", got)
		}
	})
	t.Run("historical names", func(t *testing.T) {
		t.Setenv("TRIBUNAL_NATS_URL", "nats://old:4222")
		t.Setenv("TRIBUNAL_HEALTH_ADDR", ":9999")
		t.Setenv("TRIBUNAL_CONSOLE_TOKENS", "/etc/tokens.json")
		t.Setenv("OPENAI_BASE_URL", "http://old/v1")
		cmd, err := parsed(t, []string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		for name, want := range map[string]string{"nats": "nats://old:4222", "health": ":9999", "tokens": "/etc/tokens.json", "openai-base-url": "http://old/v1"} {
			if got := get(t, cmd, name); got != want {
				t.Errorf("--%s = %q, want %q", name, got, want)
			}
		}
		// The derived name wins over the historical one.
		t.Setenv("TRIBUNAL_OPENAI_BASE_URL", "http://new/v1")
		cmd, err = parsed(t, []string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, cmd, "openai-base-url"); got != "http://new/v1" {
			t.Errorf("openai-base-url %q, want the derived variable's", got)
		}
	})
	t.Run("command-scoped names", func(t *testing.T) {
		t.Setenv("TRIBUNAL_CONTRAST_TOKENS", "tokens.json")
		cmd, err := parsed(t, []string{"serve"})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, cmd, "tokens"); got != "" {
			t.Errorf("serve --tokens = %q from contrast's variable", got)
		}
		cmd, err = parsed(t, []string{"contrast"})
		if err != nil {
			t.Fatal(err)
		}
		if got := get(t, cmd, "tokens"); got != "tokens.json" {
			t.Errorf("contrast --tokens = %q", got)
		}
	})
	t.Run("required flag from the environment", func(t *testing.T) {
		t.Setenv("TRIBUNAL_BATCH", "b-1")
		cmd, err := parsed(t, []string{"results"})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ValidateRequiredFlags(); err != nil {
			t.Errorf("--batch from $TRIBUNAL_BATCH: %v", err)
		}
	})
	t.Run("invalid value names the variable", func(t *testing.T) {
		t.Setenv("TRIBUNAL_JUDGE_CONCURRENCY", "lots")
		_, err := parsed(t, []string{"run"})
		if err == nil || !strings.Contains(err.Error(), `TRIBUNAL_JUDGE_CONCURRENCY="lots"`) || !strings.Contains(err.Error(), "--judge-concurrency") {
			t.Fatalf("err %v, want one naming TRIBUNAL_JUDGE_CONCURRENCY and --judge-concurrency", err)
		}
	})
}

// TestEnvironmentThroughTheBinary runs the real command: a variable that had no flag
// binding before (the scripted critic scores) changes the verdict, and a bad value stops
// the command with exit 2 before any work.
func TestEnvironmentThroughTheBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quickstart batch")
	}
	cmd := []string{"run", "examples/quickstart", "--out", t.TempDir(), "-q"}
	t.Setenv("TRIBUNAL_SCRIPTED_CRITIC", "2,8,2")
	stdout, stderr, code := run(t, repoRoot(t), cmd...)
	if code != 1 || !regexp.MustCompile(`AC-11\s+critic\s+compared\s+reject \(2\)`).MatchString(stdout) {
		t.Fatalf("exit %d, want 1 with AC-11 rejected at quality 2 by $TRIBUNAL_SCRIPTED_CRITIC\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	t.Setenv("TRIBUNAL_CONCURRENCY", "many")
	stdout, stderr, code = run(t, repoRoot(t), cmd...)
	if code != 2 || !strings.Contains(stderr, `TRIBUNAL_CONCURRENCY="many": invalid value for --concurrency`) || stdout != "" {
		t.Fatalf("exit %d, want 2 naming the variable\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
}

const (
	tableBegin = "<!-- flags table: generated from the flags by TestREADMEConfigurationTable; go test ./cmd/tribunal -run TestREADMEConfigurationTable -update-readme -->"
	tableEnd   = "<!-- end of flags table -->"
)

// configurationTable is README.md's table of every flag and its variables: one row per
// variable and meaning, with the commands that have it.
func configurationTable(root *cobra.Command) string {
	type row struct {
		first, vars, flag, meaning string
		commands                   []string
	}
	var rows []*row
	byKey := map[string]*row{}
	eachFlag(root, func(cmd *cobra.Command, f *pflag.Flag) {
		vars := f.Annotations[envAnnotation]
		meaning := strings.TrimSpace(strings.TrimSuffix(f.Usage, " [$"+strings.Join(vars, ", $")+"]"))
		key := strings.Join(vars, ",") + "\x00" + meaning
		r := byKey[key]
		if r == nil {
			flagText := "`--" + f.Name + "`"
			if f.Shorthand != "" {
				flagText = "`-" + f.Shorthand + "`, " + flagText
			}
			r = &row{first: vars[0], vars: "`" + strings.Join(vars, "`, `") + "`", flag: flagText, meaning: meaning}
			byKey[key] = r
			rows = append(rows, r)
		}
		name := commandPath(cmd)
		if name == "" {
			name = "every command"
		}
		r.commands = append(r.commands, name)
	})
	sort.SliceStable(rows, func(i, j int) bool { return rows[i].first < rows[j].first })
	esc := strings.NewReplacer("|", `\|`, "<", "&lt;", ">", "&gt;")
	var b strings.Builder
	b.WriteString("| variable | flag | commands | meaning |\n|---|---|---|---|\n")
	for _, r := range rows {
		b.WriteString("| " + r.vars + " | " + r.flag + " | " + strings.Join(r.commands, ", ") + " | " + esc.Replace(r.meaning) + " |\n")
	}
	return b.String()
}

// TestREADMEConfigurationTable keeps README.md's configuration table true: every flag
// and its variables are in it, and nothing else is.
func TestREADMEConfigurationTable(t *testing.T) {
	path := filepath.Join(repoRoot(t), "README.md")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(data)
	begin, end := strings.Index(readme, tableBegin), strings.Index(readme, tableEnd)
	if begin < 0 || end < begin {
		t.Fatalf("README.md has no generated flags table between %q and %q", tableBegin, tableEnd)
	}
	want := configurationTable(newRoot())
	got := readme[begin+len(tableBegin)+1 : end]
	if got == want {
		return
	}
	if *updateREADME {
		if err := os.WriteFile(path, []byte(readme[:begin+len(tableBegin)+1]+want+readme[end:]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("README.md's configuration table is stale; regenerate it with\n  go test ./cmd/tribunal -run TestREADMEConfigurationTable -update-readme\nwant:\n%s", want)
}
