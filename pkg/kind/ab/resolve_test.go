package ab

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseVerifyMapJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    map[string]Pair
		wantErr bool
	}{
		{"contract form", `{"AC-7": {"reference": "ref/7.png", "ours": "out/7.png"}, "AC-12": {"ours": "o", "reference": "r"}}`,
			map[string]Pair{"AC-7": {Reference: "ref/7.png", Ours: "out/7.png"}, "AC-12": {Reference: "r", Ours: "o"}}, false},
		{"leading whitespace", "\n  {\"AC-1\": {\"reference\": \"r\"}}\n", map[string]Pair{"AC-1": {Reference: "r"}}, false},
		{"paths with spaces", `{"AC-1": {"reference": "My Docs/r.md", "ours": "o.md"}}`, map[string]Pair{"AC-1": {Reference: "My Docs/r.md", Ours: "o.md"}}, false},
		{"empty map", `{}`, map[string]Pair{}, false},
		{"typo key", `{"AC-1": {"refrence": "r", "ours": "o"}}`, nil, true},
		{"duplicate AC", `{"AC-1": {"ours": "o"}, "AC-1": {"ours": "p"}}`, nil, true},
		{"duplicate side", `{"AC-1": {"ours": "o", "ours": "p"}}`, nil, true},
		{"names nothing", `{"AC-1": {}}`, nil, true},
		{"blank path", `{"AC-1": {"ours": " "}}`, nil, true},
		{"number path", `{"AC-1": {"ours": 7}}`, nil, true},
		{"null path", `{"AC-1": {"ours": null}}`, nil, true},
		{"entry not object", `{"AC-1": "o"}`, nil, true},
		{"entry null", `{"AC-1": null}`, nil, true},
		{"empty AC id", `{"": {"ours": "o"}}`, nil, true},
		{"trailing data", `{"AC-1": {"ours": "o"}} x`, nil, true},
		{"truncated", `{"AC-1": {"ours": "o"}`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVerifyMap([]byte(tc.in))
			if tc.wantErr {
				if !errors.Is(err, ErrVerifyMap) {
					t.Fatalf("err = %v, want ErrVerifyMap", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseVerifyMapMarkdown(t *testing.T) {
	t.Parallel()
	doc := strings.Join([]string{
		"# VERIFY: checkout page", // 1
		"",                        // 2
		"AC-7: reference=ref/hero.png ours=out/hero.png",             // 3
		"AC-8: the reference is the old landing page",                // 4: prose, ignored
		"- AC-12: ours=out/12.html reference=https://example.com/12", // 5: list item, either order
		"  AC-3.1:   reference=r3   ours=o3  \r",                     // 6: indented, CRLF
		"Notes on AC-9: reference=r9 ours=o9 inline",                 // 7: not at line start, ignored
		"AC 10: reference=r ours=o",                                  // 8: not the grammar, ignored
	}, "\n")
	got, err := ParseVerifyMap([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Pair{
		"AC-7":   {Reference: "ref/hero.png", Ours: "out/hero.png"},
		"AC-12":  {Reference: "https://example.com/12", Ours: "out/12.html"},
		"AC-3.1": {Reference: "r3", Ours: "o3"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}

	empty, err := ParseVerifyMap([]byte("# nothing here\n"))
	if err != nil || len(empty) != 0 {
		t.Errorf("doc without lines = %v, %v; want empty map", empty, err)
	}
}

func TestParseVerifyMapMarkdownErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		line string
		why  string
	}{
		{"only reference", "AC-7: reference=r", "exactly"},
		{"only ours", "AC-7: ours=o", "exactly"},
		{"extra token", "AC-7: reference=r ours=o extra", "exactly"},
		{"path with space", "AC-7: reference=My Docs/r ours=o", "exactly"},
		{"empty path", "AC-7: reference= ours=o", "empty path"},
		{"twice", "AC-7: reference=r reference=s", "twice"},
		{"unknown key", "AC-7: reference=r mine=o", "unknown key"},
		{"not key=value", "AC-7: reference=r ours", "key=path"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			doc := "# title\n\n" + tc.line + "\n"
			_, err := ParseVerifyMap([]byte(doc))
			var le *VerifyLineError
			if !errors.As(err, &le) {
				t.Fatalf("err = %v, want *VerifyLineError", err)
			}
			if le.Line != 3 || le.Text != tc.line || !strings.Contains(le.Reason, tc.why) {
				t.Errorf("err = %+v, want line 3 %q mentioning %q", le, tc.line, tc.why)
			}
			if !strings.Contains(err.Error(), "line 3") {
				t.Errorf("message %q does not name the line", err)
			}
		})
	}

	_, err := ParseVerifyMap([]byte("AC-7: reference=a ours=b\nx\nAC-7: reference=c ours=d\n"))
	var le *VerifyLineError
	if !errors.As(err, &le) || le.Line != 3 || !strings.Contains(le.Reason, "line 1") {
		t.Errorf("duplicate AC: err = %v, want line 3 referring to line 1", err)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	verify := map[string]Pair{
		"AC-7": {Reference: "vr7", Ours: "vo7"},
		"AC-8": {Reference: "vr8"},
	}
	tests := []struct {
		name     string
		ac       string
		explicit Pair
		want     Pair
		source   string
		missing  string // "" means no error
	}{
		{"verify only", "AC-7", Pair{}, Pair{Reference: "vr7", Ours: "vo7"}, SourceVerify, ""},
		{"explicit wins", "AC-7", Pair{Reference: "er", Ours: "eo"}, Pair{Reference: "er", Ours: "eo"}, SourceExplicit, ""},
		{"explicit without verify", "AC-99", Pair{Reference: "er", Ours: "eo"}, Pair{Reference: "er", Ours: "eo"}, SourceExplicit, ""},
		{"explicit ours, verify reference", "AC-7", Pair{Ours: "eo"}, Pair{Reference: "vr7", Ours: "eo"}, SourceMixed, ""},
		{"explicit reference, verify ours", "AC-7", Pair{Reference: "er"}, Pair{Reference: "er", Ours: "vo7"}, SourceMixed, ""},
		{"verify half, explicit half", "AC-8", Pair{Ours: "eo"}, Pair{Reference: "vr8", Ours: "eo"}, SourceMixed, ""},
		{"verify half missing", "AC-8", Pair{}, Pair{Reference: "vr8"}, "", "missing ours"},
		{"nothing", "AC-9", Pair{}, Pair{}, "", "missing ours and reference"},
		{"explicit half missing", "AC-9", Pair{Reference: "er"}, Pair{Reference: "er"}, "", "missing ours"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, source, err := Resolve(tc.ac, tc.explicit, verify)
			if got != tc.want || source != tc.source {
				t.Errorf("Resolve = %+v, %q; want %+v, %q", got, source, tc.want, tc.source)
			}
			if tc.missing == "" {
				if err != nil {
					t.Errorf("err = %v", err)
				}
				return
			}
			if !errors.Is(err, ErrNoArtifacts) || !strings.Contains(err.Error(), tc.missing) || !strings.Contains(err.Error(), tc.ac) {
				t.Errorf("err = %v, want ErrNoArtifacts naming %s and %q", err, tc.ac, tc.missing)
			}
		})
	}
	if _, _, err := Resolve("AC-1", Pair{}, nil); !errors.Is(err, ErrNoArtifacts) {
		t.Errorf("nil verify map: %v", err)
	}
}

func FuzzParseVerifyMap(f *testing.F) {
	for _, s := range []string{
		`{"AC-7": {"reference": "r", "ours": "o"}}`,
		`{"AC-7": {"ours": "o"}, "AC-7": {"ours": "p"}}`,
		"AC-7: reference=r ours=o\n- AC-8: ours=o reference=r\n",
		"AC-7: reference=r\n",
		"# doc\nAC-7: the reference\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseVerifyMap(data)
		if err != nil {
			var le *VerifyLineError
			if !errors.Is(err, ErrVerifyMap) && !errors.As(err, &le) {
				t.Fatalf("error of unexpected kind: %v", err)
			}
			return
		}
		for ac, p := range m {
			if strings.TrimSpace(ac) == "" || p == (Pair{}) {
				t.Fatalf("accepted an empty entry %q: %+v", ac, p)
			}
		}
		// Whatever parsed must survive the JSON contract form unchanged.
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseVerifyMap(out)
		if err != nil || !reflect.DeepEqual(again, m) {
			t.Fatalf("round trip of %s = %v, %v; want %v", out, again, err, m)
		}
	})
}
