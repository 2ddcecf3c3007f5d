package ab

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// Pair is the two artifacts of one AC. Its JSON form is an entry of the verify map,
// {"reference": "...", "ours": "..."}.
type Pair struct {
	Reference string `json:"reference,omitempty"`
	Ours      string `json:"ours,omitempty"`
}

// Where Resolve found an AC's artifacts.
const (
	// SourceExplicit: both paths were given for this AC explicitly.
	SourceExplicit = "explicit"
	// SourceVerify: both paths came from the verify map.
	SourceVerify = "verify"
	// SourceMixed: one path was explicit and the other came from the verify map.
	SourceMixed = "explicit+verify"
)

// ErrNoArtifacts is wrapped by Resolve when an AC is missing an artifact. It means the AC
// is recorded as blocked, with the error text as its blocked_reason; it never stops the
// run.
var ErrNoArtifacts = errclass.New(errclass.Refused, "ab: no artifacts for AC")

// ErrVerifyMap is wrapped by ParseVerifyMap for a verify map in JSON form that is not a
// valid map of AC id to artifact pair.
var ErrVerifyMap = errclass.New(errclass.Refused, "ab: invalid verify map")

// VerifyLineError is a line of a markdown verify document that uses the line grammar
// but gets it wrong.
type VerifyLineError struct {
	// Line is the 1-based line number.
	Line int
	// Text is the line as written, without its line break.
	Text string
	// Reason says what is wrong.
	Reason string
}

// Error implements error.
func (e *VerifyLineError) Error() string {
	return fmt.Sprintf("ab: verify line %d: %s: %q", e.Line, e.Reason, e.Text)
}

// verifyLine matches a line that names an AC: an optional list bullet, "AC-<id>:", rest.
var verifyLine = regexp.MustCompile(`^(?:[-*+]\s+)?(AC-[A-Za-z0-9][A-Za-z0-9._-]*):(.*)$`)

// ParseVerifyMap parses the verify input: AC id -> artifact pair.
//
// Two forms are accepted, told apart by the first non-blank byte.
//
// JSON (starts with "{"), the contract: {"AC-7": {"reference": "...", "ours": "..."}}.
// An entry may name only one side (Resolve can take the other from an explicit path),
// but not neither; paths must not be blank; keys other than reference and ours, and
// duplicate AC ids, are rejected (wrapping ErrVerifyMap) because a typo such as
// "refrence" would otherwise silently block the AC.
//
// Markdown, anything else: lines of the form
//
//	AC-<id>: reference=<path> ours=<path>
//
// optionally indented or written as a list item ("- AC-7: ..."), since that is how they
// appear in a markdown document; the two pairs may come in either order. A line is parsed
// only when it starts with "AC-<id>:" and contains "reference=" or "ours="; every other
// line, including prose that merely mentions an AC, is ignored. A parsed line must hold
// exactly both pairs, each with a non-empty, valid UTF-8 path, or ParseVerifyMap fails with a
// *VerifyLineError naming the line; so does a second line for the same AC. Paths cannot
// contain whitespace in this form; use JSON for those.
//
// A document with no such lines gives an empty map and no error: the ACs then resolve
// as blocked, one by one, with a reason each.
func ParseVerifyMap(data []byte) (map[string]Pair, error) {
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		return parseVerifyJSON(trimmed)
	}
	return parseVerifyMarkdown(data)
}

func parseVerifyJSON(data []byte) (map[string]Pair, error) {
	obj, err := decodeObject(data, ErrVerifyMap)
	if err != nil {
		var dup *duplicateKeyError
		if errors.As(err, &dup) {
			return nil, fmt.Errorf("%w: AC %q listed twice", ErrVerifyMap, dup.key)
		}
		return nil, err
	}
	out := make(map[string]Pair, len(obj.Order))
	for _, ac := range obj.Order {
		if strings.TrimSpace(ac) == "" {
			return nil, fmt.Errorf("%w: empty AC id", ErrVerifyMap)
		}
		entry, err := decodeObject(obj.Values[ac], ErrVerifyMap)
		if err != nil {
			var dup *duplicateKeyError
			if errors.As(err, &dup) {
				return nil, fmt.Errorf("%w: %s: key %q given twice", ErrVerifyMap, ac, dup.key)
			}
			return nil, fmt.Errorf("%w: %s: entry must be an object with reference and/or ours", ErrVerifyMap, ac)
		}
		var p Pair
		for _, k := range entry.Order {
			var dst *string
			switch k {
			case "reference":
				dst = &p.Reference
			case "ours":
				dst = &p.Ours
			default:
				return nil, fmt.Errorf("%w: %s: unknown key %q (want reference, ours)", ErrVerifyMap, ac, k)
			}
			raw := entry.Values[k]
			if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, dst) != nil {
				return nil, fmt.Errorf("%w: %s: %s must be a string", ErrVerifyMap, ac, k)
			}
			if strings.TrimSpace(*dst) == "" {
				return nil, fmt.Errorf("%w: %s: %s is blank", ErrVerifyMap, ac, k)
			}
		}
		if p == (Pair{}) {
			return nil, fmt.Errorf("%w: %s: names no artifact", ErrVerifyMap, ac)
		}
		out[ac] = p
	}
	return out, nil
}

func parseVerifyMarkdown(data []byte) (map[string]Pair, error) {
	out := map[string]Pair{}
	firstLine := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		text := strings.TrimSuffix(line, "\r")
		m := verifyLine.FindStringSubmatch(strings.TrimSpace(text))
		if m == nil {
			continue
		}
		ac, rest := m[1], m[2]
		if !strings.Contains(rest, "reference=") && !strings.Contains(rest, "ours=") {
			continue
		}
		fail := func(reason string) error { return &VerifyLineError{Line: n, Text: text, Reason: reason} }
		fields := strings.Fields(rest)
		if len(fields) != 2 {
			return nil, fail("want exactly reference=<path> ours=<path>")
		}
		var p Pair
		for _, f := range fields {
			key, val, ok := strings.Cut(f, "=")
			var dst *string
			switch {
			case !ok:
				return nil, fail(fmt.Sprintf("%q is not key=path", f))
			case key == "reference":
				dst = &p.Reference
			case key == "ours":
				dst = &p.Ours
			default:
				return nil, fail(fmt.Sprintf("unknown key %q (want reference, ours)", key))
			}
			if *dst != "" {
				return nil, fail(fmt.Sprintf("%s given twice", key))
			}
			if val == "" {
				return nil, fail(fmt.Sprintf("%s has an empty path", key))
			}
			if !utf8.ValidString(val) {
				// The manifest is JSON, which would silently replace the bad bytes and
				// record a path that does not exist.
				return nil, fail(fmt.Sprintf("%s path is not valid UTF-8", key))
			}
			*dst = val
		}
		if prev, dup := firstLine[ac]; dup {
			return nil, fail(fmt.Sprintf("%s already given on line %d", ac, prev))
		}
		firstLine[ac] = n
		out[ac] = p
	}
	return out, nil
}

// Resolve finds the artifacts for one AC. Each side is resolved on its own: the
// explicit path for this AC wins (it is what the caller typed for this run), else the
// verify map's path. So an explicit reference can be combined with ours from the verify
// map; source reports SourceExplicit, SourceVerify or SourceMixed accordingly.
//
// When either side is still missing, the error wraps ErrNoArtifacts and names the
// missing side; the AC is then recorded as blocked. The returned Pair holds whatever was
// found, so the blocked record can still show the side that exists.
func Resolve(acID string, explicit Pair, verify map[string]Pair) (Pair, string, error) {
	fromVerify := verify[acID]
	var p Pair
	var usedExplicit, usedVerify bool
	pick := func(exp, ver string) string {
		if exp != "" {
			usedExplicit = true
			return exp
		}
		if ver != "" {
			usedVerify = true
		}
		return ver
	}
	p.Ours = pick(explicit.Ours, fromVerify.Ours)
	p.Reference = pick(explicit.Reference, fromVerify.Reference)

	var missing []string
	if p.Ours == "" {
		missing = append(missing, "ours")
	}
	if p.Reference == "" {
		missing = append(missing, "reference")
	}
	if len(missing) > 0 {
		return p, "", fmt.Errorf("%w %s: missing %s (pass it explicitly or add it to the verify map)", ErrNoArtifacts, acID, strings.Join(missing, " and "))
	}
	switch {
	case usedExplicit && usedVerify:
		return p, SourceMixed, nil
	case usedExplicit:
		return p, SourceExplicit, nil
	}
	return p, SourceVerify, nil
}
