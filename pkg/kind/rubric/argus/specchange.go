package argus

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// SpecChange is one change to a feature's spec.json as a JSON Patch operation (RFC 6902):
// op "replace" sets the value at Path, op "add" appends to the array at Path ("/-" last)
// or adds a member to the object above Path.
type SpecChange struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// CandidateFile is where HE-1 keeps a target's candidate render, relative to the feature's
// .argus-runs/ folder, as seed 004 names it: candidates/{target}-{state}-{appearance}.png.
func CandidateFile(target, state, appearance string) string {
	return "candidates/" + target + "-" + state + "-" + appearance + ".png"
}

// ReferenceFile is where the seed files a target's reference image, relative to the
// feature folder: references/{target}-{state}-{appearance}.png.
func ReferenceFile(target, state, appearance string) string {
	return "references/" + target + "-" + state + "-" + appearance + ".png"
}

// CandidateChange is the spec.json change seed 004's HE-1 makes once the canonical view of
// target has rendered a candidate: "set the manifest entry to candidate". The entry of the
// canonical view has its status replaced; a target without one gets one added, naming the
// reference file the seed would name. ok is false when there is nothing to change (the
// canonical reference is present or a candidate already).
func CandidateChange(specJSON []byte, target string) (c SpecChange, ok bool, err error) {
	s, err := ParseSpec(specJSON)
	if err != nil {
		return SpecChange{}, false, err
	}
	for i, t := range s.Targets {
		if t.ID != target {
			continue
		}
		st, ap := t.CanonicalView()
		for j, r := range t.References {
			if r.State == st && r.Appearance == ap {
				if r.Status != RefNeeded {
					return SpecChange{}, false, nil
				}
				return SpecChange{Op: "replace", Path: fmt.Sprintf("/targets/%d/references/%d/status", i, j), Value: RefCandidate}, true, nil
			}
		}
		entry := Reference{State: st, Appearance: ap, Status: RefCandidate, File: ReferenceFile(t.ID, st, ap)}
		if t.References == nil {
			return SpecChange{Op: "add", Path: fmt.Sprintf("/targets/%d/references", i), Value: []Reference{entry}}, true, nil
		}
		return SpecChange{Op: "add", Path: fmt.Sprintf("/targets/%d/references/-", i), Value: entry}, true, nil
	}
	return SpecChange{}, false, fmt.Errorf("spec has no target %q", target)
}

// ApplySpecChange applies c to the JSON document data and returns the new document. It
// edits the text in place: the rest of the file keeps its bytes, key order and layout, since
// spec.json is a person's file. Only what CandidateChange produces is supported: "replace"
// of an existing value, "add" at the end of an array ("/-") and "add" of a new object
// member.
func ApplySpecChange(data []byte, c SpecChange) ([]byte, error) {
	ptr, err := splitPointer(c.Path)
	if err != nil {
		return nil, err
	}
	if len(ptr) == 0 {
		return nil, fmt.Errorf("spec change %s %q: the whole document cannot be replaced", c.Op, c.Path)
	}
	root, err := scanJSON(data)
	if err != nil {
		return nil, err
	}
	parent, err := root.find(ptr[:len(ptr)-1])
	if err != nil {
		return nil, fmt.Errorf("spec change %s %q: %w", c.Op, c.Path, err)
	}
	last := ptr[len(ptr)-1]
	switch c.Op {
	case "replace":
		v, err := parent.child(last)
		if err != nil {
			return nil, fmt.Errorf("spec change replace %q: %w", c.Path, err)
		}
		val, err := json.Marshal(c.Value)
		if err != nil {
			return nil, fmt.Errorf("spec change replace %q: %w", c.Path, err)
		}
		return splice(data, v.start, v.end, val), nil
	case "add":
		return parent.add(data, last, c)
	}
	return nil, fmt.Errorf("spec change %q: op %q is not supported (replace or add)", c.Path, c.Op)
}

// ValueAt returns the JSON value at a JSON Pointer of data.
func ValueAt(data []byte, pointer string) (json.RawMessage, error) {
	ptr, err := splitPointer(pointer)
	if err != nil {
		return nil, err
	}
	root, err := scanJSON(data)
	if err != nil {
		return nil, err
	}
	n, err := root.find(ptr)
	if err != nil {
		return nil, fmt.Errorf("%q: %w", pointer, err)
	}
	return json.RawMessage(data[n.start:n.end]), nil
}

func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if !strings.HasPrefix(p, "/") {
		return nil, fmt.Errorf("JSON pointer %q does not start with /", p)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		parts[i] = strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
	}
	return parts, nil
}

func splice(data []byte, start, end int, with []byte) []byte {
	out := make([]byte, 0, len(data)-(end-start)+len(with))
	out = append(out, data[:start]...)
	out = append(out, with...)
	return append(out, data[end:]...)
}

// jnode is one JSON value of a scanned document: its byte range, and for an object or an
// array its members or elements in order.
type jnode struct {
	start, end int
	kind       byte // '{', '[' or 0 for a scalar
	keys       []string
	keyStart   []int
	items      []*jnode
}

func (n *jnode) find(ptr []string) (*jnode, error) {
	for _, p := range ptr {
		c, err := n.child(p)
		if err != nil {
			return nil, err
		}
		n = c
	}
	return n, nil
}

func (n *jnode) child(p string) (*jnode, error) {
	switch n.kind {
	case '{':
		for i, k := range n.keys {
			if k == p {
				return n.items[i], nil
			}
		}
		return nil, fmt.Errorf("no member %q", p)
	case '[':
		i, err := strconv.Atoi(p)
		if err != nil || i < 0 || i >= len(n.items) {
			return nil, fmt.Errorf("no element %q of an array of %d", p, len(n.items))
		}
		return n.items[i], nil
	}
	return nil, fmt.Errorf("%q: not an object or an array", p)
}

// add inserts c's value into n: as the last element of an array (p "-") or as member p
// of an object, indented like the elements or members already there.
func (n *jnode) add(data []byte, p string, c SpecChange) ([]byte, error) {
	var indent string
	var anchor int // where the new text goes: after the last item, or after the opening
	switch {
	case n.kind == '[' && p == "-", n.kind == '{':
		if n.kind == '{' {
			for _, k := range n.keys {
				if k == p {
					return nil, fmt.Errorf("spec change add %q: member %q exists", c.Path, p)
				}
			}
		}
		if len(n.items) > 0 {
			first := n.items[0].start
			if n.kind == '{' {
				first = n.keyStart[0]
			}
			indent = lineIndent(data, first)
			anchor = n.items[len(n.items)-1].end
		} else {
			indent = lineIndent(data, n.start) + "  "
			anchor = n.start + 1
		}
	default:
		return nil, fmt.Errorf("spec change add %q: only the end of an array (-) or a new member of an object", c.Path)
	}
	val, err := json.MarshalIndent(c.Value, indent, "  ")
	if err != nil {
		return nil, fmt.Errorf("spec change add %q: %w", c.Path, err)
	}
	var text bytes.Buffer
	if len(n.items) > 0 {
		text.WriteString(",")
	}
	text.WriteString("\n" + indent)
	if n.kind == '{' {
		key, _ := json.Marshal(p)
		text.Write(key)
		text.WriteString(": ")
	}
	text.Write(val)
	if len(n.items) == 0 {
		text.WriteString("\n" + strings.TrimSuffix(indent, "  "))
	}
	return splice(data, anchor, anchor, text.Bytes()), nil
}

// lineIndent is the white space that starts the line holding offset at.
func lineIndent(data []byte, at int) string {
	start := bytes.LastIndexByte(data[:at], '\n') + 1
	end := start
	for end < at && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

// scanJSON scans a JSON document into its values' byte ranges.
func scanJSON(data []byte) (*jnode, error) {
	if !json.Valid(data) {
		return nil, fmt.Errorf("not valid JSON")
	}
	s := &jscanner{data: data}
	n := s.value()
	return n, s.err
}

type jscanner struct {
	data []byte
	pos  int
	err  error
}

func (s *jscanner) space() {
	for s.pos < len(s.data) && strings.IndexByte(" \t\r\n", s.data[s.pos]) >= 0 {
		s.pos++
	}
}

func (s *jscanner) value() *jnode {
	s.space()
	n := &jnode{start: s.pos}
	if s.pos >= len(s.data) {
		s.err = fmt.Errorf("unexpected end of JSON")
		return n
	}
	switch c := s.data[s.pos]; c {
	case '{', '[':
		n.kind = c
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		s.pos++
		for s.err == nil {
			s.space()
			if s.data[s.pos] == closer {
				s.pos++
				break
			}
			if len(n.items) > 0 {
				s.pos++ // the ',' a valid document has here
				s.space()
			}
			if c == '{' {
				ks := s.pos
				k := s.value()
				var key string
				if err := json.Unmarshal(s.data[k.start:k.end], &key); err != nil && s.err == nil {
					s.err = err
				}
				n.keys, n.keyStart = append(n.keys, key), append(n.keyStart, ks)
				s.space()
				s.pos++ // ':'
			}
			n.items = append(n.items, s.value())
		}
	case '"':
		s.pos++
		for s.pos < len(s.data) && s.data[s.pos] != '"' {
			if s.data[s.pos] == '\\' {
				s.pos++
			}
			s.pos++
		}
		s.pos++
	default:
		for s.pos < len(s.data) && strings.IndexByte(",]} \t\r\n", s.data[s.pos]) < 0 {
			s.pos++
		}
	}
	n.end = s.pos
	return n
}

// Apply applies the change to spec.json as it is now (ApplyCandidateChange); a
// SpecChange is the rubric kind's planned change to a batch's file (kind.FileChange).
func (c SpecChange) Apply(current []byte) ([]byte, bool, error) {
	return ApplyCandidateChange(current, c)
}

// Describe is the change in a line (`replace /targets/0/references/0/status
// "candidate"`), made for HE-1.
func (c SpecChange) Describe() (what, why string) {
	v, _ := json.Marshal(c.Value)
	return fmt.Sprintf("%s %s %s", c.Op, c.Path, v), "HE-1"
}

// ApplyCandidateChange applies a planned HE-1 change (CandidateChange) to spec.json as it
// is now. A spec whose target needs no change any more (its canonical reference is a
// candidate or present by now: an earlier run, or a person, got there first) is left as it
// is, applied false. A spec changed so that the planned change would edit another entry is
// an error: the change was planned from a file that is not this one.
func ApplyCandidateChange(current []byte, planned SpecChange) (next []byte, applied bool, err error) {
	ptr, err := splitPointer(planned.Path)
	if err != nil {
		return nil, false, err
	}
	if len(ptr) < 2 || ptr[0] != "targets" {
		return nil, false, fmt.Errorf("spec change %q names no target", planned.Path)
	}
	i, err := strconv.Atoi(ptr[1])
	s, perr := ParseSpec(current)
	switch {
	case perr != nil:
		return nil, false, perr
	case err != nil || i < 0 || i >= len(s.Targets):
		return nil, false, fmt.Errorf("spec change %q: the spec has %d targets", planned.Path, len(s.Targets))
	}
	now, ok, err := CandidateChange(current, s.Targets[i].ID)
	if err != nil || !ok {
		return current, false, err
	}
	if now.Op != planned.Op || now.Path != planned.Path {
		return nil, false, fmt.Errorf("spec.json changed since the run was planned: target %s now needs %s %s, not %s %s",
			s.Targets[i].ID, now.Op, now.Path, planned.Op, planned.Path)
	}
	next, err = ApplySpecChange(current, now)
	return next, err == nil, err
}
