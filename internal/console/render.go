package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"
)

//go:embed templates/*.html static/console.css
var assets embed.FS

// pageNames are the templates that are whole pages; each is parsed with the layout.
var pageNames = []string{"index.html", "batch.html", "job.html", "audit.html", "login.html", "error.html", "report.html", "review.html", "reviewitem.html", "queues.html"}

type pages struct {
	t map[string]*template.Template
}

var funcs = template.FuncMap{
	"pct": func(done, total int) int {
		if total <= 0 {
			return 0
		}
		return done * 100 / total
	},
	"conf": func(f *float64) string {
		if f == nil {
			return ""
		}
		return fmt.Sprintf("%.2f", *f)
	},
	"score": func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"when": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"join": strings.Join,
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"deref": func(b *bool) string {
		if b == nil {
			return "n/a"
		}
		if *b {
			return "yes"
		}
		return "no"
	},
}

func mustParsePages() *pages {
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t := template.Must(template.New(name).Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/parts*.html", "templates/"+name))
		if name == "job.html" {
			// The kinds' sections of the job page (stage.Paging), from their folders.
			t = template.Must(t.Parse(kindSections()))
		}
		p.t[name] = t
	}
	return p
}

// view is what the layout needs around a page.
type view struct {
	Title string
	// Refresh reloads the page after this many seconds while its work is in progress
	// (a meta refresh: the console runs no script).
	Refresh int
	Crumbs  []crumb
	Page    any
	// Filled in by render.
	Who      string
	Open     bool
	SignedIn bool
}

type crumb struct {
	Label string
	Href  string
}

// render executes a page into a buffer first, so a template error never leaves half a
// page behind a 200.
func (s *server) render(w http.ResponseWriter, r *http.Request, code int, name string, v view) {
	if c, ok := s.auth.identify(r); ok {
		v.Who, v.SignedIn = c.who(), !s.auth.open()
	}
	v.Open = s.auth.open()
	var buf bytes.Buffer
	if err := s.pages.t[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		s.log.Error("render", "page", name, "err", err)
		http.Error(w, "the console could not render this page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

func serveCSS(w http.ResponseWriter, r *http.Request) {
	data, _ := assets.ReadFile("static/console.css")
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(data)
}
