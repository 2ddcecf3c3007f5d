package console

import (
	"net/url"
	"strconv"

	"github.com/tribunal-dev/tribunal/pkg/audit"
)

// The audit as a readable report: what was replayed, each decision re-derived or
// mismatched with the events it rests on, the findings about the batch as a whole and
// what could not be checked.

// auditReport is one page of the report.
type auditReport struct {
	Events    int `json:"events"`
	History   int `json:"history,omitempty"`
	Rejudges  int `json:"rejudges,omitempty"`
	Jobs      int `json:"jobs"`
	Compared  int `json:"values_compared"`
	Findings  int `json:"findings"`
	Rederived int `json:"rederived"`
	// Mismatched counts the decisions with a finding.
	Mismatched int `json:"mismatched"`
	// BatchFindings are the findings about no single job (the manifest, the
	// completion, the digest chain).
	BatchFindings []finding          `json:"batch_findings"`
	Unverified    []audit.Unverified `json:"unverified,omitempty"`
	// Refused are the inputs in the batch's name the rules refuse: they decide nothing.
	Refused []audit.Refused `json:"refused,omitempty"`
	// Decisions is one page of the jobs' decisions (only the mismatched ones when
	// OnlyMismatched).
	Decisions      []decisionView `json:"decisions"`
	OnlyMismatched bool           `json:"only_mismatched,omitempty"`
	Page           int            `json:"page"`
	Pages          int            `json:"pages"`

	Nav      pageNav `json:"-"`
	AllHref  string  `json:"-"`
	OnlyHref string  `json:"-"`
}

// finding is a mismatch with its one-line reading.
type finding struct {
	audit.Mismatch
	Text string `json:"text"`
}

// decisionView is one job's decision.
type decisionView struct {
	audit.Decision
	// Result is "re-derived" or "mismatched".
	Result   string    `json:"result"`
	Findings []finding `json:"findings,omitempty"`
	Href     string    `json:"href"`
}

func reportView(rep *audit.Report, q url.Values, tenant, batch string) *auditReport {
	v := &auditReport{Events: rep.Events, History: rep.History, Rejudges: rep.Rejudges, Jobs: rep.Jobs, Compared: rep.Decisions,
		Findings: len(rep.Mismatches), Unverified: rep.Unverified, Refused: rep.Refused, BatchFindings: []finding{}, OnlyMismatched: q.Get("mismatched") != ""}
	for _, m := range rep.Mismatches {
		if m.Job == "" {
			v.BatchFindings = append(v.BatchFindings, finding{Mismatch: m, Text: m.String()})
		}
	}
	var shown []decisionView
	for _, d := range rep.JobDecisions() {
		dv := decisionView{Decision: d, Result: "re-derived", Href: jobHref(d.Tenant, d.Batch, d.Job)}
		if len(d.Mismatches) > 0 {
			dv.Result = "mismatched"
			v.Mismatched++
			for _, m := range d.Mismatches {
				dv.Findings = append(dv.Findings, finding{Mismatch: m, Text: m.String()})
			}
		} else {
			v.Rederived++
		}
		if !v.OnlyMismatched || len(d.Mismatches) > 0 {
			shown = append(shown, dv)
		}
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	v.Pages = max((len(shown)+defaultPerPage-1)/defaultPerPage, 1)
	v.Page = min(page, v.Pages)
	from := (v.Page - 1) * defaultPerPage
	v.Decisions = nonNil(shown[min(from, len(shown)):min(from+defaultPerPage, len(shown))])
	base := batchHref(tenant, batch) + "/audit"
	at := func(p int) string {
		u := url.Values{}
		if v.OnlyMismatched {
			u.Set("mismatched", "1")
		}
		if p > 1 {
			u.Set("page", strconv.Itoa(p))
		}
		return hrefWith(base, u)
	}
	v.Nav = pageNav{Page: v.Page, Pages: v.Pages}
	if v.Page > 1 {
		v.Nav.First, v.Nav.Prev = at(1), at(v.Page-1)
	}
	if v.Page < v.Pages {
		v.Nav.Next, v.Nav.Last = at(v.Page+1), at(v.Pages)
	}
	v.AllHref, v.OnlyHref = base, base+"?mismatched=1"
	return v
}
