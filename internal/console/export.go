package console

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// An export is the console as files: the pages of some batches (the batch, its charts,
// every AC and judge call, the trust report, the audit result), the artifacts as the
// console serves them and the stylesheet, with every link rewritten to a relative path
// inside the folder, so the site opens from disk (file://) and can be kept as a CI
// artifact. It is crawled from the console's own handler, so an exported page is the
// page the console serves. Nothing in it runs a script or reaches the network: pages carry
// no script (as served), forms (sign-in, spot-checks, resets, filters) are removed, since
// there is no server to post to, links to pages not exported (another batch, a filtered
// table) become plain text, and an HTML artifact is kept as its source text, never as a
// page that would run outside the console's sandbox. A page is held while its links are
// found and written to a stash until every file is known; anything else (a table's CSV,
// an artifact) goes to its file as the console serves it.

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

// ExportBatch names one batch to export.
type ExportBatch struct {
	Tenant, Batch string
}

// Exported says what an export wrote.
type Exported struct {
	// Index is the site's first page, relative to its folder.
	Index     string
	Pages     int
	Artifacts int
	Bytes     int64
}

// maxExportFiles bounds an export's files, a guard against a crawl that never ends.
const maxExportFiles = 2_000_000

// Export writes the console's pages of batches (and what they link to within them) into
// dir as a static site. cfg is the console's configuration; its Tenants are ignored (the
// caller decides what to export). The audit and the trust report are exported when cfg
// has their hooks.
func Export(ctx context.Context, cfg Config, dir string, batches []ExportBatch) (Exported, error) {
	cfg.Tenants = nil
	cfg.Pub = nil
	h := New(cfg)
	x := &exporter{h: h, dir: dir, files: map[string]string{}, types: map[string]string{}, tenants: map[string]bool{}, batches: map[string]bool{}}
	queue := []string{"/", "/static/console.css"}
	for _, b := range batches {
		x.tenants[b.Tenant] = true
		x.batches[b.Tenant+"/"+b.Batch] = true
		base := batchHref(b.Tenant, b.Batch)
		queue = append(queue, base, base+"/report", base+"/audit", base+"/compare")
	}
	var pages []string
	for len(queue) > 0 {
		if err := ctx.Err(); err != nil {
			return Exported{}, err
		}
		if len(x.files) > maxExportFiles {
			return Exported{}, fmt.Errorf("export: more than %d files", maxExportFiles)
		}
		link := queue[0]
		queue = queue[1:]
		if _, done := x.files[link]; done {
			continue
		}
		body, spooled, ctype, ok, err := x.get(ctx, link)
		if err != nil {
			return Exported{}, err
		}
		if !ok {
			x.files[link] = ""
			continue
		}
		file := x.fileFor(link, ctype)
		x.files[link], x.types[link] = file, ctype
		if spooled != "" {
			// Written as it was served (a CSV, an artifact): in place now.
			if err := x.place(spooled, file); err != nil {
				return Exported{}, err
			}
			if strings.HasPrefix(link, "/blob/") {
				x.out.Artifacts++
			}
			continue
		}
		if strings.HasPrefix(ctype, "text/html") && !strings.HasPrefix(link, "/blob/") {
			pages = append(pages, link)
			for _, l := range links(body) {
				if k, ok := x.key(link, l); ok {
					if _, seen := x.files[k]; !seen {
						queue = append(queue, k)
					}
				}
			}
			if err := x.stash(link, body); err != nil {
				return Exported{}, err
			}
			continue
		}
		if err := x.write(file, body); err != nil {
			return Exported{}, err
		}
		if strings.HasPrefix(link, "/blob/") {
			x.out.Artifacts++
		}
	}
	// Every page is written once all files are known, its links resolved against them.
	for _, p := range pages {
		body, err := os.ReadFile(x.stashed(p))
		if err != nil {
			return Exported{}, err
		}
		page, err := x.rewrite(p, body)
		if err != nil {
			return Exported{}, fmt.Errorf("export %s: %w", p, err)
		}
		if err := x.write(x.files[p], page); err != nil {
			return Exported{}, err
		}
		_ = os.Remove(x.stashed(p))
		x.out.Pages++
	}
	_ = os.RemoveAll(filepath.Join(dir, ".stash"))
	x.out.Index = x.files["/"]
	if err := VerifyExport(dir); err != nil {
		return x.out, err
	}
	return x.out, nil
}

type exporter struct {
	h   http.Handler
	dir string
	// files maps a console link (path and canonical query) to its file in the site, ""
	// for one that could not be exported; types to its media type.
	files   map[string]string
	types   map[string]string
	tenants map[string]bool
	batches map[string]bool
	out     Exported
}

// get fetches a link from the console; ok is false for anything but a 200. A page comes
// back as its body; anything else (a table's CSV, an artifact) is written to a file under
// the stash as it is served (spooled names it), so a 1,000,000-row CSV is not held.
func (x *exporter) get(ctx context.Context, link string) (body []byte, spooled, ctype string, ok bool, err error) {
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	req.RemoteAddr = "127.0.0.1:1"
	w := &spoolWriter{header: http.Header{}, dir: filepath.Join(x.dir, ".stash")}
	x.serve(w, req)
	if w.file != nil {
		if cerr := w.file.Close(); w.err == nil {
			w.err = cerr
		}
		spooled = w.file.Name()
	}
	if w.code == 0 {
		w.code = http.StatusOK
	}
	if w.err != nil || w.code != http.StatusOK {
		if spooled != "" {
			_ = os.Remove(spooled)
		}
		if w.err != nil {
			return nil, "", "", false, fmt.Errorf("export %s: %w", link, w.err)
		}
		return nil, "", "", false, nil
	}
	if spooled != "" {
		x.out.Bytes += w.n
		return nil, spooled, w.header.Get("Content-Type"), true, nil
	}
	var page []byte
	if w.html != nil {
		page = w.html.Bytes()
	}
	return page, "", w.header.Get("Content-Type"), true, nil
}

// serve runs the console's handler; one that gives up on a response it cannot finish
// (http.ErrAbortHandler, as the blob handler does on a failed copy) leaves an error.
func (x *exporter) serve(w *spoolWriter, req *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			if w.err == nil {
				w.err = fmt.Errorf("the console gave up on the response")
			}
		}
	}()
	x.h.ServeHTTP(w, req)
}

// spoolWriter is a response as the exporter keeps it: an HTML page in memory, to have its
// links rewritten, anything else in a file of dir as it is written.
type spoolWriter struct {
	header http.Header
	code   int
	dir    string
	html   *bytes.Buffer
	file   *os.File
	n      int64
	err    error
}

func (w *spoolWriter) Header() http.Header { return w.header }

func (w *spoolWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *spoolWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	switch {
	case w.err != nil:
		return 0, w.err
	case w.code != http.StatusOK:
		return len(p), nil
	case w.html == nil && w.file == nil:
		if strings.HasPrefix(w.header.Get("Content-Type"), "text/html") {
			w.html = &bytes.Buffer{}
			break
		}
		if w.err = os.MkdirAll(w.dir, 0o755); w.err != nil {
			return 0, w.err
		}
		if w.file, w.err = os.CreateTemp(w.dir, "spool-*"); w.err != nil {
			return 0, w.err
		}
	}
	w.n += int64(len(p))
	if w.html != nil {
		return w.html.Write(p)
	}
	n, err := w.file.Write(p)
	w.err = err
	return n, err
}

// place moves a spooled file to its place in the site.
func (x *exporter) place(spooled, rel string) error {
	p := filepath.Join(x.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.Rename(spooled, p); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	// As every file of the site (CreateTemp made it the owner's only).
	if err := os.Chmod(p, 0o644); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return nil
}

// key is the console link a page's reference l stands for, when it is exported: a link
// to the site's own pages (the index, a selected batch and what is below it, its
// artifacts, the stylesheet) with no query but a table's page.
func (x *exporter) key(from, l string) (string, bool) {
	u, err := url.Parse(l)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" {
		return "", false
	}
	base, _ := url.Parse(from)
	u = base.ResolveReference(u)
	u.Fragment = ""
	p := u.Path
	q := u.Query()
	for k := range q {
		if k != "page" {
			return "", false
		}
	}
	if len(q) > 0 && !x.isBatchPage(p) {
		return "", false
	}
	key := p
	if len(q) > 0 {
		key += "?" + q.Encode()
	}
	switch {
	case p == "/", p == "/static/console.css":
		return key, true
	case strings.HasPrefix(p, "/blob/"):
		parts := strings.Split(p, "/")
		return key, len(parts) == 4 && x.tenants[parts[2]]
	case !strings.HasPrefix(p, "/t/"):
		return "", false
	}
	parts := strings.Split(strings.TrimPrefix(p, "/t/"), "/")
	switch {
	case len(parts) == 2 && parts[1] == "":
		// A tenant's list of batches.
		return key, x.tenants[parts[0]]
	case len(parts) < 3 || parts[1] != "b" || !x.batches[parts[0]+"/"+parts[2]]:
		return "", false
	case strings.HasSuffix(p, ".csv"):
		// The table as CSV, unfiltered.
		return key, len(parts) == 4 && parts[3] == "export.csv" && len(q) == 0
	}
	return key, true
}

// isBatchPage reports whether p is a batch's page ("/t/<tenant>/b/<batch>").
func (x *exporter) isBatchPage(p string) bool {
	parts := strings.Split(strings.TrimPrefix(p, "/t/"), "/")
	return strings.HasPrefix(p, "/t/") && len(parts) == 3 && parts[1] == "b"
}

// artifactExt names an artifact's file by the type the console serves it with. HTML is
// kept as its source (.html.txt): opened from disk it would be a live page, outside the
// sandbox the console serves artifacts under.
func artifactExt(ctype string) string {
	mt, _, _ := mime.ParseMediaType(ctype)
	switch mt {
	case "image/png":
		return ".png"
	case "image/jpeg":
		return ".jpg"
	case "image/gif":
		return ".gif"
	case "image/webp":
		return ".webp"
	case "text/html", "application/xhtml+xml", "image/svg+xml":
		return ".html.txt"
	case "application/json":
		return ".json"
	case "text/csv":
		return ".csv"
	}
	if strings.HasPrefix(mt, "text/") {
		return ".txt"
	}
	return ".bin"
}

// fileFor is the site's file of a link served as ctype.
func (x *exporter) fileFor(link, ctype string) string {
	p, _, _ := strings.Cut(link, "?")
	switch {
	case strings.HasPrefix(p, "/blob/"):
		return strings.TrimPrefix(p, "/") + artifactExt(ctype)
	case p == "/static/console.css", strings.HasSuffix(p, ".csv"):
		return strings.TrimPrefix(p, "/")
	}
	return ExportPath(link)
}

func (x *exporter) write(rel string, data []byte) error {
	p := filepath.Join(x.dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	x.out.Bytes += int64(len(data))
	return nil
}

// stashed is where a page waits, as served, until every file of the site is known.
func (x *exporter) stashed(link string) string {
	return filepath.Join(x.dir, ".stash", filepath.FromSlash(x.files[link]))
}

func (x *exporter) stash(link string, body []byte) error {
	p := x.stashed(link)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("export: %w", err)
	}
	return os.WriteFile(p, body, 0o644)
}

// links are the references of an HTML page: href, src and action attributes.
func links(body []byte) []string {
	var out []string
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return out
		case html.StartTagToken, html.SelfClosingTagToken:
			for _, a := range z.Token().Attr {
				if a.Key == "href" || a.Key == "src" {
					out = append(out, a.Val)
				}
			}
		}
	}
}

// relTo is the relative reference from the file from to the file to, both site paths.
func relTo(from, to string) string {
	r, err := filepath.Rel(filepath.Dir(filepath.FromSlash(from)), filepath.FromSlash(to))
	if err != nil {
		return to
	}
	return filepath.ToSlash(r)
}

// rewrite makes a served page a page of the site: links to exported files relative,
// other links plain text, forms and reloads gone, and a note saying what it is.
func (x *exporter) rewrite(link string, body []byte) ([]byte, error) {
	from := x.files[link]
	var out bytes.Buffer
	z := html.NewTokenizer(bytes.NewReader(body))
	skip := 0 // depth inside a removed form
	for {
		tt := z.Next()
		if tt == html.ErrorToken {
			if z.Err() == io.EOF {
				return out.Bytes(), nil
			}
			return nil, z.Err()
		}
		tok := z.Token()
		if skip > 0 {
			switch {
			case tt == html.StartTagToken && tok.DataAtom == atom.Form:
				skip++
			case tt == html.EndTagToken && tok.DataAtom == atom.Form:
				skip--
			}
			continue
		}
		switch tt {
		case html.StartTagToken, html.SelfClosingTagToken:
			switch tok.DataAtom {
			case atom.Form:
				if tt == html.StartTagToken {
					skip = 1
				}
				continue
			case atom.Meta:
				if attr(tok, "http-equiv") == "refresh" {
					continue
				}
			case atom.Script:
				return nil, fmt.Errorf("the console served a script")
			}
			var attrs []html.Attribute
			for _, a := range tok.Attr {
				if strings.HasPrefix(a.Key, "on") {
					return nil, fmt.Errorf("the console served a script attribute %s", a.Key)
				}
				if a.Key != "href" && a.Key != "src" {
					attrs = append(attrs, a)
					continue
				}
				if strings.HasPrefix(a.Val, "#") {
					attrs = append(attrs, a)
					continue
				}
				k, ok := x.key(link, a.Val)
				if !ok || x.files[k] == "" {
					// Not in the site: the text stays, the link goes.
					if a.Key == "href" {
						attrs = append(attrs, html.Attribute{Key: "title", Val: "not part of this export: " + a.Val})
					}
					continue
				}
				ref := relTo(from, x.files[k])
				if _, frag, ok := strings.Cut(a.Val, "#"); ok {
					ref += "#" + frag
				}
				attrs = append(attrs, html.Attribute{Key: a.Key, Val: ref})
			}
			tok.Attr = attrs
			out.WriteString(tok.String())
			if tok.DataAtom == atom.Main && tt == html.StartTagToken {
				fmt.Fprintf(&out, "\n<p class=\"muted\" id=\"exported\">A static copy of the console, exported %s: links to pages not in it are plain text, and nothing here can be changed.</p>",
					html.EscapeString(time.Now().UTC().Format("2006-01-02 15:04 UTC")))
			}
		default:
			out.WriteString(tok.String())
		}
	}
}

func attr(t html.Token, key string) string {
	i := slices.IndexFunc(t.Attr, func(a html.Attribute) bool { return a.Key == key })
	if i < 0 {
		return ""
	}
	return t.Attr[i].Val
}

// VerifyExport checks a site Export wrote: every page's links and sources are relative
// paths to files inside dir (a fragment allowed), and no page holds a script, a script
// attribute or a form. Export runs it on what it wrote; it returns every problem found.
func VerifyExport(dir string) error {
	var problems []string
	root, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
			return err
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		z := html.NewTokenizer(bytes.NewReader(body))
		for {
			tt := z.Next()
			if tt == html.ErrorToken {
				break
			}
			if tt != html.StartTagToken && tt != html.SelfClosingTagToken {
				continue
			}
			tok := z.Token()
			if tok.DataAtom == atom.Script || tok.DataAtom == atom.Form {
				problems = append(problems, fmt.Sprintf("%s: a <%s>", rel, tok.Data))
			}
			for _, a := range tok.Attr {
				if strings.HasPrefix(a.Key, "on") {
					problems = append(problems, fmt.Sprintf("%s: script attribute %s", rel, a.Key))
				}
				if a.Key != "href" && a.Key != "src" && a.Key != "action" || strings.HasPrefix(a.Val, "#") {
					continue
				}
				u, err := url.Parse(a.Val)
				if err != nil || u.Scheme != "" || u.Host != "" || strings.HasPrefix(u.Path, "/") || u.RawQuery != "" {
					problems = append(problems, fmt.Sprintf("%s: %s=%q is not a relative path in the site", rel, a.Key, a.Val))
					continue
				}
				target := filepath.Clean(filepath.Join(filepath.Dir(p), filepath.FromSlash(u.Path)))
				if inside, err := filepath.Rel(root, target); err != nil || !filepath.IsLocal(inside) {
					problems = append(problems, fmt.Sprintf("%s: %s=%q leaves the site", rel, a.Key, a.Val))
				} else if st, err := os.Stat(target); err != nil || st.IsDir() {
					problems = append(problems, fmt.Sprintf("%s: %s=%q names no file of the site", rel, a.Key, a.Val))
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		if len(problems) > 20 {
			problems = append(problems[:20], fmt.Sprintf("and %d more", len(problems)-20))
		}
		return fmt.Errorf("export %s: %s", dir, strings.Join(problems, "; "))
	}
	return nil
}
