package batch

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// acsEntries hands a batch's acs entries to Parse one at a time.
type acsEntries interface {
	// len is the number of entries, known before any is read, and line the line of the
	// first (the list's, in messages about it).
	len() int
	line() int
	// entry is the i-th entry, called for i = 0, 1, ... in turn, and the structural
	// problems found inside it (nil when none). ok is false when the entry cannot be read
	// on its own: Parse then reads the file as one tree.
	entry(i int) (node *yaml.Node, tree *problems, ok bool)
	// sound reports, before any entry is read, whether every entry can be read on its own.
	sound() bool
}

// treeEntries are the entries of a file parsed whole: its acs sequence, whose entries are
// let go as they are handed over.
type treeEntries struct {
	seq  *yaml.Node
	tree map[int]*problems
}

func (t *treeEntries) len() int {
	if t.seq == nil {
		return 0
	}
	return len(t.seq.Content)
}

func (t *treeEntries) line() int {
	if t.seq == nil {
		return 1
	}
	return t.seq.Line
}

func (t *treeEntries) entry(i int) (*yaml.Node, *problems, bool) {
	n := t.seq.Content[i]
	t.seq.Content[i] = nil // let the tree go as the entries are built
	return n, t.tree[i], true
}

func (t *treeEntries) sound() bool { return true }

// acsSplit is where a file's block-sequence acs entries are: the bytes [start, end), each
// entry starting on a line indented by exactly indent spaces with "- ".
type acsSplit struct {
	// keyLine is the line of the acs key; line the line of the first entry.
	keyLine, line int
	start, end    int
	indent        int
	// n is the number of entries, counted without reading them.
	n int
}

// splitACs finds the entries of a batch file's acs list when it is a block sequence
// under a top-level "acs:" line, without parsing them: a byte scan of the lines.
//
// The file's top level is indented like its first line of content; the acs key is a line
// at that indent holding "acs:" alone (a comment may follow). Its entries start at the
// first line of content after it, which must be a "- " at some indent, and every line at
// that indent starting "- " starts the next; the list ends at the first line of content
// indented no more than that which does not (a comment line never ends it). A
// block scalar's lines are indented more than its entry's keys, and a plain scalar's
// continuation too; only a quoted scalar or a flow collection spanning lines could hold
// a line that looks like an entry's start, and then a piece ends inside it, does not
// parse on its own, and the file is parsed whole. The header left when the entries are
// cut out (sp.header) must hold the acs key at keyLine with an empty value, which
// parseSplit checks: else the scan misread the file, and it is parsed whole. ok is false
// for any other layout (a flow sequence, JSON, acs: with no entries).
func splitACs(data []byte) (sp acsSplit, ok bool) {
	top := -1
	line := 0
	for off := 0; off < len(data); {
		l, next := lineAt(data, off)
		line++
		ind, rest := indentOf(l)
		switch {
		case isBlank(rest) || rest[0] == '#':
		case top < 0 && (rest[0] == '%' || isMarkerAlone(rest)):
			// A directive or the document's start marker alone on its line.
		case top < 0:
			if rest[0] == '{' || rest[0] == '[' || rest[0] == '\t' || isMarker(rest) {
				return sp, false
			}
			top = ind
			fallthrough
		default:
			if ind == top && isACsKey(rest) {
				sp.keyLine = line
				return entriesAfter(data, next, line, top, sp)
			}
		}
		off = next
	}
	return sp, false
}

// entriesAfter scans the lines from off (line is the one before it, the acs key's) for
// the acs entries of a top level indented top.
func entriesAfter(data []byte, off, line, top int, sp acsSplit) (acsSplit, bool) {
	sp.indent = -1
	for off < len(data) {
		l, next := lineAt(data, off)
		line++
		ind, rest := indentOf(l)
		switch {
		case isBlank(rest) || rest[0] == '#':
		case sp.indent < 0:
			if ind < top || !isEntryStart(rest) {
				return sp, false
			}
			sp.indent, sp.start, sp.line, sp.n = ind, off, line, 1
		case ind == sp.indent && isEntryStart(rest):
			sp.n++
		case ind <= sp.indent:
			sp.end = off
			return sp, true
		}
		off = next
	}
	sp.end = len(data)
	return sp, sp.indent >= 0
}

// header is data without its entries: each of their lines left empty, so that every line
// of the rest keeps its number, and the acs key with no value.
func (sp acsSplit) header(data []byte) []byte {
	nl := bytes.Count(data[sp.start:sp.end], []byte("\n"))
	out := make([]byte, 0, sp.start+nl+len(data)-sp.end)
	out = append(out, data[:sp.start]...)
	out = append(out, bytes.Repeat([]byte("\n"), nl)...)
	return append(out, data[sp.end:]...)
}

// splitEntries reads the entries acsSplit found a group at a time, each group parsed on
// its own into a tree whose lines are the file's and let go entry by entry.
type splitEntries struct {
	sp   acsSplit
	data []byte
	// off and at are where the next group starts: its byte and its line; read counts
	// the entries grouped so far.
	off, at, read int
	group         []*yaml.Node
}

// entryGroup is how many entries are parsed together: a decoder's own buffers (about
// 12 KB) are then made once for many entries, and a group's tree is still small.
const entryGroup = 64

func (s *splitEntries) len() int  { return s.sp.n }
func (s *splitEntries) line() int { return s.sp.line }

// next is the group of up to entryGroup entries at s.off, how many, and its first line.
func (s *splitEntries) next() (piece []byte, n, line int) {
	start, line := s.off, s.at
	off := start
	n = min(entryGroup, s.sp.n-s.read)
	for seen := 0; off < s.sp.end; {
		l, next := lineAt(s.data, off)
		if ind, rest := indentOf(l); ind == s.sp.indent && isEntryStart(rest) {
			if seen == n {
				break
			}
			seen++
		}
		s.at++
		off = next
	}
	s.off, s.read = off, s.read+n
	return s.data[start:off], n, line
}

func (s *splitEntries) entry(i int) (*yaml.Node, *problems, bool) {
	if len(s.group) == 0 {
		var ok bool
		if s.group, ok = parsePiece(s.next()); !ok {
			return nil, nil, false
		}
	}
	n := s.group[0]
	s.group[0], s.group = nil, s.group[1:]
	var tree *problems
	checkTree(n, []string{"acs", strconv.Itoa(i)}, func(p problem) {
		if tree == nil {
			tree = &problems{}
		}
		tree.add(p)
	})
	return n, tree, true
}

func (s *splitEntries) sound() bool {
	saved := *s
	defer func() { *s = saved }()
	for s.read < s.sp.n {
		if _, ok := parsePiece(s.next()); !ok {
			return false
		}
	}
	return true
}

// parsePiece parses a group of n entries' lines, the first of which is the file's line
// line: a sequence of exactly n entries, returned with the file's line numbers.
func parsePiece(piece []byte, n, line int) ([]*yaml.Node, bool) {
	var doc, more yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(piece))
	if err := dec.Decode(&doc); err != nil {
		return nil, false
	}
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		return nil, false
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, false
	}
	seq := doc.Content[0]
	if seq.Kind != yaml.SequenceNode || len(seq.Content) != n {
		return nil, false
	}
	for _, c := range seq.Content {
		shiftLines(c, line-1)
	}
	return seq.Content, true
}

// shiftLines adds by to the line of n and of every node below it.
func shiftLines(n *yaml.Node, by int) {
	n.Line += by
	for _, c := range n.Content {
		shiftLines(c, by)
	}
}

// lineAt is the line starting at off, without its newline, and where the next starts.
func lineAt(data []byte, off int) (line []byte, next int) {
	if i := bytes.IndexByte(data[off:], '\n'); i >= 0 {
		return data[off : off+i], off + i + 1
	}
	return data[off:], len(data)
}

// indentOf is a line's count of leading spaces and the rest of it.
func indentOf(l []byte) (int, []byte) {
	i := 0
	for i < len(l) && l[i] == ' ' {
		i++
	}
	return i, l[i:]
}

// isBlank reports a line (after its indent) of nothing but white space.
func isBlank(rest []byte) bool {
	return len(bytes.Trim(rest, " \t\r")) == 0
}

// isMarker reports a line starting with a document marker (--- or ...).
func isMarker(rest []byte) bool {
	return bytes.HasPrefix(rest, []byte("---")) || bytes.HasPrefix(rest, []byte("..."))
}

// isMarkerAlone reports a document marker with nothing after it but a comment.
func isMarkerAlone(rest []byte) bool {
	if !isMarker(rest) {
		return false
	}
	after := rest[3:]
	if len(bytes.TrimRight(after, " \t\r")) == 0 {
		return true
	}
	return (after[0] == ' ' || after[0] == '\t') && bytes.TrimLeft(after, " \t")[0] == '#'
}

// isACsKey reports the line "acs:", with nothing after it but white space or a comment.
func isACsKey(rest []byte) bool {
	after, ok := bytes.CutPrefix(rest, []byte("acs:"))
	if !ok {
		return false
	}
	if len(after) == 0 {
		return true
	}
	if after[0] != ' ' && after[0] != '\t' && after[0] != '\r' {
		return false
	}
	after = bytes.TrimLeft(after, " \t\r")
	return len(after) == 0 || after[0] == '#'
}

// isEntryStart reports a line (after its indent) starting a block sequence's entry.
func isEntryStart(rest []byte) bool {
	return len(rest) > 0 && rest[0] == '-' && (len(rest) == 1 || rest[1] == ' ' || rest[1] == '\t' || rest[1] == '\r')
}
