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
