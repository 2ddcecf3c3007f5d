package console_test

import (
	"bytes"
	"flag"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/console"
	"github.com/tribunal-dev/tribunal/internal/testutil/browsertest"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

var updateJobPages = flag.Bool("update-job-pages", false, "rewrite testdata/jobpages.golden")

// jobPageVolatile are the parts of a job page that differ between two runs of the same
// batch: ids, times, hashes, tokens, latencies, sizes.
var jobPageVolatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{64}`), "HASH"},
	{regexp.MustCompile(`[0-9a-f]{32}`), "EVID"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?( UTC|Z|[+-]\d\d:\d\d)?`), "TIME"},
	{regexp.MustCompile(`console-a-[0-9A-Za-z-]+|rubric-[0-9A-Za-z-]+`), "BATCH"},
	{regexp.MustCompile(`[0-9A-Z]{26}`), "ULID"},
	{regexp.MustCompile(`(name="csrf" value=")[^"]*`), "${1}CSRF"},
	{regexp.MustCompile(`\d+ ms\b`), "N ms"},
	{regexp.MustCompile(`"latency_ms": \d+,\n\s*`), ""},
	{regexp.MustCompile(`,\n\s*"latency_ms": \d+`), ""},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:PORT"},
	{regexp.MustCompile(`\d+(\.\d+)? (KiB|MiB|B)\b`), "SIZE"},
	{regexp.MustCompile(`"size": \d+`), `"size": N`},
}

// TestJobPagesGolden: every shipped kind's job page, as HTML and as the API's JSON, is
// what testdata/jobpages.golden holds (written before the kinds supplied their own
// sections), once the parts that differ between runs are masked.
func TestJobPagesGolden(t *testing.T) {
	s := startStack(t)
	subA := s.Submit(batchA(t), tenantA)
	withChromium := browsertest.Available()
	jobs := []string{"AC-img", "AC-text", "AC-missing", "AC-crit", "AC-eq"}
	s.WaitComplete(subA, 30*time.Second)
	type page struct{ tenant, batch, job string }
	var pages []page
	for _, j := range jobs {
		pages = append(pages, page{subA.Tenant, subA.BatchID, j})
	}
	if withChromium {
		subR := s.Submit(s.rubricBatch(t), tenantA)
		s.waitJob(t, subR, viewJob, 45*time.Second, "a sign-off waiting for a person", func(r *records.Job) bool {
			return r.Status == events.StatusAwaitingSpotcheck
		})
		pages = append(pages, page{subR.Tenant, subR.BatchID, viewJob})
	}
	h := console.New(console.Config{Buckets: s.run.Buckets, Store: s.Store, Pub: s.run.Pub,
		Tenants: map[string]string{tokA: tenantA, tokB: tenantB, tokAdmin: console.AllTenants}})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	w := newWeb(t, srv.URL)
	var got bytes.Buffer
	for _, p := range pages {
		for _, path := range []string{"/t/" + p.tenant + "/b/" + p.batch + "/j/" + p.job, "/api/t/" + p.tenant + "/b/" + p.batch + "/j/" + p.job} {
			resp, body := w.get(path, tokA)
			if resp.StatusCode != 200 {
				t.Fatalf("GET %s: %d", path, resp.StatusCode)
			}
			for _, v := range jobPageVolatile {
				body = v.re.ReplaceAllString(body, v.with)
			}
			got.WriteString("=== " + p.job + " " + strings.SplitN(path, "/", 3)[1] + "\n" + body + "\n")
		}
	}
	path := filepath.Join("testdata", "jobpages.golden")
	if *updateJobPages && withChromium {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !withChromium {
		// Without Chromium there is no rubric view: the other kinds' pages come first,
		// and the rubric page's comparison is reported as skipped, not passed.
		want, _, _ = bytes.Cut(want, []byte("=== "+viewJob+" "))
		t.Run("rubric view", func(t *testing.T) { browsertest.Need(t) })
	}
	if !bytes.Equal(got.Bytes(), want) {
		_ = os.WriteFile(path+".got", got.Bytes(), 0o644)
		t.Errorf("the job pages differ from %s (see %s.got)", path, path)
	}
}
