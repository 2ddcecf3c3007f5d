package console

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// reviewer is who a caller answers as: the console's configured reviewer (`tribunal
// view`, one user on their own machine), else the token's holder as the ingress names
// them too (tokens.Reviewer), so one person answering through both is one reviewer and
// the queue marks what they answered through either.
func (s *server) reviewer(c caller) string {
	if c.session == "" {
		if s.cfg.Reviewer != "" {
			return s.cfg.Reviewer
		}
		return "console:" + c.name
	}
	return tokens.Reviewer(c.name, c.session)
}

// reviewVia is how the console records answers: "viewer" for `tribunal view`, "console"
// for a shared one.
func (s *server) reviewVia() string {
	if s.cfg.Reviewer != "" {
		return "viewer"
	}
	return "console"
}

type queueItem struct {
	Item, Href string
	Answered   bool
}

type queuePage struct {
	Items []queueItem
	Sent  string
	Done  int
}

// queue loads the batch's review queue for a caller that sees its tenant.
func (s *server) queue(w http.ResponseWriter, r *http.Request, c caller) (tenant, batch string, q []client.ReviewEntry, ok bool) {
	tenant, batch, _, ok = s.scope(w, r, c)
	if !ok {
		return "", "", nil, false
	}
	q, _, err := client.ReviewQueue(r.Context(), s.cfg.Buckets, tenant, batch)
	if err != nil {
		s.fail(w, r, err)
		return "", "", nil, false
	}
	return tenant, batch, q, true
}

// reviewCrumbs lead a team back to the batch; a reviewer, who may open none of the
// batch's other pages, back to the queue only.
func reviewCrumbs(c caller, tenant, batch string) []crumb {
	if c.role == tokens.RoleReviewer {
		return []crumb{{Label: batch + " review queue", Href: "/t/" + tenant + "/b/" + batch + "/review"}}
	}
	return batchCrumbs(tenant, batch)
}

func reviewHref(tenant, batch, item string) string {
	return "/t/" + tenant + "/b/" + batch + "/review/" + item
}

// reviewQueue lists the items to review, blind: item names only, never the AC, why it is
// queued or what the judge said.
func (s *server) reviewQueue(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, q, ok := s.queue(w, r, c)
	if !ok {
		return
	}
	me := s.reviewer(c)
	p := queuePage{Sent: r.URL.Query().Get("sent")}
	for _, e := range q {
		it := queueItem{Item: e.Item, Href: reviewHref(tenant, batch, e.Item)}
		for _, by := range e.Reviewers {
			it.Answered = it.Answered || by == me
		}
		if it.Answered {
			p.Done++
		}
		p.Items = append(p.Items, it)
	}
	s.render(w, r, http.StatusOK, "review.html", view{Title: "Review queue", Crumbs: reviewCrumbs(c, tenant, batch), Page: p})
}

type itemPage struct {
	client.ReviewItem
	Parts    []partView
	CSRF     string
	Action   string
	Back     string
	Answer   string
	Error    string
	Answered bool
	Writable bool
}

type partView struct {
	Text  string
	Image string
}

// entry finds a queued item, or answers 404 (an item outside the queue, another team's).
func (s *server) entry(w http.ResponseWriter, r *http.Request, c caller) (tenant, batch string, e client.ReviewEntry, ok bool) {
	tenant, batch, q, ok := s.queue(w, r, c)
	if !ok {
		return "", "", e, false
	}
	item := r.PathValue("item")
	for _, x := range q {
		if x.Item == item {
			return tenant, batch, x, true
		}
	}
	s.notFound(w, r)
	return "", "", e, false
}

func (s *server) reviewItem(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, e, ok := s.entry(w, r, c)
	if !ok {
		return
	}
	s.itemPage(w, r, c, tenant, batch, e, "", "", http.StatusOK)
}

func (s *server) itemPage(w http.ResponseWriter, r *http.Request, c caller, tenant, batch string, e client.ReviewEntry, answer, problem string, code int) {
	it, err := client.ReviewItemOf(r.Context(), s.cfg.Store, e)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	href := reviewHref(tenant, batch, e.Item)
	p := itemPage{ReviewItem: it, CSRF: s.auth.csrf(c), Action: href, Back: "/t/" + tenant + "/b/" + batch + "/review",
		Answer: answer, Error: problem, Writable: s.cfg.Pub != nil}
	if p.Answer == "" {
		p.Answer = it.Answer
	}
	me := s.reviewer(c)
	for _, by := range e.Reviewers {
		p.Answered = p.Answered || by == me
	}
	for _, part := range it.Shown {
		if part.Image != nil {
			p.Parts = append(p.Parts, partView{Image: href + "/image/" + part.Image.SHA256})
			continue
		}
		p.Parts = append(p.Parts, partView{Text: unfence(part.Text)})
	}
	s.render(w, r, code, "reviewitem.html", view{Title: "Review " + e.Item, Crumbs: reviewCrumbs(c, tenant, batch), Page: p})
}

// fenceLine matches the nonce lines a judge's fences carry; a reader needs neither them
// nor their random nonce, and the text between them is shown as it was sent.
var fenceLine = regexp.MustCompile(`(?m)^-----(BEGIN|END) [A-Z ]+(\(data, not instructions\) )?nonce=[0-9a-f]+-----\n?`)

func unfence(s string) string { return fenceLine.ReplaceAllString(s, "") }

// reviewAnswer records a reviewer's answer: the console's own form (same origin, CSRF),
// checked by the kind's answer contract before it is published, the reviewer named by
// the caller's credential.
func (s *server) reviewAnswer(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, batch, e, ok := s.entry(w, r, c)
	if !ok {
		return
	}
	if !sameOrigin(r) || !s.auth.checkCSRF(c, r.PostFormValue("csrf")) {
		s.errorPage(w, r, http.StatusForbidden, "Refused", "A review is recorded only from the console's own form. Reload the page and try again.")
		return
	}
	if s.cfg.Pub == nil {
		s.errorPage(w, r, http.StatusServiceUnavailable, "Read-only console", "This console cannot publish reviews; use `tribunal review --import`.")
		return
	}
	answer := strings.TrimSpace(r.PostFormValue("answer"))
	if err := client.CheckReviewAnswer(e, []byte(answer)); err != nil {
		s.itemPage(w, r, c, tenant, batch, e, answer, err.Error(), http.StatusBadRequest)
		return
	}
	by := s.reviewer(c)
	if err := client.RecordReview(s.cfg.Pub, e, []byte(answer), by, s.reviewVia()); err != nil {
		s.fail(w, r, err)
		return
	}
	s.awaitApplied(r.Context(), func(ctx context.Context) (bool, error) {
		rec, err := s.loadJob(ctx, tenant, batch, e.AC)
		if rec == nil || err != nil {
			return false, err
		}
		for _, rv := range rec.Reviews {
			if rv.By == by && rv.Case == e.Case {
				return true, nil
			}
		}
		return false, nil
	})
	s.log.Info("review recorded", "tenant", tenant, "batch", batch, "item", e.Item, "by", by)
	http.Redirect(w, r, "/t/"+tenant+"/b/"+batch+"/review?sent="+url.QueryEscape(e.Item), http.StatusSeeOther)
}

// reviewImage serves an image an item shows, and nothing else of the tenant's.
func (s *server) reviewImage(w http.ResponseWriter, r *http.Request, c caller) {
	tenant, _, e, ok := s.entry(w, r, c)
	if !ok {
		return
	}
	it, err := client.ReviewItemOf(r.Context(), s.cfg.Store, e)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	data, mt, err := client.ReviewImage(r.Context(), s.cfg.Store, tenant, it, r.PathValue("sha256"))
	if err != nil {
		s.notFound(w, r)
		return
	}
	if !strings.HasPrefix(mt, "image/") || mt == "image/svg+xml" {
		mt = "application/octet-stream"
	}
	w.Header().Set("Content-Type", mt)
	w.Header().Set("Content-Security-Policy", "default-src 'none'; sandbox")
	_, _ = w.Write(data)
}

// people adds the judges' agreement with the batch's reviewers to its report page, from
// the job records alone (no stream replay), each disagreeing AC one click from its page.
func (s *server) people(r *http.Request, d *reportData) {
	jobs, err := records.New(s.cfg.Buckets).LoadJobs(r.Context(), d.Tenant, d.Batch)
	if err != nil {
		s.log.Warn("agreement with people", "tenant", d.Tenant, "batch", d.Batch, "err", err)
		return
	}
	rep, err := client.ReviewAgreement(jobs, 1)
	if err != nil || rep == nil {
		return
	}
	d.People, d.Disagree = rep, map[string]string{}
	for _, a := range rep.Agreement {
		for _, x := range a.Disagreements {
			d.Disagree[x.AC] = jobHref(d.Tenant, d.Batch, x.AC)
		}
	}
}
