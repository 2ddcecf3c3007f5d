package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
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

var plainKey = regexp.MustCompile(`^[A-Za-z_$][A-Za-z0-9_$-]*$`)

// JoinKey extends a dotted path with an object key. Keys that would make the path
// ambiguous (dots, spaces, brackets) are quoted in brackets.
func JoinKey(path, key string) string {
	if !plainKey.MatchString(key) {
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
