package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// execArgusCmd runs a command in-process and returns its output and the exit code
// main would use (an exitError's code, 2 for any other error such as a missing flag).
func execArgusCmd(t *testing.T, cmd *cobra.Command, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.SetArgs(args)
	cmd.SetOut(&out)
	cmd.SetErr(&errb)
	cmd.SilenceUsage = true
	cmd.SilenceErrors = true
	err := cmd.Execute()
	code := 0
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.err != nil {
				errb.WriteString(ee.err.Error())
			}
		} else {
			code = 2
			errb.WriteString(err.Error())
		}
	}
	return out.String(), errb.String(), code
}

// cmdCase is one run of a command: its arguments, the exit code it must give and what
// its output must contain.
type cmdCase struct {
	name string
	args []string
	code int
	want []string
}

// runCmdCases runs each case on a fresh command from newCmd, as a subtest; an exit 2
// must come with a message.
func runCmdCases(t *testing.T, newCmd func() *cobra.Command, cases []cmdCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, errOut, code := execArgusCmd(t, newCmd(), c.args...)
			if code != c.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out, errOut)
			}
			for _, w := range c.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			if c.code == 2 && errOut == "" {
				t.Error("exit 2 without a message")
			}
		})
	}
}

func writeArgusFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

const contrastTokens = `{"colors":{
  "surface": {"light":"#FFFFFF","dark":"#000000"},
  "grey77":  {"light":"#777777","dark":"#777777"},
  "grey76":  {"light":"#767676","dark":"#767676"},
  "ink":     "#000"
}}`

type contrastJSON struct {
	Pairs []struct {
		FG, BG, Appearance, Status string
		Min, Ratio                 float64
	}
	Failures []json.RawMessage
	Pass     bool
}

func TestContrastCmd(t *testing.T) {
	dir := t.TempDir()
	tokens := writeArgusFile(t, dir, "tokens.json", contrastTokens)
	passing := writeArgusFile(t, dir, "pass.json", `{"pairs":[{"fg":"grey76","bg":"surface"},{"fg":"ink","bg":"surface","whitelist":["dark"]}]}`)
	failing := writeArgusFile(t, dir, "fail.json", `{"pairs":[{"fg":"grey77","bg":"surface"}]}`)
	whitelisted := writeArgusFile(t, dir, "wl.json", `{"pairs":[{"fg":"grey77","bg":"surface","whitelist":true}]}`)
	unknown := writeArgusFile(t, dir, "unknown.json", `{"pairs":[{"fg":"nope","bg":"surface"}]}`)
	broken := writeArgusFile(t, dir, "broken.json", `{"pairs":[`)

	runCmdCases(t, newContrastCmd, []cmdCase{
		{"all pass", []string{"--tokens", tokens, "--pairs", passing}, 0,
			[]string{"pass         grey76      surface     light       4.54   4.5", "whitelisted  ink         surface     dark        1.00   4.5", "contrast: PASS (4 measured, 0 failing)"}},
		{"#777777 fails 4.5", []string{"--tokens", tokens, "--pairs", failing}, 1, []string{"fail    grey77      surface     light       4.48   4.5", "pass    grey77      surface     dark        4.69   4.5", "contrast: FAIL (2 measured, 1 failing)"}},
		{"one appearance", []string{"--tokens", tokens, "--pairs", failing, "--appearances", "light"}, 1, []string{"(1 measured, 1 failing)"}},
		{"whitelist true", []string{"--tokens", tokens, "--pairs", whitelisted}, 0, []string{"whitelisted", "(2 measured, 0 failing)"}},
		{"unknown token", []string{"--tokens", tokens, "--pairs", unknown}, 2, nil},
		{"unknown appearance", []string{"--tokens", tokens, "--pairs", failing, "--appearances", "sepia"}, 2, nil},
		{"broken pairs", []string{"--tokens", tokens, "--pairs", broken}, 2, nil},
		{"missing file", []string{"--tokens", filepath.Join(dir, "absent.json"), "--pairs", passing}, 2, nil},
		{"missing flag", []string{"--tokens", tokens}, 2, nil},
	})
}

func TestContrastCmdJSON(t *testing.T) {
	dir := t.TempDir()
	tokens := writeArgusFile(t, dir, "tokens.json", contrastTokens)
	pairs := writeArgusFile(t, dir, "pairs.json", `{"pairs":[{"fg":"grey77","bg":"surface","min":4.48},{"fg":"grey76","bg":"surface","whitelist":["dark"]}]}`)
	out, _, code := execArgusCmd(t, newContrastCmd(), "--tokens", tokens, "--pairs", pairs, "--json", "--appearances", "light,dark")
	if code != 1 {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var rep contrastJSON
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.Pass || len(rep.Pairs) != 4 || len(rep.Failures) != 1 {
		t.Fatalf("%+v", rep)
	}
	// #777777 on white prints as 4.48 and still fails a 4.48 minimum: no rounding first.
	p := rep.Pairs[0]
	if p.FG != "grey77" || p.Appearance != "light" || p.Ratio != 4.48 || p.Min != 4.48 || p.Status != "fail" {
		t.Errorf("%+v", p)
	}
	if rep.Pairs[3].Status != "whitelisted" || rep.Pairs[3].Appearance != "dark" {
		t.Errorf("%+v", rep.Pairs[3])
	}
	for _, key := range []string{`"pairs"`, `"failures"`, `"pass"`, `"fg"`, `"bg"`, `"appearance"`, `"min"`, `"ratio"`, `"status"`} {
		if !strings.Contains(out, key) {
			t.Errorf("json lacks %s", key)
		}
	}
}

// TestContrastCmdExample: the example feature's palette passes.
func TestContrastCmdExample(t *testing.T) {
	dir := filepath.Join("..", "..", "examples", "rubric-feature")
	out, errOut, code := execArgusCmd(t, newContrastCmd(), "--tokens", filepath.Join(dir, "tokens.json"), "--pairs", filepath.Join(dir, "contrast-pairs.json"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
}
