package batch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/ab"
)

const validBatch = `# a comment first
version: 1
name: release-42
tenant: team-a
kind: ab
threshold: 0.8
iteration: 2
positions: swap
judges: [gpt-a, gpt-b]
verify: VERIFY.md
acs:
  - id: AC-1
    criterion: The release notes say what changed.
    ours: ours/notes.md
    reference: reference/notes.md
  - id: AC-7
    kind: ab
    criterion: The empty state offers one next step.
    ours: https://example.com/ours.html
    reference: reference/empty.html
    iteration: 0
    positions: single
    judges:
      - gpt-c
  - id: ac_lower-3
    ours: a.png
    reference: b.png
`

// entryPositions is the positions ac sets, ab's entry key (ab.Entry).
func entryPositions(ac AC) string {
	e, _ := ac.Part.(*ab.Entry)
	return ab.PositionsOf(e, nil)
}

func TestParseValidBatch(t *testing.T) {
	t.Parallel()
	path := filepath.Join("some", "dir", "batch.yaml")
	b, err := Parse(path, []byte(validBatch))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if b.Path != path || b.Dir != filepath.Join("some", "dir") {
		t.Errorf("Path, Dir = %q, %q", b.Path, b.Dir)
	}
	if b.Version != 1 || b.Name != "release-42" || b.Tenant != "team-a" || b.Kind != "ab" {
		t.Errorf("header = %+v", b.File)
	}
	// positions is ab's key (ab.Defaults, ab.Entry), which the kind hands to the format.
	d, _ := b.Part("ab").(*ab.Defaults)
	if b.Iteration != 2 || d == nil || d.Positions != "swap" || b.Verify != "VERIFY.md" {
		t.Errorf("Iteration, ab defaults, Verify = %d, %+v, %q", b.Iteration, d, b.Verify)
	}
	if strings.Join(b.Judges, ",") != "gpt-a,gpt-b" {
		t.Errorf("Judges = %q", b.Judges)
	}
	if len(b.Rejected) != 0 {
		t.Errorf("Rejected = %v", b.Rejected)
	}
	want := []struct {
		id, criterion, ours, reference, positions, judges string
		iteration                                         *int
		line                                              int
	}{
		{"AC-1", "The release notes say what changed.", "ours/notes.md", "reference/notes.md", "", "", nil, 12},
		{"AC-7", "The empty state offers one next step.", "https://example.com/ours.html", "reference/empty.html", "single", "gpt-c", intp(0), 16},
		{"ac_lower-3", "", "a.png", "b.png", "", "", nil, 25},
	}
	if len(b.ACs) != len(want) {
		t.Fatalf("%d ACs; want %d: %+v", len(b.ACs), len(want), b.ACs)
	}
	for i, w := range want {
		ac := b.ACs[i]
		if ac.ID != w.id || ac.Criterion != w.criterion || ac.Ours != w.ours || ac.Reference != w.reference || entryPositions(ac) != w.positions || strings.Join(ac.Judges(), ",") != w.judges {
			t.Errorf("ACs[%d] = %+v; want %+v", i, ac, w)
		}
		if (ac.Iteration() == nil) != (w.iteration == nil) || (ac.Iteration() != nil && *ac.Iteration() != *w.iteration) {
			t.Errorf("ACs[%d].Iteration() = %v; want %v (an explicit 0 must differ from unset)", i, ac.Iteration(), w.iteration)
		}
		if ac.Line != w.line {
			t.Errorf("ACs[%d].Line = %d; want %d", i, ac.Line, w.line)
		}
		if ac.Problem() != "" {
			t.Errorf("ACs[%d].Problem() = %q; want none", i, ac.Problem())
		}
	}
	if b.ACs[1].Kind != "ab" {
		t.Errorf("ACs[1].Kind = %q", b.ACs[1].Kind)
	}
}

func intp(i int) *int { return &i }

func TestLoadFolderAndFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, DefaultFile), []byte(validBatch), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, DefaultFile)} {
		b, err := Load(p)
		if err != nil {
			t.Fatalf("Load(%s): %v", p, err)
		}
		if b.Path != filepath.Join(dir, DefaultFile) || b.Dir != dir {
			t.Errorf("Load(%s): Path, Dir = %q, %q", p, b.Path, b.Dir)
		}
		if len(b.ACs) != 3 {
			t.Errorf("Load(%s): %d ACs", p, len(b.ACs))
		}
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); err == nil {
		t.Error("Load of a missing file succeeded")
	}
	if _, err := Load(t.TempDir()); err == nil {
		t.Error("Load of a folder without batch.yaml succeeded")
	}
}

// TestParseJudgeMode: a batch's judge_mode is read as written, empty when absent.
func TestParseJudgeMode(t *testing.T) {
	t.Parallel()
	for doc, want := range map[string]string{"version: 1\njudge_mode: batch\nacs:\n  - id: AC-1\n": "batch",
		"version: 1\njudge_mode: direct\nacs:\n  - id: AC-1\n": "direct", "version: 1\nacs:\n  - id: AC-1\n": ""} {
		b, err := Parse("b.yaml", []byte(doc))
		if err != nil || b.JudgeMode != want {
			t.Errorf("%q: judge_mode %q (%v), want %q", doc, b.JudgeMode, err, want)
		}
	}
}

// TestParseFileErrors: problems with the file as a whole stop it, and every error names
// the file, a line and the field.
func TestParseFileErrors(t *testing.T) {
	t.Parallel()
	const file = "teams/a/batch.yaml"
	tests := []struct {
		name  string
		doc   string
		line  int
		field string
		// msg is a substring of the error text.
		msg string
	}{
		{"YAML syntax error", "version: 1\nacs:\n  - id: AC-1\n    ours: [unclosed\n", 4, "", "not valid YAML"},
		{"bad indentation", "version: 1\nacs:\n  - id: AC-1\n   ours: x\n  bad\n", 0, "", "not valid YAML"},
		{"version 2", "version: 2\nacs:\n  - id: AC-1\n", 1, "version", "1"},
		{"unknown top-level key", "version: 1\nname: x\nbogus: 3\nacs:\n  - id: AC-1\n", 3, "bogus", "bogus"},
		{"version as string", "version: \"1\"\nacs:\n  - id: AC-1\n", 1, "version", ""},
		{"threshold above 1", "version: 1\nthreshold: 1.5\nacs:\n  - id: AC-1\n", 2, "threshold", "1.5"},
		{"threshold below 0", "version: 1\nname: x\nthreshold: -0.1\nacs:\n  - id: AC-1\n", 3, "threshold", ""},
		{"bad top-level positions", "version: 1\npositions: sideways\nacs:\n  - id: AC-1\n", 2, "positions", "single"},
		{"bad judge_mode", "version: 1\njudge_mode: later\nacs:\n  - id: AC-1\n", 2, "judge_mode", "batch"},
		{"auto_swap confidence above 1", "version: 1\npositions: auto\nauto_swap:\n  confidence: 80\nacs:\n  - id: AC-1\n", 4, "auto_swap.confidence", "80"},
		{"auto_swap unknown key", "version: 1\nauto_swap: {flips: 0.1}\nacs:\n  - id: AC-1\n", 2, "auto_swap.flips", "unknown key"},
		{"acs empty", "version: 1\nacs: []\n", 2, "acs", ""},
		{"acs not a list", "version: 1\nacs:\n  id: AC-1\n", 3, "acs", "array"},
		{"bad tenant", "version: 1\ntenant: Team A\nacs:\n  - id: AC-1\n", 2, "tenant", ""},
		{"judges not a list at top", "version: 1\njudges: gpt\nacs:\n  - id: AC-1\n", 2, "judges", ""},
		// Syntax errors point at the line to fix: yaml.v3 numbers its parser's errors from
		// zero and its scanner's from one; both must come out one-based.
		{"scanner error", "version: 1\nacs:\n  - id: @x\n", 3, "", "cannot start any token"},
		{"unclosed flow mapping", "version: 1\nacs:\n  - id: AC-1\n    ours: {a: 1\n    reference: r\n", 4, "", "',' or '}'"},
		{"entry without a colon", "version: 1\nacs:\n  - id: AC-1\n  bad\n  - id: AC-2\n", 4, "", "expected ':'"},
		{"tab indentation", "version: 1\n\tacs:\n", 2, "", "tab"},
		{"acs missing", "version: 1\nname: x\n", 1, "acs", "missing"},
		{"acs a scalar", "version: 1\nacs: AC-1\n", 2, "acs", "array"},
		{"document a list", "- id: AC-1\n", 1, "(document)", "mapping"},
		{"alias", "version: 1\nname: &n x\ntenant: *n\nacs:\n  - id: AC-1\n", 3, "tenant", "aliases"},
		{"repeated acs", "version: 1\nacs:\n  - id: AC-1\nacs:\n  - id: AC-2\n", 4, "acs", "repeated key (first at line 2)"},
		{"non-string key", "version: 1\n1: x\nacs:\n  - id: AC-1\n", 2, "", "plain strings"},
		{"merge key", "version: 1\n<<: {name: x}\nacs:\n  - id: AC-1\n", 2, "", "merge keys"},
		{"integer too large", "version: 1\niteration: 99999999999999999999\nacs:\n  - id: AC-1\n", 2, "iteration", ""},
		{"mis-indented line far below the list's start", longBatchWithBadIndent(1000), 2003, "", "not valid YAML"},
		{"bad line in a folded block", "version: 1\nacs:\n  - id: AC-1\n    criterion: >\n      abc\n     def: x\n  - id: AC-2\n", 6, "", "not valid YAML"},
		{"junk after a quoted string", "version: 1\nacs:\n  - id: AC-1\n    criterion: \"x\"y\n", 4, "", "not valid YAML"},
		{"error on the first line", "version: @1\nacs: []\n", 1, "", "cannot start any token"},
		{"invalid UTF-8", "version: 1\nacs:\n  - id: AC-1\n    criterion: \xff\n", 4, "", "UTF-8"},
		{"unknown anchor", "version: 1\nacs:\n  - id: AC-1\n    criterion: *x\n", 4, "", "aliases"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assertFileError(t, file, tt.doc, tt.line, tt.field, tt.msg)
		})
	}
}

// longBatchWithBadIndent is n good entries followed by a mis-indented line (at line
// 2n+3) and one more entry.
func longBatchWithBadIndent(n int) string {
	var sb strings.Builder
	sb.WriteString("version: 1\nacs:\n")
	for i := range n {
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: c\n", i)
	}
	sb.WriteString("   wrong: 1\n  - id: AC-x\n")
	return sb.String()
}

func assertFileError(t *testing.T, file, doc string, line int, field, msg string) {
	t.Helper()
	b, err := Parse(file, []byte(doc))
	if err == nil {
		t.Fatalf("Parse succeeded: %+v", b.File)
	}
	if b != nil {
		t.Errorf("Parse returned a batch with the error")
	}
	var es Errors
	if !errors.As(err, &es) || len(es) == 0 {
		t.Fatalf("err = %T %v; want batch.Errors", err, err)
	}
	text := err.Error()
	if !strings.Contains(text, file) {
		t.Errorf("error %q does not name the file", text)
	}
	if msg != "" && !strings.Contains(text, msg) {
		t.Errorf("error %q does not contain %q", text, msg)
	}
	var hit *Error
	for _, e := range es {
		if e.File != file {
			t.Errorf("Error.File = %q; want %q", e.File, file)
		}
		if field == "" || e.Field == field {
			hit = e
		}
	}
	if hit == nil {
		t.Fatalf("no error names field %q: %q", field, text)
	}
	if line > 0 && hit.Line != line {
		t.Errorf("error %q: Line = %d; want %d", hit, hit.Line, line)
	}
	if hit.Line <= 0 {
		t.Errorf("error %q has no line number", hit)
	}
	if hit.Line > 0 && !strings.Contains(text, file+":"+strconv.Itoa(hit.Line)) {
		t.Errorf("error text %q does not carry %s:%d", text, file, hit.Line)
	}
	if field != "" && !strings.Contains(hit.Error(), field) {
		t.Errorf("error %q does not name the field %q", hit, field)
	}
}

// parseAround parses a batch of three ACs whose middle entry is bad (YAML indented as a
// list item's fields, starting on line 6) and fails the test when the bad AC stops the
// whole batch.
func parseAround(t *testing.T, file, bad string) *Batch {
	t.Helper()
	doc := "version: 1\nacs:\n  - id: AC-1\n    ours: o/1.md\n    reference: r/1.md\n" + bad +
		"  - id: AC-3\n    ours: o/3.md\n    reference: r/3.md\n"
	b, err := Parse(file, []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v; a bad AC must not stop the batch", err)
	}
	return b
}

// TestParseACProblems: a bad field inside one AC costs only that AC. It is kept, with a
// Problem naming file, line and field; the other ACs load clean.
func TestParseACProblems(t *testing.T) {
	t.Parallel()
	const file = "b/batch.yaml"
	tests := []struct {
		name string
		// bad is the YAML of the middle entry (indented as a list item's fields).
		bad   string
		id    string
		field string
		// line is the line of the offending field (the entry starts on line 6).
		line int
		msg  string
	}{
		{"unknown key", "  - id: AC-2\n    colour: red\n", "AC-2", "unknown key colour", 7, "colour"},
		{"positions sideways", "  - id: AC-2\n    positions: sideways\n", "AC-2", "positions", 7, "swap"},
		{"judge name empty", "  - id: AC-2\n    judges: [\"\"]\n", "AC-2", "judges[0]", 7, ""},
		{"iteration negative", "  - id: AC-2\n    iteration: -1\n", "AC-2", "iteration", 7, ""},
		{"kind unknown", "  - id: AC-2\n    kind: no-such-kind\n", "AC-2", "kind", 7, ""},
		{"ours a number", "  - id: AC-2\n    ours: 12\n", "AC-2", "ours", 7, "string"},
		{"alias", "  - id: AC-2\n    ours: &o x\n    reference: *o\n", "AC-2", "reference", 8, "aliases"},
		{"repeated key", "  - id: AC-2\n    ours: a\n    ours: b\n", "AC-2", "ours", 8, "repeated key (first at line 7)"},
		{"non-string key", "  - id: AC-2\n    true: x\n", "AC-2", "true", 7, "plain strings"},
		{"tagged value", "  - id: AC-2\n    criterion: !!int x\n", "AC-2", "criterion", 7, "!!int"},
		{"custom tag", "  - id: AC-2\n    criterion: !shout x\n", "AC-2", "criterion", 7, "tag"},
		{"not a finite number", "  - id: AC-2\n    iteration: .inf\n", "AC-2", "iteration", 7, "finite"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := parseAround(t, file, tt.bad)
			if len(b.ACs) != 3 {
				t.Fatalf("%d ACs; want 3 (the bad one kept): %+v", len(b.ACs), b.ACs)
			}
			if len(b.Rejected) != 0 {
				t.Errorf("Rejected = %v", b.Rejected)
			}
			first, bad, last := b.ACs[0], b.ACs[1], b.ACs[2]
			if first.ID != "AC-1" || first.Problem() != "" || first.Ours != "o/1.md" || first.Reference != "r/1.md" || first.Line != 3 {
				t.Errorf("first AC = %+v; want clean AC-1 at line 3", first)
			}
			if last.ID != "AC-3" || last.Problem() != "" || last.Ours != "o/3.md" || last.Reference != "r/3.md" {
				t.Errorf("last AC = %+v; want clean AC-3", last)
			}
			if bad.ID != tt.id {
				t.Errorf("bad AC id = %q; want %q", bad.ID, tt.id)
			}
			if bad.Line != 6 {
				t.Errorf("bad AC Line = %d; want 6", bad.Line)
			}
			if bad.Problem() == "" {
				t.Fatal("bad AC has no Problem")
			}
			// Where and what, named by the AC: "AC-2: line 7: positions: ...".
			loc := "AC-2: line " + strconv.Itoa(tt.line) + ": " + tt.field
			if !strings.HasPrefix(bad.Problem(), loc) {
				t.Errorf("Problem = %q; want it to contain %q", bad.Problem(), loc)
			}
			if tt.msg != "" && !strings.Contains(bad.Problem(), tt.msg) {
				t.Errorf("Problem = %q; want it to contain %q", bad.Problem(), tt.msg)
			}
		})
	}
}

// TestBrokenEntryKeepsItsKind: a broken entry is blocked as the kind it names, so
// validate and the results call a broken equivalence AC equivalence, not the default ab;
// an entry whose kind is itself the problem falls back to the default.
func TestBrokenEntryKeepsItsKind(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ bad, kind string }{
		{"  - id: AC-2\n    kind: equivalence\n    candidat: c.md\n", "equivalence"},
		{"  - id: AC-2\n    kind: critic\n    colour: red\n", "critic"},
		{"  - id: AC-2\n    kind: equivalenc\n", ""},
		{"  - id: AC-2\n    colour: red\n", ""},
	} {
		b := parseAround(t, "b/batch.yaml", tt.bad)
		bad := b.ACs[1]
		if bad.Problem() == "" || bad.Kind != tt.kind {
			t.Errorf("%q: kind %q, problem %q; want kind %q and a problem", tt.bad, bad.Kind, bad.Problem(), tt.kind)
		}
	}
}

// TestParseRejected: entries that cannot be named go to Rejected with their line; the
// rest loads.
func TestParseRejected(t *testing.T) {
	t.Parallel()
	doc := `version: 1
acs:
  - id: AC-1
    ours: a.md
  - criterion: no id here
    ours: b.md
  - id: "bad id!"
  - id: AC-1
    ours: again.md
  - id: 42
  - id: ""
  - id: -leading-dash
  - id: AC-2
`
	b, err := Parse("x/batch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(b.ACs) != 2 || b.ACs[0].ID != "AC-1" || b.ACs[1].ID != "AC-2" {
		t.Fatalf("ACs = %+v; want AC-1, AC-2", b.ACs)
	}
	if b.ACs[0].Ours != "a.md" {
		t.Errorf("the first AC-1 must win over the duplicate: Ours = %q", b.ACs[0].Ours)
	}
	if b.ACs[1].Line != 13 {
		t.Errorf("AC-2 Line = %d; want 13", b.ACs[1].Line)
	}
	want := []struct {
		line  int
		field string
		msg   string
	}{
		{5, "acs[1].id", "missing or invalid id"},
		{7, "acs[2].id", "missing or invalid id"},
		{8, "acs[3].id", `duplicate id "AC-1" (first at line 3)`},
		{10, "acs[4].id", "missing or invalid id"},
		{11, "acs[5].id", "missing or invalid id"},
		{12, "acs[6].id", "missing or invalid id"},
	}
	if len(b.Rejected) != len(want) {
		t.Fatalf("Rejected = %v; want %d entries", b.Rejected, len(want))
	}
	for i, w := range want {
		r := b.Rejected[i]
		if r.File != "x/batch.yaml" || r.Line != w.line || r.Field != w.field || !strings.Contains(r.Msg, w.msg) {
			t.Errorf("Rejected[%d] = %q; want line %d field %s msg %q", i, r, w.line, w.field, w.msg)
		}
	}
}

// TestParseDuplicateID: a schema-clean file whose ids repeat keeps the first.
func TestParseDuplicateID(t *testing.T) {
	t.Parallel()
	doc := "version: 1\nacs:\n  - id: AC-1\n    ours: first.md\n  - id: AC-2\n  - id: AC-1\n    ours: second.md\n"
	b, err := Parse("batch.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(b.ACs) != 2 || b.ACs[0].ID != "AC-1" || b.ACs[0].Ours != "first.md" || b.ACs[1].ID != "AC-2" {
		t.Errorf("ACs = %+v", b.ACs)
	}
	if len(b.Rejected) != 1 {
		t.Fatalf("Rejected = %v; want the duplicate", b.Rejected)
	}
	r := b.Rejected[0]
	if r.Line != 6 || r.Field != "acs[2].id" || !strings.Contains(r.Msg, "duplicate") || !strings.Contains(r.Msg, "line 3") {
		t.Errorf("Rejected[0] = %q; want the duplicate at line 6 naming line 3", r)
	}
	if !strings.Contains(r.Error(), "batch.yaml:6: acs[2].id:") {
		t.Errorf("Error() = %q", r.Error())
	}
}

func TestParseNoUsableACs(t *testing.T) {
	t.Parallel()
	doc := "version: 1\nacs:\n  - id: \"no good\"\n  - criterion: nothing\n"
	_, err := Parse("batch.yaml", []byte(doc))
	var es Errors
	if !errors.As(err, &es) {
		t.Fatalf("err = %v; want batch.Errors", err)
	}
	if es[0].Field != "acs" || !strings.Contains(es[0].Msg, "no usable AC") {
		t.Errorf("first error = %q", es[0])
	}
	if len(es) != 3 {
		t.Errorf("want the two rejected entries listed too: %v", err)
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	tests := []struct {
		e    Error
		want string
	}{
		{Error{File: "b.yaml", Line: 3, Field: "acs[0].id", Msg: "bad"}, "b.yaml:3: acs[0].id: bad"},
		{Error{File: "b.yaml", Field: "acs", Msg: "bad"}, "b.yaml: acs: bad"},
		{Error{File: "b.yaml", Line: 2, Msg: "bad"}, "b.yaml:2: bad"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q; want %q", got, tt.want)
		}
	}
	es := Errors{&tests[0].e, &tests[1].e}
	if got := es.Error(); got != "b.yaml:3: acs[0].id: bad\nb.yaml: acs: bad" {
		t.Errorf("Errors.Error() = %q", got)
	}
}

func TestLocalPath(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dir := filepath.Join(root, "batch")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(dir, "ours", "sub"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p string) {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(dir, "ours", "a.md"))
	write(filepath.Join(outside, "secret.txt"))
	mustSymlink := func(target, link string) {
		if err := os.Symlink(target, link); err != nil {
			t.Skipf("symlinks unavailable: %v", err)
		}
	}
	mustSymlink(filepath.Join(outside, "secret.txt"), filepath.Join(dir, "ours", "leak.md"))
	mustSymlink(outside, filepath.Join(dir, "outdir"))
	mustSymlink(filepath.Join(dir, "ours", "a.md"), filepath.Join(dir, "alias.md"))
	mustSymlink("../../../outside/secret.txt", filepath.Join(dir, "ours", "sub", "rel-leak.md"))

	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	b := &Batch{Path: filepath.Join(dir, DefaultFile), Dir: dir}

	tests := []struct {
		name string
		p    string
		// want is the resolved path when allowed (relative to realDir), "" when refused.
		want string
	}{
		{"relative inside", "ours/a.md", "ours/a.md"},
		{"relative with dot", "./ours/a.md", "ours/a.md"},
		{"inside after ..", "ours/sub/../a.md", "ours/a.md"},
		{"not yet existing inside", "ours/new.md", "ours/new.md"},
		{"name starting with dots", "..notes.md", "..notes.md"},
		{"absolute inside", filepath.Join(dir, "ours", "a.md"), "ours/a.md"},
		{"symlink inside to inside", "alias.md", "ours/a.md"},
		{"parent escape", "../outside/secret.txt", ""},
		{"bare parent", "..", ""},
		{"deep escape", "ours/../../outside/secret.txt", ""},
		{"many parents", "../../../../../../etc/passwd", ""},
		{"absolute outside", filepath.Join(outside, "secret.txt"), ""},
		{"absolute root file", "/etc/passwd", ""},
		{"symlinked file pointing outside", "ours/leak.md", ""},
		{"relative symlink pointing outside", "ours/sub/rel-leak.md", ""},
		{"file under symlinked dir pointing outside", "outdir/secret.txt", ""},
		{"symlinked dir pointing outside", "outdir", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := b.LocalPath(tt.p, false)
			if tt.want == "" {
				if err == nil {
					t.Fatalf("LocalPath(%q) = %q; want refused", tt.p, got)
				}
				if !strings.Contains(err.Error(), "outside the batch folder") || !strings.Contains(err.Error(), tt.p) {
					t.Errorf("error %q should say the path %q is outside the batch folder", err, tt.p)
				}
			} else {
				if err != nil {
					t.Fatalf("LocalPath(%q): %v", tt.p, err)
				}
				if want := filepath.Join(realDir, tt.want); got != want {
					t.Errorf("LocalPath(%q) = %q; want %q", tt.p, got, want)
				}
			}
			// allowOutside accepts everything, resolved lexically against the folder.
			got, err = b.LocalPath(tt.p, true)
			if err != nil {
				t.Fatalf("LocalPath(%q, allowOutside): %v", tt.p, err)
			}
			want := tt.p
			if !filepath.IsAbs(want) {
				want = filepath.Join(dir, want)
			}
			if got != filepath.Clean(want) {
				t.Errorf("LocalPath(%q, allowOutside) = %q; want %q", tt.p, got, filepath.Clean(want))
			}
		})
	}
}

// TestLocalPathRelativeDir: a batch loaded by a relative path still confines correctly.
func TestLocalPathRelativeDir(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "b", "ours"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	b := &Batch{Path: filepath.Join("b", DefaultFile), Dir: "b"}
	got, err := b.LocalPath("ours/x.md", false)
	if err != nil {
		t.Fatalf("LocalPath: %v", err)
	}
	if !filepath.IsAbs(got) || !strings.HasSuffix(got, filepath.Join("b", "ours", "x.md")) {
		t.Errorf("LocalPath = %q; want an absolute path ending b/ours/x.md", got)
	}
	if _, err := b.LocalPath("../b2/x.md", false); err == nil {
		t.Error("a sibling folder sharing the name prefix was allowed")
	}
}

func TestIsURL(t *testing.T) {
	t.Parallel()
	tests := map[string]bool{
		"https://example.com/a.html": true,
		"http://example.com":         true,
		"ftp://example.com/a":        false,
		"ours/a.html":                false,
		"/abs/a.html":                false,
		"http://":                    false,
		"file:///etc/passwd":         false,
		"C:/x.html":                  false,
	}
	for in, want := range tests {
		if got := IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v; want %v", in, got, want)
		}
	}
}

// benchBatch is a batch file of n ab entries shaped like the load command's.
func benchBatch(n int) []byte {
	var sb strings.Builder
	sb.WriteString("version: 1\nname: bench\nacs:\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&sb, "  - id: AC-%d\n    criterion: generated\n    ours: %d/ours-%d.md\n    reference: %d/ref-%d.md\n", i, i%100, i, i%100, i)
	}
	return []byte(sb.String())
}

// BenchmarkParse measures the batch parser, whose memory was once the peak of a
// 100,000-AC all-in-one run (docs/benchmarks.md). B/op is what it allocates in total;
// the tree it keeps at once is smaller, as entries are dropped once decoded.
func BenchmarkParse(b *testing.B) {
	for _, n := range []int{1_000, 100_000} {
		data := benchBatch(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				bt, err := Parse("bench/batch.yaml", data)
				if err != nil || len(bt.ACs) != n {
					b.Fatalf("Parse: %v", err)
				}
			}
		})
	}
}

// TestSelectACs pins the seed's `--ac id,id,...` ("Comma-separated AC ids"): a run
// judges only the named ACs of the batch, and naming one the batch lacks is a usage
// error rather than a smaller run.
func TestSelectACs(t *testing.T) {
	t.Parallel()
	mk := func() *Batch {
		return &Batch{Path: "batch.yaml", File: File{ACs: []AC{{ID: "AC-7"}, {ID: "AC-8"}, {ID: "AC-12"}}},
			Rejected: []*Error{{File: "batch.yaml", Line: 9, Msg: "no id"}}}
	}
	for _, tc := range []struct {
		name    string
		ids     []string
		want    string
		wantErr string
	}{
		{"two of three, batch order", []string{"AC-12", "AC-7"}, "AC-7,AC-12", ""},
		{"spaces around ids", []string{" AC-8 "}, "AC-8", ""},
		{"unknown id", []string{"AC-7", "AC-99"}, "", "--ac AC-99: no such AC"},
		{"nothing named", []string{""}, "", "names no AC"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := mk()
			err := b.Select(tc.ids, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Select = %v, want %q", err, tc.wantErr)
				}
				return
			}
			var got []string
			for _, ac := range b.ACs {
				got = append(got, ac.ID)
			}
			if err != nil || strings.Join(got, ",") != tc.want || len(b.Rejected) != 0 {
				t.Fatalf("Select = %v, %q (rejected %d), want %q", err, got, len(b.Rejected), tc.want)
			}
		})
	}
}

// An AC's Index is its place in the file's acs list, skipped entries counted, so that a
// message naming acs[i] points at the entry a person finds there.
func TestACIndexCountsSkippedEntries(t *testing.T) {
	b, err := Parse("batch.yaml", []byte("version: 1\nacs:\n  - id: AC-1\n  - criterion: no id\n  - id: AC-1\n  - id: AC-4\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(b.ACs) != 2 || b.ACs[0].Index != 0 || b.ACs[1].ID != "AC-4" || b.ACs[1].Index != 3 {
		t.Fatalf("ACs %+v", b.ACs)
	}
}
