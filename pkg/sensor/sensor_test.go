package sensor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestTruncateLabelsNested(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 10_000)
	probe := map[string]any{
		"tag":  "main",
		"name": long,
		"children": []any{
			map[string]any{"name": "short", "children": []any{long, 42.0, true, nil}},
			[]any{[]any{long}},
		},
	}
	got := TruncateLabels(probe, MaxLabel).(map[string]any)

	checkCut := func(where string, v any) {
		t.Helper()
		s, ok := v.(string)
		if !ok {
			t.Fatalf("%s: got %T, want string", where, v)
		}
		if n := utf8.RuneCountInString(s); n != MaxLabel {
			t.Errorf("%s: %d runes, want %d", where, n, MaxLabel)
		}
		if !strings.HasSuffix(s, Cut) {
			t.Errorf("%s: cut string does not end with the marker %q", where, Cut)
		}
		if !strings.HasPrefix(s, strings.Repeat("x", MaxLabel-1)) {
			t.Errorf("%s: cut string lost its prefix", where)
		}
	}
	checkCut("root name", got["name"])
	kids := got["children"].([]any)
	first := kids[0].(map[string]any)
	if first["name"] != "short" {
		t.Errorf("short label changed: %q", first["name"])
	}
	grand := first["children"].([]any)
	checkCut("grandchild string", grand[0])
	if grand[1] != 42.0 || grand[2] != true || grand[3] != nil {
		t.Errorf("non-string values changed: %v", grand[1:])
	}
	checkCut("nested array", kids[1].([]any)[0].([]any)[0])
	if got["tag"] != "main" {
		t.Errorf("tag changed: %v", got["tag"])
	}
}

func TestTruncateLabelsMultibyte(t *testing.T) {
	t.Parallel()
	// 3-byte and 4-byte runes: a byte-based cut would split a character.
	for _, unit := range []string{"é", "語", "🙂"} {
		s := strings.Repeat(unit, 10_000)
		got := TruncateLabels(s, MaxLabel).(string)
		if !utf8.ValidString(got) {
			t.Fatalf("%q: cut produced invalid UTF-8", unit)
		}
		if n := utf8.RuneCountInString(got); n != MaxLabel {
			t.Errorf("%q: %d runes, want %d", unit, n, MaxLabel)
		}
		if want := strings.Repeat(unit, MaxLabel-1) + Cut; got != want {
			t.Errorf("%q: unexpected cut", unit)
		}
	}
	exact := strings.Repeat("語", MaxLabel)
	if got := TruncateLabels(exact, MaxLabel); got != exact {
		t.Error("a label of exactly the limit must not be cut")
	}
}

func TestTruncateLabelsKeysAndTypedContainers(t *testing.T) {
	t.Parallel()
	longKey := strings.Repeat("k", 1000)
	m := map[string]any{longKey: "v", "ok": []string{strings.Repeat("s", 300)}}
	TruncateLabels(m, 10)
	if _, ok := m[longKey]; ok {
		t.Error("long key kept")
	}
	if m[strings.Repeat("k", 9)+Cut] != "v" {
		t.Errorf("cut key missing: %v", m)
	}
	if s := m["ok"].([]string)[0]; utf8.RuneCountInString(s) != 10 {
		t.Errorf("[]string element not cut: %d runes", utf8.RuneCountInString(s))
	}
	ms := map[string]string{"a": strings.Repeat("b", 50)}
	TruncateLabels(ms, 10)
	if utf8.RuneCountInString(ms["a"]) != 10 {
		t.Errorf("map[string]string value not cut: %q", ms["a"])
	}
}

func TestTruncateJSON(t *testing.T) {
	t.Parallel()
	in := fmt.Sprintf(`{"n": 12345678901234567890, "label": %q, "list": [%q]}`,
		strings.Repeat("é", 10_000), "ignore previous instructions <b>")
	out, err := TruncateJSON([]byte(in), MaxLabel)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), `"n":12345678901234567890`) {
		t.Errorf("number not preserved exactly: %s", out)
	}
	if !strings.Contains(string(out), `<b>`) {
		t.Errorf("probe should not be HTML-escaped: %s", out)
	}
	var v map[string]any
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	if n := utf8.RuneCountInString(v["label"].(string)); n != MaxLabel {
		t.Errorf("label %d runes, want %d", n, MaxLabel)
	}
	for _, bad := range []string{`{"a":1} x`, `{`, `not json`} {
		if _, err := TruncateJSON([]byte(bad), MaxLabel); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}

func TestErrorKinds(t *testing.T) {
	t.Parallel()
	cause := context.DeadlineExceeded
	u := fmt.Errorf("render view: %w", Unrenderable(cause, "page answered %d", 404))
	if !IsUnrenderable(u) || IsInfrastructure(u) {
		t.Errorf("want unrenderable: %v", u)
	}
	if !errors.Is(u, context.DeadlineExceeded) {
		t.Error("cause lost")
	}
	if !strings.Contains(u.Error(), "page answered 404") {
		t.Errorf("reason missing: %v", u)
	}
	i := Infrastructure(errors.New("exec: not found"), "start browser")
	if !IsInfrastructure(i) || IsUnrenderable(i) {
		t.Errorf("want infrastructure: %v", i)
	}
	if FaultOf(context.Canceled) != 0 {
		t.Error("a bare error has no fault")
	}
}

func TestViewSize(t *testing.T) {
	t.Parallel()
	if got := (View{}).Size(); got != (Viewport{DefaultWidth, DefaultHeight}) {
		t.Errorf("default size %v", got)
	}
	if got := (View{Viewport: Viewport{800, 600}}).Size(); got != (Viewport{800, 600}) {
		t.Errorf("explicit size %v", got)
	}
}
