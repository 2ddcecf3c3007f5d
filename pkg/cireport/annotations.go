package cireport

import (
	"fmt"
	"io"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/verdicts"
)

// GitHub Actions turns workflow commands on a step's output into annotations: `::error`
// and `::warning`, with properties (file, title) before the second `::`. Its escaping
// (what the actions toolkit does): in a message %, CR and LF are percent-encoded; in a
// property also : and ,.

func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// maxAnnotations is how many annotations of each level GitHub shows for a step (10): past
// that, the last one shown sums up the rest.
const maxAnnotations = 10

// WriteAnnotations writes one GitHub Actions annotation per AC that is not clean: an
// error for each whose grade fails under o.Policy, a warning for the others, each titled
// with the AC and its grade, placed on the AC's own artifact when it has one, and saying
// the result, the reason and the page. GitHub shows ten of each level a step: with more,
// the tenth lists the rest.
func WriteAnnotations(w io.Writer, res *client.Results, o Options) error {
	c := count(res, o.Policy)
	byLevel := map[string][]int{}
	for i := range res.Rows {
		g := c.grades[i]
		if g == verdicts.Clean {
			continue
		}
		level := "warning"
		if o.Policy.Fails(g) {
			level = "error"
		}
		byLevel[level] = append(byLevel[level], i)
	}
	var b strings.Builder
	for _, level := range []string{"error", "warning"} {
		rows := byLevel[level]
		for n, i := range rows {
			if n == maxAnnotations-1 && len(rows) > maxAnnotations {
				var ids []string
				for _, j := range rows[n:] {
					ids = append(ids, res.Rows[j].ACID)
				}
				fmt.Fprintf(&b, "::%s title=%s::%s\n", level, escapeProperty(fmt.Sprintf("tribunal: %d more", len(ids))),
					escapeData(fmt.Sprintf("%s more of batch %s (GitHub shows %d a step): %s", plural(len(ids), "AC"), res.BatchID, maxAnnotations, clip(strings.Join(ids, ", "), 2000))))
				break
			}
			r, g := res.Rows[i], c.grades[i]
			props := []string{"title=" + escapeProperty(fmt.Sprintf("tribunal %s %s (%s)", r.ACID, g, r.Kind))}
			msg := headline(r, g)
			if nt := note(r); nt != "" {
				msg += ": " + nt
			}
			if a := o.artifact(r.ACID); a != "" {
				props = append([]string{"file=" + escapeProperty(a)}, props...)
				msg += "\nartifact: " + a
			}
			if p := o.page(r.ACID); p != "" {
				msg += "\npage: " + p
			}
			fmt.Fprintf(&b, "::%s %s::%s\n", level, strings.Join(props, ","), escapeData(msg))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
