package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"unicode/utf8"
)

// MaxDepth bounds nesting so a hostile document cannot exhaust memory through recursion.
// It matches the limit encoding/json applies to its own decoder.
const MaxDepth = 10000

// Member is one key/value pair of a decoded object, in document order.
type Member struct {
	Key string
	Val any
}

// Members is a decoded JSON object in document order. Values are nil, bool,
// json.Number, string, []any or Members.
type Members []Member

// Get returns the value of the first member named key.
func (o Members) Get(key string) (any, bool) {
	for _, m := range o {
		if m.Key == key {
			return m.Val, true
		}
	}
	return nil, false
}

// DecodeTree decodes exactly one JSON value from data into an ordered tree: encoding/json's
// map decoding would hide which of several duplicate keys won, the order keys were written
// in, and whether a key was absent or present with a zero value. With strict set, a key
// repeated inside one object is an error (a *DuplicateKeyError naming its path); otherwise
// both members are kept.
func DecodeTree(data []byte, strict bool) (any, error) {
	p := treeParser{data: data, strict: strict}
	v, err := p.value(nil, 0)
	if err == nil {
		p.space()
		if p.i == len(data) {
			return v, nil
		}
		err = errSlowPath
	}
	if err != errSlowPath {
		return nil, err
	}
	// The text is not one JSON value: encoding/json's decoder says what is wrong, in the
	// words its errors have always had.
	return decodeTreeTokens(data, strict)
}

// decodeTreeTokens is DecodeTree on encoding/json's token stream: the reference the fast
// parser agrees with (FuzzDecodeTree), and the author of its syntax errors.
func decodeTreeTokens(data []byte, strict bool) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, "", 0, strict)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("unexpected data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, path string, depth int, strict bool) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= MaxDepth {
		return nil, fmt.Errorf("nesting deeper than %d levels", MaxDepth)
	}
	switch d {
	case '{':
		obj := Members{}
		var seen map[string]bool
		if strict {
			seen = map[string]bool{}
		}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := kt.(string)
			if !ok {
				return nil, fmt.Errorf("object key is %v, not a string", kt)
			}
			kp := JoinKey(path, key)
			if strict {
				if seen[key] {
					return nil, &DuplicateKeyError{Key: key, Path: kp}
				}
				seen[key] = true
			}
			v, err := decodeValue(dec, kp, depth+1, strict)
			if err != nil {
				return nil, err
			}
			obj = append(obj, Member{Key: key, Val: v})
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return obj, nil
	case '[':
		arr := []any{}
		for dec.More() {
			v, err := decodeValue(dec, JoinIndex(path, len(arr)), depth+1, strict)
			if err != nil {
				return nil, err
			}
			arr = append(arr, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return arr, nil
	}
	return nil, fmt.Errorf("unexpected delimiter %q", d)
}

// plainKey reports whether a key can stand in a dotted path as it is:
// [A-Za-z_$][A-Za-z0-9_$-]*.
func plainKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c == '_', c == '$':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}

// JoinKey extends a dotted path with an object key. Keys that would make the path
// ambiguous (dots, spaces, brackets) are quoted in brackets.
func JoinKey(path, key string) string {
	if !plainKey(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// JoinIndex extends a path with an array index.
func JoinIndex(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}

// KindOf names the JSON type of a decoded value for error messages.
func KindOf(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case Members:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// errSlowPath is the fast parser's only syntax error: the token decoder then reads the text
// again to say what is wrong.
var errSlowPath = errors.New("strictjson: not one JSON value")

// treeParser decodes one JSON value into the ordered tree in a single pass over the bytes.
// encoding/json's token stream spends most of an answer's check; this parser accepts the
// same texts and builds the same trees, and leaves every syntax error to the token decoder.
type treeParser struct {
	data   []byte
	i      int
	strict bool
}

// pathNode is a parent chain for the path of a duplicate key, built only when one occurs.
type pathNode struct {
	up    *pathNode
	key   string
	index int // -1 for an object key
}

func (n *pathNode) String() string {
	if n == nil {
		return ""
	}
	if n.index >= 0 {
		return JoinIndex(n.up.String(), n.index)
	}
	return JoinKey(n.up.String(), n.key)
}

func (p *treeParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *treeParser) value(at *pathNode, depth int) (any, error) {
	p.space()
	if p.i >= len(p.data) {
		return nil, errSlowPath
	}
	switch c := p.data[p.i]; c {
	case '{':
		if depth >= MaxDepth {
			return nil, errSlowPath
		}
		return p.object(at, depth)
	case '[':
		if depth >= MaxDepth {
			return nil, errSlowPath
		}
		return p.array(at, depth)
	case '"':
		return p.str()
	case 't':
		return p.literal("true", true)
	case 'f':
		return p.literal("false", false)
	case 'n':
		return p.literal("null", nil)
	default:
		return p.number()
	}
}

func (p *treeParser) object(at *pathNode, depth int) (any, error) {
	p.i++ // {
	obj := Members{}
	var seen map[string]bool
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return obj, nil
	}
	for {
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, errSlowPath
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		key := k.(string)
		if p.strict {
			dup := false
			if seen != nil {
				dup = seen[key]
			} else {
				for _, m := range obj {
					dup = dup || m.Key == key
				}
			}
			if dup {
				// Reported when the key is read, before anything after it, as the token
				// decoder does.
				kp := &pathNode{up: at, key: key, index: -1}
				return nil, &DuplicateKeyError{Key: key, Path: kp.String()}
			}
			if len(obj) == 16 {
				seen = make(map[string]bool, 32)
				for _, m := range obj {
					seen[m.Key] = true
				}
			}
			if seen != nil {
				seen[key] = true
			}
		}
		p.space()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, errSlowPath
		}
		p.i++
		v, err := p.value(&pathNode{up: at, key: key, index: -1}, depth+1)
		if err != nil {
			return nil, err
		}
		obj = append(obj, Member{Key: key, Val: v})
		p.space()
		if p.i >= len(p.data) {
			return nil, errSlowPath
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return obj, nil
		default:
			return nil, errSlowPath
		}
	}
}

func (p *treeParser) array(at *pathNode, depth int) (any, error) {
	p.i++ // [
	arr := []any{}
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return arr, nil
	}
	for {
		v, err := p.value(&pathNode{up: at, index: len(arr)}, depth+1)
		if err != nil {
			return nil, err
		}
		arr = append(arr, v)
		p.space()
		if p.i >= len(p.data) {
			return nil, errSlowPath
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return arr, nil
		default:
			return nil, errSlowPath
		}
	}
}

// str reads a string. Plain ASCII or valid UTF-8 without escapes is taken as it is;
// anything else goes through encoding/json, which unescapes and replaces invalid bytes.
func (p *treeParser) str() (any, error) {
	start := p.i
	j := start + 1
	plain, ascii := true, true
	for ; j < len(p.data); j++ {
		c := p.data[j]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			plain = false
			j++
		case c < 0x20:
			return nil, errSlowPath
		case c >= 0x80:
			ascii = false
		}
	}
	if j >= len(p.data) {
		return nil, errSlowPath
	}
	p.i = j + 1
	body := p.data[start+1 : j]
	if plain && (ascii || utf8.Valid(body)) {
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(p.data[start:j+1], &s); err != nil {
		return nil, errSlowPath
	}
	return s, nil
}

func (p *treeParser) literal(word string, v any) (any, error) {
	if !bytes.HasPrefix(p.data[p.i:], []byte(word)) {
		return nil, errSlowPath
	}
	p.i += len(word)
	return v, nil
}

// number reads -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? as a json.Number of its text.
func (p *treeParser) number() (any, error) {
	d, start := p.data, p.i
	i := start
	digits := func() bool {
		n := i
		for i < len(d) && d[i] >= '0' && d[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && d[i] >= '1' && d[i] <= '9':
		digits()
	default:
		return nil, errSlowPath
	}
	if i < len(d) && d[i] == '.' {
		i++
		if !digits() {
			return nil, errSlowPath
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if !digits() {
			return nil, errSlowPath
		}
	}
	p.i = i
	return json.Number(d[start:i]), nil
}
