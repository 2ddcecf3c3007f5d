package argus

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/strictjson"
)

func TestHarvestIDs(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, probe string
		want        []string
	}{
		{"flat object", `{"id":"screen.list"}`, []string{"screen.list"}},
		{"every id key", `{"a":{"id":"1"},"b":{"identifier":"2"},"c":{"accessibilityIdentifier":"3"},"d":{"testId":"4"},
			"e":{"testid":"5"},"f":{"data-testid":"6"},"g":{"dataTestid":"7"},"h":{"name":"not-an-id"}}`,
			[]string{"1", "2", "3", "4", "5", "6", "7"}},
		{"web DOM tree with children arrays", `{"role":"main","id":"screen.list","children":[
			{"role":"list","data-testid":"list.items","children":[
				{"role":"listitem","attributes":{"data-testid":"row.item.1"}},
				{"role":"listitem","attributes":{"data-testid":"row.item.2"}}]},
			{"role":"button","name":"Create","id":"button.createItem"}]}`,
			[]string{"button.createItem", "list.items", "row.item.1", "row.item.2", "screen.list"}},
		{"top-level array, iOS shape", `[{"AXLabel":"Habits","accessibilityIdentifier":"screen.habits"},
			[{"accessibilityIdentifier":"row.habit.a"},{"frame":{"x":1},"accessibilityIdentifier":"row.habit.b"}]]`,
			[]string{"row.habit.a", "row.habit.b", "screen.habits"}},
		{"non-string id values are walked, not taken", `{"id":42,"identifier":{"testId":"inner"},"testid":null,"data-testid":["in.array",{"id":"deep"}]}`,
			[]string{"deep", "inner"}},
		{"empty ids ignored, duplicates merged", `{"id":"","x":[{"id":"a"},{"testId":"a"}]}`, []string{"a"}},
		{"duplicate keys in one object both count", `{"id":"first","id":"second"}`, []string{"first", "second"}},
		{"scalars have no ids", `"id"`, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := HarvestIDs([]byte(c.probe))
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != strings.Join(c.want, "|") {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"id":"a"} trailing`, strings.Repeat("[", strictjson.MaxDepth+1) + strings.Repeat("]", strictjson.MaxDepth+1)} {
		if _, err := HarvestIDs([]byte(bad)); err == nil {
			t.Errorf("probe %.20q accepted", bad)
		}
	}
}

func TestCheckA11yIDs(t *testing.T) {
	t.Parallel()
	present := []string{"screen.list", "row.item.1", "row.item.2", "button.createItem", "row.itemless"}
	cases := []struct {
		name     string
		contract []string
		present  int
		missing  []string
	}{
		{"exact ids", []string{"screen.list", "button.createItem"}, 2, nil},
		{"prefix family", []string{"row.item.*"}, 1, nil},
		{"family needs the whole prefix", []string{"row.item.*", "row.items.*"}, 1, []string{"row.items.*"}},
		{"exact entry is not a prefix", []string{"screen"}, 0, []string{"screen"}},
		{"star only at the end is special", []string{"row.*.1"}, 0, []string{"row.*.1"}},
		{"bare star matches anything present", []string{"*"}, 1, nil},
		{"missing keeps contract order", []string{"z.missing", "screen.list", "a.missing"}, 1, []string{"z.missing", "a.missing"}},
		{"empty contract", nil, 0, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := CheckA11yIDs(c.contract, present)
			if r.Expected != len(c.contract) || r.Present != c.present || strings.Join(r.Missing, ",") != strings.Join(c.missing, ",") {
				t.Errorf("%+v", r)
			}
			if r.Missing == nil {
				t.Error("missing must be [] not null")
			}
			if r.Green() != (len(c.missing) == 0) {
				t.Error("Green disagrees with missing")
			}
		})
	}
	if r := CheckA11yIDs([]string{"*"}, nil); r.Green() {
		t.Error("a family matches nothing when no ids are present")
	}
}

// FuzzHarvestIDs: any input either fails to parse or yields a sorted, duplicate-free
// list of non-empty ids, each of which really occurs in the input's text.
func FuzzHarvestIDs(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","children":[{"data-testid":"b"},{"testId":"c"}]}`,
		`[{"accessibilityIdentifier":"x"},[[{"identifier":"y"}]]]`,
		`{"id":{"id":"nested"},"dataTestid":"z","testid":7}`,
		`{"id":"dup","id":"dup2"}`,
		`{"id":"\u00e9\n"}`,
		`[]`, `null`, `"id"`, `{`, `{"id":"a"}x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ids, err := HarvestIDs(data)
		if err != nil {
			if ids != nil {
				t.Fatal("ids with an error")
			}
			return
		}
		if !sort.StringsAreSorted(ids) {
			t.Fatalf("not sorted: %q", ids)
		}
		for i, id := range ids {
			if id == "" {
				t.Fatal("empty id")
			}
			if i > 0 && ids[i-1] == id {
				t.Fatalf("duplicate %q", id)
			}
		}
		// Harvesting is idempotent over a probe built from the result.
		var b strings.Builder
		b.WriteString("[")
		for i, id := range ids {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(`{"id":` + quoteJSON(id) + `}`)
		}
		b.WriteString("]")
		again, err := HarvestIDs([]byte(b.String()))
		if err != nil || strings.Join(again, "\x00") != strings.Join(ids, "\x00") {
			t.Fatalf("re-harvest %q (%v), want %q", again, err, ids)
		}
	})
}

func quoteJSON(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
