package console

import (
	"net/url"
	"strings"
)

// ExportPath is the file, relative to the folder of an exported site (Export), that holds
// the console's page at path p ("/t/default/b/<batch>/j/AC-1", a query allowed): the
// path with .html added, index.html for a folder's page, and a page of a table's query
// ("?page=2") beside its first page.
func ExportPath(p string) string {
	path, query, _ := strings.Cut(p, "?")
	path = strings.TrimPrefix(path, "/")
	if path == "" || strings.HasSuffix(path, "/") {
		path += "index"
	}
	if query != "" {
		if v, err := url.ParseQuery(query); err == nil {
			query = v.Encode()
		}
		path += "_" + strings.NewReplacer("=", "-", "&", "_", "%", "", "+", "-").Replace(query)
	}
	return path + ".html"
}
