package console

import "html/template"

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
	"inc":       func(n int) int { return n + 1 },
	"facetSel": func(name, label string, values []facet, selected string) facetSelect {
		return facetSelect{Name: name, Label: label, Values: values, Selected: selected}
	},
}
