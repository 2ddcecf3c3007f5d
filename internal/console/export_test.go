package console_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
)

// TestExportSite exports one batch of a team: the site holds its page, every AC and
// judge call, the report and audit pages, its artifacts and the stylesheet, with every
// link inside the folder, no script and no form; another team's batch and the first run
// of the same batch file are not in it, and links to them are plain text.
func TestExportSite(t *testing.T) {
	s := startStack(t)
	// One batch file run twice: the second run's comparison defaults to the first.
	a := batchA(t)
	first := s.Submit(a, tenantA)
	s.WaitComplete(first, 30*time.Second)
	second := s.Submit(a, tenantA)
	s.WaitComplete(second, 30*time.Second)
	subB := s.Submit(batchB(t), tenantB)
	s.WaitComplete(subB, 30*time.Second)

	dir := t.TempDir()
	out, err := console.Export(context.Background(), console.Config{Buckets: s.run.Buckets, Store: s.Store},
		dir, []console.ExportBatch{{Tenant: tenantA, Batch: second.BatchID}})
	if err != nil {
		t.Fatal(err)
	}
	if out.Index != "index.html" || out.Pages < 8 || out.Artifacts == 0 {
		t.Fatalf("exported %+v", out)
	}
	if err := console.VerifyExport(dir); err != nil {
		t.Fatal(err)
	}
	batchPage := filepath.Join(dir, "t", tenantA, "b", second.BatchID+".html")
	page, err := os.ReadFile(batchPage)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="chart-outcomes"`, "<svg", `href="../../../static/console.css"`, `id="exported"`,
		`href="` + second.BatchID + `/report.html"`, `href="` + second.BatchID + `/audit.html"`, `href="` + second.BatchID + `/compare.html"`} {
		if !strings.Contains(string(page), want) {
			t.Errorf("batch page lacks %q", want)
		}
	}
	for _, gone := range []string{"<form", "/export.csv?", `href="/`} {
		if strings.Contains(string(page), gone) {
			t.Errorf("batch page holds %q", gone)
		}
	}
	// The table's CSV, written to its file as it was served.
	csvFile := filepath.Join(dir, "t", tenantA, "b", second.BatchID, "export.csv")
	if st, err := os.Stat(csvFile); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("the CSV: %v %v", st, err)
	} else if sheet, _ := os.ReadFile(csvFile); strings.Count(string(sheet), "\n") != 6 || !strings.HasPrefix(string(sheet), "index,ac_id,") {
		t.Errorf("the CSV:\n%s", sheet)
	}
	if _, err := os.Stat(filepath.Join(dir, ".stash")); err == nil {
		t.Error("the stash is left in the site")
	}
	jobs, _ := filepath.Glob(filepath.Join(dir, "t", tenantA, "b", second.BatchID, "j", "*.html"))
	calls, _ := filepath.Glob(filepath.Join(dir, "t", tenantA, "b", second.BatchID, "j", "*", "call", "*.html"))
	if len(jobs) != 5 || len(calls) == 0 {
		t.Errorf("job pages %d, call pages %d", len(jobs), len(calls))
	}
	// The compare page is the one against the previous run of the same batch file.
	cmp, _ := os.ReadFile(filepath.Join(dir, "t", tenantA, "b", second.BatchID, "compare.html"))
	if !strings.Contains(string(cmp), first.BatchID) || !strings.Contains(string(cmp), "the previous run of the same batch file") {
		t.Errorf("compare page:\n%s", cmp)
	}
	for _, absent := range []string{filepath.Join(dir, "t", tenantB), filepath.Join(dir, "blob", tenantB), filepath.Join(dir, "t", tenantA, "b", first.BatchID+".html")} {
		if _, err := os.Stat(absent); err == nil {
			t.Errorf("%s exported", absent)
		}
	}
}
