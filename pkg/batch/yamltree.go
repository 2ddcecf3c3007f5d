package batch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// checkTree reports, in one pass over the tree, what no batch file may hold and what
// yaml.v3 would otherwise handle badly: aliases (expanding them turns a small file into
// a huge one), merge keys, keys that are not plain strings (JSON has no such keys, and
// the schema could not name them), and repeated keys (yaml.v3 compares every pair of
// them, so thousands of repeats cost gigabytes, and a repeated acs would silently keep
// only the last list).
func checkTree(n *yaml.Node, path []string, report func(problem)) {
	at := func(line int, msg string, extra ...string) {
		p := append(append([]string(nil), path...), extra...)
		report(problem{path: p, line: max(line, 1), msg: msg})
	}
	switch n.Kind {
	case yaml.DocumentNode, yaml.SequenceNode:
		for i, c := range n.Content {
			if n.Kind == yaml.SequenceNode {
				checkTree(c, append(path, strconv.Itoa(i)), report)
			} else {
				checkTree(c, path, report)
			}
		}
	case yaml.AliasNode:
		at(n.Line, "YAML aliases (*name) are not allowed in batch files")
	case yaml.MappingNode:
		seen := make(map[string]int, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch {
			case k.Kind == yaml.ScalarNode && k.Tag == "!!merge":
				at(k.Line, "merge keys (<<) are not allowed in batch files", k.Value)
				continue
			case k.Kind != yaml.ScalarNode || k.Tag != "!!str":
				name := k.Value
				if k.Kind != yaml.ScalarNode {
					name = "?"
				}
				at(k.Line, "keys must be plain strings (quote it)", name)
				continue
			}
			if first, dup := seen[k.Value]; dup {
				at(k.Line, fmt.Sprintf("repeated key (first at line %d)", first), k.Value)
				continue
			}
			seen[k.Value] = k.Line
			checkTree(v, append(path, k.Value), report)
		}
	}
}

// toJSON turns a checked node into the value the schema validator reads (maps, slices,
// strings, numbers, booleans, nil), or says which value has none.
func toJSON(n *yaml.Node, path []string) (any, *problem) {
	bad := func(msg string) (any, *problem) {
		return nil, &problem{path: append([]string(nil), path...), line: max(n.Line, 1), msg: msg}
	}
	switch n.Kind {
	case yaml.MappingNode:
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			v, p := toJSON(n.Content[i+1], append(path, k))
			if p != nil {
				return nil, p
			}
			m[k] = v
		}
		return m, nil
	case yaml.SequenceNode:
		l := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, p := toJSON(c, append(path, strconv.Itoa(i)))
			if p != nil {
				return nil, p
			}
			l[i] = v
		}
		return l, nil
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return n.Value, nil
		case "!!timestamp":
			// JSON has no time type; the text is what a string field receives.
			return n.Value, nil
		case "!!null", "!!bool", "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return bad(stripYAMLLine(YAMLErrorText(err)))
			}
			if f, ok := v.(float64); ok && (math.IsInf(f, 0) || math.IsNaN(f)) {
				return bad(fmt.Sprintf("%s is not a finite number", n.Value))
			}
			return v, nil
		default:
			return bad(fmt.Sprintf("YAML tag %s is not supported in batch files", n.Tag))
		}
	default:
		return bad("YAML aliases (*name) are not allowed in batch files")
	}
}

// nodeAt is the node at loc below n, or nil.
func nodeAt(n *yaml.Node, loc []string) *yaml.Node {
	for _, tok := range loc {
		if n = child(n, tok); n == nil {
			return nil
		}
	}
	return n
}

// lineOf finds the line of a field below n, or the nearest parent's. It walks the tree
// key by key: keys are user text and must never be parsed as a path.
func lineOf(n *yaml.Node, loc []string) int {
	line := n.Line
	for _, tok := range loc {
		next := child(n, tok)
		if next == nil {
			break
		}
		n = next
		line = n.Line
	}
	return line
}

func child(n *yaml.Node, tok string) *yaml.Node {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) > 0 {
			return child(n.Content[0], tok)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == tok {
				return n.Content[i+1]
			}
		}
	case yaml.SequenceNode:
		if i, err := strconv.Atoi(tok); err == nil && i >= 0 && i < len(n.Content) {
			return n.Content[i]
		}
	}
	return nil
}

var yamlLineRe = regexp.MustCompile(`line (\d+):`)

// yamlLine is the line a YAML error names, or 0.
func yamlLine(err error) int {
	return yamlLineOr(err, 0)
}

func yamlLineOr(err error, fallback int) int {
	if m := yamlLineRe.FindStringSubmatch(err.Error()); m != nil {
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return fallback
}

// stripYAMLLine drops the library's "yaml: " and "line N: " prefixes from a message that
// is reported with its own line.
func stripYAMLLine(msg string) string {
	msg = strings.TrimPrefix(msg, "yaml: ")
	if m := yamlLineRe.FindStringIndex(msg); m != nil && m[0] == 0 {
		msg = strings.TrimSpace(msg[m[1]:])
	}
	return msg
}

// YAMLErrorText is a YAML decoding error on one line: a type error's first line is only
// "unmarshal errors:", with the useful "line N: ..." parts below it.
func YAMLErrorText(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		return strings.Join(te.Errors, "; ")
	}
	return firstLine(err.Error())
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// parserProblems are the syntax errors yaml.v3's parser (rather than its scanner) raises,
// and where each is best located. The library names the line where the enclosing
// construct began (or the problem, when there is no construct), zero-based
// (go-yaml/yaml#205). That mark is right ("mark") for an unclosed flow collection (its
// opening bracket is the mistake) and for directives and tags; for a block error it can
// be thousands of lines above the mistake ("stop": use where the scanner stopped reading).
var parserProblems = map[string]string{
	"did not find expected ',' or ']'":       "mark",
	"did not find expected ',' or '}'":       "mark",
	"did not find expected '-' indicator":    "stop",
	"did not find expected <document start>": "stop",
	"did not find expected <stream-start>":   "stop",
	"did not find expected key":              "stop",
	"did not find expected node content":     "stop",
	"found duplicate %YAML directive":        "mark",
	"found duplicate %TAG directive":         "mark",
	"found incompatible YAML document":       "mark",
	"found undefined tag handle":             "mark",
}

// locateSyntaxError is the one-based line and the message of a YAML syntax error.
//
// The scanner's own errors carry the right line; the parser's do not (see
// parserProblems), and errors of the reader (bad UTF-8) or about anchors carry none. For
// those the file is read again through a reader that hands over one byte at a time: the
// scanner reads only as far as it needs, so where it stopped is where the problem is
// (give or take its few characters of lookahead). This runs only for a broken file.
func locateSyntaxError(data []byte, err error) (int, string) {
	problem := stripYAMLLine(firstLine(err.Error()))
	line := yamlLine(err)
	msg := "not valid YAML: " + problem
	if strings.HasPrefix(problem, "unknown anchor") {
		msg = "YAML aliases (*name) are not allowed in batch files (" + problem + ")"
	}
	switch where, isParser := parserProblems[problem]; {
	case !isParser && line > 0:
		return line, msg // the scanner's line is right
	case where == "mark":
		return line + 1, msg
	case !isParser && !isReaderProblem(problem) && !strings.HasPrefix(problem, "unknown anchor"):
		// A scanner error with no line is on the first line (zero-based 0).
		return 1, msg
	}
	r := &byteAtATime{data: data}
	var n yaml.Node
	_ = yaml.NewDecoder(r).Decode(&n)
	if r.off == 0 {
		return max(line, 1), msg
	}
	return bytes.Count(data[:r.off-1], []byte("\n")) + 1, msg
}

// isReaderProblem reports errors of yaml.v3's input reader, which carry no position.
func isReaderProblem(msg string) bool {
	for _, s := range []string{"UTF-8", "UTF-16", "control characters", "invalid Unicode", "input error"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// byteAtATime reads data one byte per call and remembers how far it got.
type byteAtATime struct {
	data []byte
	off  int
}

func (r *byteAtATime) Read(p []byte) (int, error) {
	if r.off >= len(r.data) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[r.off]
	r.off++
	return 1, nil
}

// secondDocument returns the line of the document that follows first in dec (its ---
// marker), or 0 when there is none. Without this check the ACs of a second document
// would vanish without a word: only the first is read.
func secondDocument(dec *yaml.Decoder, data []byte, first *yaml.Node) int {
	var second yaml.Node
	err := dec.Decode(&second)
	switch {
	case errors.Is(err, io.EOF):
		return 0
	case err == nil:
		return max(second.Line, 1)
	}
	// The second document does not parse: name its marker, the first at the start of
	// a line after the first document's content began.
	start := 1
	if len(first.Content) > 0 {
		start = first.Content[0].Line
	}
	for i, l := range bytes.Split(data, []byte("\n")) {
		if i+1 > start && bytes.HasPrefix(l, []byte("---")) && (len(l) == 3 || l[3] == ' ' || l[3] == '\t' || l[3] == '\r') {
			return i + 1
		}
	}
	return max(yamlLine(err), 1)
}
