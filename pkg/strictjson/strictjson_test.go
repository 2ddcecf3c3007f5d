package strictjson

import (
	"errors"
	"reflect"
	"testing"
)

func TestUnfenceAndDecode(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		order    []string
		dup      string
		syntax   string
	}{
		{name: "plain", in: ` {"b":1,"a":"x"} `, order: []string{"b", "a"}},
		{name: "json fence", in: "```json\n{\"a\":1}\n```", order: []string{"a"}},
		{name: "bare fence", in: "```\n{\"a\":1}\n```\n", order: []string{"a"}},
		{name: "empty", in: "  \n", syntax: "empty answer"},
		{name: "other language", in: "```yaml\na: 1\n```", syntax: `code fence info string "yaml", want empty or json`},
		{name: "unterminated fence", in: "```json\n{\"a\":1}", syntax: "unterminated code fence"},
		{name: "fence closed inline", in: "```json\n{\"a\":1}```", syntax: "closing code fence not on its own line"},
		{name: "empty fence", in: "```json\n\n```", syntax: "empty code fence"},
		{name: "array", in: `[1]`, syntax: "starts with ["},
		{name: "trailing text", in: `{"a":1} thanks`, syntax: "trailing data after the object"},
		{name: "duplicate key", in: `{"a":1,"a":2}`, dup: "a"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := Unfence([]byte(tc.in))
			var o Object
			if err == nil {
				o, err = Decode(body)
			}
			var se *SyntaxError
			var de *DuplicateKeyError
			switch {
			case tc.syntax != "":
				if !errors.As(err, &se) || se.Detail != tc.syntax {
					t.Fatalf("err = %v, want syntax error %q", err, tc.syntax)
				}
			case tc.dup != "":
				if !errors.As(err, &de) || de.Key != tc.dup {
					t.Fatalf("err = %v, want duplicate key %q", err, tc.dup)
				}
			default:
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(o.Order, tc.order) || len(o.Values) != len(tc.order) {
					t.Fatalf("order = %v, values = %v; want keys %v", o.Order, o.Values, tc.order)
				}
			}
		})
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	long := string(make([]byte, 100))
	if got := Clip(long); len(got) != 80+len("…") {
		t.Fatalf("Clip kept %d bytes", len(got))
	}
	if Clip("short") != "short" {
		t.Fatal("short values are kept whole")
	}
}

// FuzzDecodeTree: the single-pass parser and encoding/json's token stream accept the same
// texts, build the same trees and refuse the same duplicate keys.
func FuzzDecodeTree(f *testing.F) {
	for _, s := range []string{
		`{"a":1,"b":[true,false,null,"x"],"c":{"d":-0.5e+3}}`, `{"a":1,"a":2}`, `{"x":{"y":[{"z":1,"z":2}]}}`,
		`"\u00e9\ud83d\ude00\"\\"`, "\"\xff\"", `[1,]`, `{"a" 1}`, `01`, `-`, `1.`, `1e`, `tru`, `nul`, `[]`, `{}`,
		` 1 `, `1 2`, `"a` + "\n" + `"`, `{"a":1}x`, `[[[[]]]]`, `{"":0,"\u0000":1}`, `1E+2`, `-0`, `{"k":"v"`,
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, data []byte, strict bool) {
		got, gerr := DecodeTree(data, strict)
		want, werr := decodeTreeTokens(data, strict)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("%q: fast %v, tokens %v", data, gerr, werr)
		}
		var gd, wd *DuplicateKeyError
		if errors.As(gerr, &gd) != errors.As(werr, &wd) || (gd != nil && *gd != *wd) {
			t.Fatalf("%q: duplicate keys: fast %v, tokens %v", data, gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: fast %#v, tokens %#v", data, got, want)
		}
	})
}
