package main

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/cireport"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// ciFlags are the outputs a pipeline reads from `tribunal run` and `tribunal results`:
// JUnit XML, a Markdown summary (also GitHub's step summary), GitHub annotations, and the
// --fail-on policy that sets the exit code.
type ciFlags struct {
	junit, markdown string
	failOn          []string
	github          string
	pages           string

	policy verdicts.Policy
}

// defaultPages is where `tribunal view` serves the console by default.
const defaultPages = "http://127.0.0.1:8090"

func (c *ciFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&c.junit, "junit", "", "also write the results as JUnit XML to this file: one test case per AC, findings failing under --fail-on as failures, blocked ACs and schema violations as errors")
	fs.StringVar(&c.markdown, "markdown", "", "also write a Markdown summary to this file (appended to $GITHUB_STEP_SUMMARY as well when that is set)")
	fs.StringSliceVar(&c.failOn, "fail-on", nil, "exit non-zero only for ACs of these grades: "+verdicts.PolicyValues+" (default: the batch's exit code)")
	fs.StringVar(&c.github, "github", "auto", "GitHub Actions annotations (::error/::warning per AC not clean) and step summary: auto (when GITHUB_ACTIONS=true), always or never")
	fs.StringVar(&c.pages, "pages", defaultPages, "where the ACs' pages are, for the links in JUnit, Markdown and annotations: the console's URL, or the folder `tribunal view --export` wrote")
}

// check parses the policy and the choices, before anything runs.
func (c *ciFlags) check() error {
	p, err := verdicts.ParsePolicy(c.failOn)
	if err != nil {
		return err
	}
	c.policy = p
	switch c.github {
	case "auto", "always", "never":
	default:
		return fmt.Errorf("--github %q: want auto, always or never", c.github)
	}
	return nil
}

// onGitHub reports whether annotations and the step summary are written.
func (c *ciFlags) onGitHub() bool {
	return c.github == "always" || c.github == "auto" && os.Getenv("GITHUB_ACTIONS") == "true"
}

// pageOf is the link to an AC's page: under the console's URL, or the file of an exported
// site (console.ExportPath names it).
func pageOf(base, tenant, batchID, ac string) string {
	p := "/t/" + tenant + "/b/" + batchID + "/j/" + ac
	if u, err := url.Parse(base); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
		return strings.TrimSuffix(base, "/") + p
	}
	return filepath.ToSlash(filepath.Join(base, filepath.FromSlash(console.ExportPath(p))))
}

// artifactPaths are the ACs' own artifacts (ours, the critic's output file, the
// equivalence candidate, the rubric spec) as paths relative to the current folder, for
// annotations on the file; b may be nil (results read from the state whose batch file
// is gone).
func artifactPaths(b *batch.Batch) map[string]string {
	out := map[string]string{}
	if b == nil {
		return out
	}
	wd, _ := os.Getwd()
	for _, ac := range b.ACs {
		for _, p := range ac.Artifacts() {
			if p == "" || batch.IsURL(p) {
				continue
			}
			abs, err := filepath.Abs(filepath.Join(b.Dir, p))
			if err != nil {
				continue
			}
			if rel, err := filepath.Rel(wd, abs); err == nil {
				out[ac.ID] = filepath.ToSlash(rel)
			}
			break
		}
	}
	return out
}

// options are the report options for res.
func (c *ciFlags) options(res *client.Results, arts map[string]string) cireport.Options {
	return cireport.Options{
		Policy: c.policy,
		Page:   func(ac string) string { return pageOf(c.pages, res.Tenant, res.BatchID, ac) },
		Artifact: func(ac string) string {
			if p, ok := arts[ac]; ok {
				return p
			}
			// A rubric view's job id is "<AC>--<view>".
			if id, _, ok := strings.Cut(ac, "--"); ok {
				return arts[id]
			}
			return ""
		},
	}
}

// write writes the outputs asked for; annotations go to w (standard output, or standard
// error when it carries JSON), which GitHub reads for workflow commands.
func (c *ciFlags) write(w io.Writer, res *client.Results, b *batch.Batch) error {
	if c == nil {
		return nil
	}
	o := c.options(res, artifactPaths(b))
	if c.junit != "" {
		if err := writeFile(c.junit, func(f io.Writer) error { return cireport.WriteJUnit(f, res, o) }); err != nil {
			return fmt.Errorf("--junit: %w", err)
		}
	}
	if c.markdown != "" {
		if err := writeFile(c.markdown, func(f io.Writer) error { return cireport.WriteMarkdown(f, res, o) }); err != nil {
			return fmt.Errorf("--markdown: %w", err)
		}
	}
	if !c.onGitHub() {
		return nil
	}
	if err := cireport.WriteAnnotations(w, res, o); err != nil {
		return err
	}
	if p := os.Getenv("GITHUB_STEP_SUMMARY"); p != "" {
		// GitHub gives each step its own file and shows what the step appended to it.
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY: %w", err)
		}
		if err := cireport.WriteMarkdown(f, res, o); err != nil {
			f.Close()
			return fmt.Errorf("GITHUB_STEP_SUMMARY %s: %w", p, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("GITHUB_STEP_SUMMARY %s: %w", p, err)
		}
	}
	return nil
}

// exitCode is the code the command ends with: the batch's, or the policy's.
func (c *ciFlags) exitCode(res *client.Results) int {
	if c == nil {
		return res.Summary.ExitCode
	}
	return c.policy.ExitCode(res.Rows, res.Summary.ExitCode)
}

// writeFile writes a file through fn, creating its folder.
func writeFile(path string, fn func(io.Writer) error) error {
	if dir := filepath.Dir(path); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := fn(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// annotationsTo is where GitHub annotations are written: standard output, which GitHub
// reads for workflow commands, unless it carries JSON; then standard error, which the
// runner reads for them too.
func annotationsTo(asJSON bool) io.Writer {
	if asJSON {
		return os.Stderr
	}
	return os.Stdout
}
