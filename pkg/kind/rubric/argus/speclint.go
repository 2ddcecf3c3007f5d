package argus

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// slugRE is the shape of feature and target ids: they become folder and file names.
var slugRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]*$`)

// LintError is one structural problem in spec.json, located by a path such as
// "targets[0].references[1].status".
type LintError struct {
	// Path locates the problem; "(root)" for the document itself.
	Path string `json:"path"`
	// Message says what is wrong and, where it helps, what is allowed.
	Message string `json:"message"`
}

// String renders "path: message".
func (e LintError) String() string { return e.Path + ": " + e.Message }

// WorklistItem is a reference that waits for a human: status needed (supply or approve
// one) or candidate (an agent render awaits approval). These are work, not errors.
type WorklistItem struct {
	// Target, State and Appearance name the view the reference is for.
	Target     string `json:"target"`
	State      string `json:"state"`
	Appearance string `json:"appearance"`
	// Status is needed or candidate.
	Status string `json:"status"`
	// File is where the reference is (or will be) kept.
	File string `json:"file,omitempty"`
	// Canonical marks the reference the target cannot be judged without.
	Canonical bool `json:"canonical"`
	// Undeclared is set when the canonical view has no manifest entry at all; File
	// then suggests the conventional name.
	Undeclared bool `json:"undeclared,omitempty"`
}

// LintReport is spec lint's answer.
type LintReport struct {
	// Valid is true when Errors is empty; the worklist does not affect it.
	Valid bool `json:"valid"`
	// Errors lists every structural problem in document order; never null.
	Errors []LintError `json:"errors"`
	// ReferenceWorklist lists the references waiting for a human; never null.
	ReferenceWorklist []WorklistItem `json:"reference_worklist"`
}

// NeedsContext reports whether some target's canonical reference waits for a human, in
// which case that target cannot be judged yet.
func (r *LintReport) NeedsContext() bool {
	for _, w := range r.ReferenceWorklist {
		if w.Canonical {
			return true
		}
	}
	return false
}

// SpecError is returned by ParseSpec and LoadFeature for a structurally invalid spec.
type SpecError struct {
	// Errors are the lint errors, all of them.
	Errors []LintError
}

// Error lists every lint error on one line.
func (e *SpecError) Error() string {
	parts := make([]string, len(e.Errors))
	for i, le := range e.Errors {
		parts[i] = le.String()
	}
	return "spec invalid: " + strings.Join(parts, "; ")
}

// LintSpec checks spec.json against the spec schema and collects the reference
// worklist. It fails (error) only when data is not one JSON value; everything wrong
// with the structure is a LintError in the report, all of them, in document order.
//
// refExists, when not nil, is asked whether each present reference's file exists
// (relative to the feature folder); a missing one is an error because the loop would
// start judging against nothing.
//
// Beyond the schema it also rejects what would break the loop later: duplicate target
// ids, states or reference entries; canonical, fixtures or references naming a state or
// appearance the target does not list; an empty appearances list; and file paths that
// are absolute or climb out of the feature folder (a spec is tenant input and must not
// point the renderer at someone else's files).
func LintSpec(data []byte, refExists func(file string) bool) (*LintReport, error) {
	root, err := decodeJSON(data, true)
	if err != nil {
		if d, ok := err.(*duplicateKeyError); ok {
			l := &linter{}
			l.add(d.Path, "duplicate key")
			return l.report(), nil
		}
		return nil, fmt.Errorf("spec: not valid JSON: %w", err)
	}
	l := &linter{refExists: refExists}
	l.spec(root)
	if len(l.errs) == 0 {
		// The seed's spec.schema.json is the contract: a spec the linter passes must
		// satisfy it too. (When the linter already found errors they say more, in
		// tribunal's words, and the schema would only repeat them.)
		for _, sv := range checkSchema(specSchema, data) {
			l.add(sv.Path, "spec schema: %s", sv.Message)
		}
	}
	return l.report(), nil
}

type linter struct {
	refExists func(string) bool
	errs      []LintError
	work      []WorklistItem
}

func (l *linter) add(path, format string, args ...any) {
	if path == "" {
		path = "(root)"
	}
	l.errs = append(l.errs, LintError{Path: path, Message: fmt.Sprintf(format, args...)})
}

func (l *linter) report() *LintReport {
	r := &LintReport{Errors: l.errs, ReferenceWorklist: l.work}
	if r.Errors == nil {
		r.Errors = []LintError{}
	}
	if r.ReferenceWorklist == nil {
		r.ReferenceWorklist = []WorklistItem{}
	}
	r.Valid = len(r.Errors) == 0
	return r
}

// object checks that v is an object, reports unknown and missing keys, and returns
// the members by key.
func (l *linter) object(path string, v any, known, required []string) (map[string]any, bool) {
	obj, ok := v.(jsonObject)
	if !ok {
		l.add(path, "must be an object, got %s", kindOf(v))
		return nil, false
	}
	out := map[string]any{}
	for _, m := range obj {
		if !slices.Contains(known, m.Key) {
			l.add(joinKey(path, m.Key), "unknown key (allowed: %s)", strings.Join(known, ", "))
			continue
		}
		out[m.Key] = m.Val
	}
	for _, k := range required {
		if _, ok := out[k]; !ok {
			l.add(joinKey(path, k), "is required")
		}
	}
	return out, true
}

// str checks an optional string member; it returns ok=false when absent or wrong.
func (l *linter) str(path string, m map[string]any, key string, nonEmpty bool) (string, bool) {
	v, present := m[key]
	if !present {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		l.add(joinKey(path, key), "must be a string, got %s", kindOf(v))
		return "", false
	}
	if nonEmpty && strings.TrimSpace(s) == "" {
		l.add(joinKey(path, key), "must not be empty")
		return "", false
	}
	return s, true
}

func (l *linter) slug(path string, m map[string]any, key string) (string, bool) {
	s, ok := l.str(path, m, key, false)
	if ok && !slugRE.MatchString(s) {
		l.add(joinKey(path, key), "%q is not a lowercase slug (a-z, 0-9 and '-', not starting with '-')", s)
		return s, false
	}
	return s, ok
}

// localFile checks a path that must stay inside the folder it is resolved against,
// named by where: the feature folder, or for design-system paths the batch folder, the
// repository root or the feature folder (Feature.DesignPath).
func (l *linter) localFile(path, p, where string) bool {
	if !filepath.IsLocal(filepath.FromSlash(p)) {
		l.add(path, "%q must be a relative path inside %s", p, where)
		return false
	}
	return true
}

// stringArray checks an array of non-empty, distinct strings.
func (l *linter) stringArray(path string, v any, nonEmpty bool) ([]string, bool) {
	arr, ok := v.([]any)
	if !ok {
		l.add(path, "must be an array of strings, got %s", kindOf(v))
		return nil, false
	}
	if nonEmpty && len(arr) == 0 {
		l.add(path, "must not be empty")
		return nil, false
	}
	out := []string{}
	good := true
	for i, e := range arr {
		s, ok := e.(string)
		switch {
		case !ok:
			l.add(joinIndex(path, i), "must be a string, got %s", kindOf(e))
			good = false
		case strings.TrimSpace(s) == "":
			l.add(joinIndex(path, i), "must not be empty")
			good = false
		case slices.Contains(out, s):
			l.add(joinIndex(path, i), "%q is listed twice", s)
			good = false
		default:
			out = append(out, s)
		}
	}
	return out, good
}

func (l *linter) spec(root any) {
	m, ok := l.object("", root, []string{"feature", "adapter", "design_system", "targets"},
		[]string{"feature", "adapter", "design_system", "targets"})
	if !ok {
		return
	}
	l.slug("", m, "feature")
	l.str("", m, "adapter", true)
	if ds, ok := m["design_system"]; ok {
		dm, ok := l.object("design_system", ds, []string{"tokens", "contrast_pairs"}, []string{"tokens"})
		if ok {
			for _, k := range []string{"tokens", "contrast_pairs"} {
				if s, ok := l.str("design_system", dm, k, true); ok {
					l.localFile(joinKey("design_system", k), s, "the batch folder, the repository or the feature folder")
				}
			}
		}
	}
	tv, ok := m["targets"]
	if !ok {
		return
	}
	targets, ok := tv.([]any)
	if !ok {
		l.add("targets", "must be an array, got %s", kindOf(tv))
		return
	}
	if len(targets) == 0 {
		l.add("targets", "must list at least one target")
	}
	ids := map[string]int{}
	for i, t := range targets {
		p := joinIndex("targets", i)
		id := l.target(p, t)
		if id == "" {
			continue
		}
		if prev, dup := ids[id]; dup {
			l.add(p+".id", "%q is already the id of targets[%d]", id, prev)
		} else {
			ids[id] = i
		}
	}
}

var targetKeys = []string{"id", "route", "states", "appearances", "fixtures", "canonical",
	"a11y_contract", "references", "component_contracts"}

// target lints one target and returns its id ("" when unusable).
func (l *linter) target(p string, v any) string {
	m, ok := l.object(p, v, targetKeys, []string{"id", "route", "states"})
	if !ok {
		return ""
	}
	id, idOK := l.slug(p, m, "id")
	if !idOK {
		id = ""
	}
	l.str(p, m, "route", true)

	var states []string
	statesOK := false
	if sv, ok := m["states"]; ok {
		states, statesOK = l.stringArray(p+".states", sv, true)
	}
	appearances := DefaultAppearances
	appsOK := true
	if av, ok := m["appearances"]; ok {
		appearances, appsOK = l.stringArray(p+".appearances", av, true)
	}
	inStates := func(path, s string) {
		if statesOK && !slices.Contains(states, s) {
			l.add(path, "%q is not one of the target's states %v", s, states)
		}
	}
	inApps := func(path, a string) {
		if appsOK && !slices.Contains(appearances, a) {
			l.add(path, "%q is not one of the target's appearances %v", a, appearances)
		}
	}

	if fv, ok := m["fixtures"]; ok {
		if fo, ok := fv.(jsonObject); !ok {
			l.add(p+".fixtures", "must be an object mapping state to fixture name, got %s", kindOf(fv))
		} else {
			for _, f := range fo {
				fp := joinKey(p+".fixtures", f.Key)
				if s, ok := f.Val.(string); !ok || s == "" {
					l.add(fp, "must be a non-empty fixture name, got %s", describe(f.Val))
				}
				inStates(fp, f.Key)
			}
		}
	}

	cState, cApp := "", ""
	if len(states) > 0 {
		cState = states[0]
	}
	if len(appearances) > 0 {
		cApp = appearances[0]
	}
	if cv, ok := m["canonical"]; ok {
		if cm, ok := l.object(p+".canonical", cv, []string{"state", "appearance"}, nil); ok {
			if s, ok := l.str(p+".canonical", cm, "state", true); ok {
				inStates(p+".canonical.state", s)
				cState = s
			}
			if a, ok := l.str(p+".canonical", cm, "appearance", true); ok {
				inApps(p+".canonical.appearance", a)
				cApp = a
			}
		}
	}

	if av, ok := m["a11y_contract"]; ok {
		l.stringArray(p+".a11y_contract", av, false)
	}
	if cv, ok := m["component_contracts"]; ok {
		if arr, ok := cv.([]any); !ok {
			l.add(p+".component_contracts", "must be an array of objects, got %s", kindOf(cv))
		} else {
			for i, e := range arr {
				if _, ok := e.(jsonObject); !ok {
					l.add(joinIndex(p+".component_contracts", i), "must be an object, got %s", kindOf(e))
				}
			}
		}
	}

	canonicalDeclared := false
	if rv, ok := m["references"]; ok {
		refs, ok := rv.([]any)
		if !ok {
			l.add(p+".references", "must be an array, got %s", kindOf(rv))
		}
		seen := map[[2]string]int{}
		for j, r := range refs {
			rp := joinIndex(p+".references", j)
			rm, ok := l.object(rp, r, []string{"state", "appearance", "status", "source", "file"},
				[]string{"state", "appearance", "status"})
			if !ok {
				continue
			}
			st, stOK := l.str(rp, rm, "state", true)
			if stOK {
				inStates(rp+".state", st)
			}
			ap, apOK := l.str(rp, rm, "appearance", true)
			if apOK {
				inApps(rp+".appearance", ap)
			}
			if stOK && apOK {
				k := [2]string{st, ap}
				if prev, dup := seen[k]; dup {
					l.add(rp, "second entry for %s/%s (first is references[%d])", st, ap, prev)
				} else {
					seen[k] = j
				}
				if st == cState && ap == cApp {
					canonicalDeclared = true
				}
			}
			if src, ok := l.str(rp, rm, "source", false); ok && src != SourceHuman && src != SourceCandidate {
				l.add(rp+".source", "%q is not one of human, candidate", src)
			}
			file, fileOK := l.str(rp, rm, "file", true)
			if fileOK {
				fileOK = l.localFile(rp+".file", file, "the feature folder")
			}
			status, ok := l.str(rp, rm, "status", false)
			if !ok {
				continue
			}
			switch status {
			case RefPresent:
				if _, has := rm["file"]; !has {
					l.add(rp+".file", "is required when status is present")
				} else if fileOK && l.refExists != nil && !l.refExists(file) {
					l.add(rp+".file", "status is present but %s does not exist", file)
				}
			case RefNeeded, RefCandidate:
				l.work = append(l.work, WorklistItem{
					Target: id, State: st, Appearance: ap, Status: status, File: file,
					Canonical: st == cState && ap == cApp,
				})
			default:
				l.add(rp+".status", "%q is not one of present, needed, candidate", status)
			}
		}
	}
	if !canonicalDeclared && id != "" && statesOK && appsOK && cState != "" && cApp != "" {
		l.work = append(l.work, WorklistItem{
			Target: id, State: cState, Appearance: cApp, Status: RefNeeded,
			File:      fmt.Sprintf("references/%s-%s-%s.png", id, cState, cApp),
			Canonical: true, Undeclared: true,
		})
	}
	return id
}
