package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/csv"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/index"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// hrefWith is path with the query v.
func hrefWith(path string, v url.Values) string {
	if len(v) == 0 {
		return path
	}
	return path + "?" + v.Encode()
}

// pageNav links the pages of a table.
type pageNav struct {
	Page, Pages             int
	First, Prev, Next, Last string
}

func navFor(base string, q tableQuery, pages int) pageNav {
	n := pageNav{Page: q.Page, Pages: pages}
	at := func(p int) string { return hrefWith(base, q.with(func(n *tableQuery) { n.Page = p }).values()) }
	if q.Page > 1 {
		n.First, n.Prev = at(1), at(min(q.Page-1, pages))
	}
	if q.Page < pages {
		n.Next, n.Last = at(q.Page+1), at(pages)
	}
	return n
}

// kindsInOrder lists the kinds of a count in the registry's order, unknown ones last.
func kindsInOrder(counts map[events.Kind]int) []events.Kind {
	var out []events.Kind
	seen := map[events.Kind]bool{}
	for _, k := range registry.All() {
		if counts[k.Name()] > 0 {
			out = append(out, k.Name())
			seen[k.Name()] = true
		}
	}
	for k, n := range counts {
		if n > 0 && !seen[k] {
			out = append(out, k)
		}
	}
	return out
}

// batchChoice is another batch of the tenant, to compare with.
type batchChoice struct {
	Batch    string
	Label    string
	Selected bool
}

// otherBatches lists the tenant's other batches, newest first, for the compare form, and
// names the previous run of the same batch file as h (the newest batch of its source
// created before it), "" when there is none: the comparison a rerun asks for.
func (s *server) otherBatches(ctx context.Context, c caller, tenant, batch string, h *records.Batch) ([]batchChoice, string, error) {
	rows, _, err := s.listBatches(ctx, c, tenant)
	if err != nil {
		return nil, "", err
	}
	var out []batchChoice
	previous := ""
	for _, b := range rows {
		if b.Batch == batch {
			continue
		}
		label := b.Batch
		if b.Source != "" {
			label += " (" + b.Source + ")"
		}
		if previous == "" && h != nil && h.Source != "" && b.Source == h.Source && b.CreatedAt.Before(h.CreatedAt) {
			previous = b.Batch
			label += ", the previous run"
		}
		out = append(out, batchChoice{Batch: b.Batch, Label: label})
	}
	return out, previous, nil
}

// csvColumns are the export's columns, in order.
var csvColumns = []string{"index", "ac_id", "kind", "status", "outcome", "winner", "verdict", "confidence", "route", "impact",
	"label_assignment", "raw_winner", "biggest_gap", "slots", "agreement", "consistent", "quality", "detail", "reason", "judge", "cached",
	"calls", "prompt_tokens", "completion_tokens", "criterion"}

// exportCSV writes the batch's AC table, filtered and sorted as the page's query says,
// every row on one sheet. It streams: the index is read a chunk at a time and each row
// written as it is decoded (in batch order) or spilled to be sorted (pkg/spillsort, in
// $TMPDIR, for another order), so an export holds a chunk of entries and the sorter's
// buffer, never the batch's entries.
func (s *server) exportCSV(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, h, ok := s.scope(w, r, c)
	if !ok {
		return
	}
	rows, err := s.rows(r.Context(), tenant, batch, h)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	q := parseTableQuery(r.URL.Query())
	needle := strings.ToLower(q.Q)
	var sorted *spillsort.Sorter
	if q.Sort != "index" {
		// Another order than the batch's: every matching row is spilled before the first is
		// written, so a broken index still gets its error page.
		sorted = spillsort.New(spilledOrder(q.Sort, q.Desc))
		defer sorted.Close()
		var line bytes.Buffer
		lw := csv.NewWriter(&line)
		var key []byte
		err := rows.chunks(func(es []index.Entry) error {
			for i := range es {
				if !q.match(&es[i], needle, "") {
					continue
				}
				line.Reset()
				if err := lw.Write(csvRecord(&es[i])); err != nil {
					return err
				}
				lw.Flush()
				key = appendOrderKey(key[:0], orderKeyOf(q.Sort, &es[i]))
				sorted.Add(key, line.Bytes())
			}
			return nil
		})
		if err != nil {
			s.fail(w, r, err)
			return
		}
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+batch+`.csv"`)
	bw := bufio.NewWriterSize(w, 32<<10)
	cw := csv.NewWriter(bw)
	_ = cw.Write(csvColumns)
	cw.Flush()
	if sorted != nil {
		err = sorted.Each(func(_, line []byte) error {
			_, err := bw.Write(line)
			return err
		})
	} else {
		// In batch order: each chunk's rows are written as it is decoded.
		err = rows.chunks(func(es []index.Entry) error {
			for i := range es {
				if q.match(&es[i], needle, "") {
					if err := cw.Write(csvRecord(&es[i])); err != nil {
						return err
					}
				}
			}
			cw.Flush()
			return cw.Error()
		})
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		// The status is sent: the sheet ends short, and the log says why.
		s.log.Info("CSV export cut short", "tenant", tenant, "batch", batch, "err", err)
	}
}

// csvRecord is an entry's row of the CSV export (csvColumns).
func csvRecord(e *index.Entry) []string {
	conf, cons, quality := "", "", ""
	if e.Confidence != nil {
		conf = strconv.FormatFloat(*e.Confidence, 'f', -1, 64)
	}
	if e.Consistent != nil {
		cons = strconv.FormatBool(*e.Consistent)
	}
	if e.Quality != nil {
		quality = strconv.Itoa(*e.Quality)
	}
	prompt, completion := 0, 0
	for _, call := range e.Calls {
		if !call.Cached {
			prompt += call.PromptTokens
			completion += call.CompletionTokens
		}
	}
	return []string{strconv.Itoa(e.Index), e.ACID, e.Kind, e.Status, verdicts.OutcomeOf(e.Row), e.Winner, e.Verdict, conf, routeOf(e), e.Impact,
		e.LabelAssignment, e.RawWinner, csvText(e.BiggestGap), e.Slots, e.Agreement, cons, quality, csvText(e.Detail), csvText(e.Reason), e.Judge,
		strconv.FormatBool(e.Cached), strconv.Itoa(len(e.Calls)), strconv.Itoa(prompt), strconv.Itoa(completion), csvText(e.Criterion)}
}

// csvText keeps a judge's or a team's text from being read as a formula by spreadsheet
// programs (CSV injection): a cell starting with =, +, - or @ gets a leading quote.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}
