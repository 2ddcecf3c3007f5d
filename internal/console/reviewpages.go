package console

import (
	"bytes"
	"encoding/json"
	"html/template"
	"strconv"
	"strings"
)

// The review pages register themselves here, apart from the console's first pages.
func init() {
	pageNames = append(pageNames, "compare.html", "call.html")
	for k, v := range reviewFuncs {
		funcs[k] = v
	}
}

// facetSelect is one filter of the AC table.
type facetSelect struct {
	Name, Label string
	Values      []facet
	Selected    string
}

var reviewFuncs = template.FuncMap{
	"batchHref": batchHref,
	"pretty":    prettyJSON,
	"plural":    plural,
	"inc":       func(n int) int { return n + 1 },
	"facetSel": func(name, label string, values []facet, selected string) facetSelect {
		return facetSelect{Name: name, Label: label, Values: values, Selected: selected}
	},
}

// prettyJSON indents text that is a compact JSON object or array (a runner transcript, a
// judge's answer, a request's structured part) so a person can read it; any other text,
// and JSON already laid out over lines, is shown as it is. The exact bytes stay one link
// away.
func prettyJSON(text string) string {
	t := strings.TrimSpace(text)
	if len(t) < 2 || strings.Contains(t, "\n") || (t[0] != '{' && t[0] != '[') || !json.Valid([]byte(t)) {
		return text
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, []byte(t), "", "  "); err != nil {
		return text
	}
	return buf.String()
}

// plural is "1 AC", "2 ACs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}
