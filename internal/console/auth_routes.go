package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// route is one of the console's routes and the roles whose tokens may open it. routes is
// the one source of the console's mux and of its rights table in docs/security.md
// (rightsTable): TestConsoleRights reads the table back and walks every route with a
// team's and a reviewer's token against it, so a right a token holds is one the docs list.
type route struct {
	// Pattern is the route as http.ServeMux reads it.
	Pattern string
	// Roles may open it; any other role's token is refused (refuseRole).
	Roles []tokens.Role
	// What says what it serves, and why those roles.
	What string
	// h serves an authenticated caller; open, when set instead, serves anyone (the login
	// form, the stylesheet).
	h    handler
	open http.HandlerFunc
}

var teamOnly, teamAndReviewer = []tokens.Role{tokens.RoleTeam}, []tokens.Role{tokens.RoleTeam, tokens.RoleReviewer}

// routes are every route of the console, in the order the docs list them. A reviewer
// (tokens.RoleReviewer) works through the team's review queue blind and answers it:
// nothing of it names an AC, a role or the judge's verdict. Every other page shows the
// judges' verdicts, which artifact is ours or the team's artifacts by digest, so it
// would un-blind a reviewer: it is the team's (and an operator's) alone.
func (s *server) routes() []route {
	b := "/t/{tenant}/b/{batch}"
	notFound := func(w http.ResponseWriter, r *http.Request, _ caller) { s.notFound(w, r) }
	apiNotFound := func(w http.ResponseWriter, r *http.Request, _ caller) {
		s.apiError(w, http.StatusNotFound, "not found")
	}
	return []route{
		{Pattern: "GET /static/console.css", Roles: teamAndReviewer, What: "the stylesheet; no token needed", open: serveCSS},
		{Pattern: "GET /login", Roles: teamAndReviewer, What: "the sign-in form; no token needed", open: s.loginForm},
		{Pattern: "POST /login", Roles: teamAndReviewer, What: "sign in: sets the token cookie for any known token", open: s.login},
		{Pattern: "POST /logout", Roles: teamAndReviewer, What: "sign out", open: s.logout},
		{Pattern: "GET " + b + "/review", Roles: teamAndReviewer, What: "the review queue, blind: item ids, and which the caller answered", h: s.reviewQueue},
		{Pattern: "GET " + b + "/review/{item}", Roles: teamAndReviewer, What: "an item as the judge was shown it, the shape to answer in, the answer form", h: s.reviewItem},
		{Pattern: "POST " + b + "/review/{item}", Roles: teamAndReviewer, What: "record an answer, as the token's holder", h: s.reviewAnswer},
		{Pattern: "GET " + b + "/review/{item}/image/{sha256}", Roles: teamAndReviewer, What: "an image the item shows, only if it shows it", h: s.reviewImage},
		{Pattern: "GET /{$}", Roles: teamAndReviewer, What: "the team's batches, their progress and costs; to a reviewer, the team's review queues (batch ids, items, how many it answered) and nothing else", h: s.home},
		{Pattern: "GET /t/{tenant}/{$}", Roles: teamOnly, What: "likewise, of one team", h: s.tenantIndex},
		{Pattern: "GET " + b, Roles: teamOnly, What: "progress, summary, charts and the AC table: every verdict", h: s.batch},
		{Pattern: "GET " + b + "/export.csv", Roles: teamOnly, What: "the AC table as CSV", h: s.exportCSV},
		{Pattern: "GET " + b + "/compare", Roles: teamOnly, What: "which verdicts changed from another batch", h: s.compare},
		{Pattern: "GET " + b + "/audit", Roles: teamOnly, What: "the audit: every decision re-derived", h: s.audit},
		{Pattern: "GET " + b + "/report", Roles: teamOnly, What: "the trust report, and the judges' agreement with the reviewers", h: s.report},
		{Pattern: "GET " + b + "/j/{job}", Roles: teamOnly, What: "one AC: its artifacts (which is ours), verdict and reviews", h: s.job},
		{Pattern: "POST " + b + "/j/{job}/{action}", Roles: teamOnly, What: "spot-checks, HE-2 sign-offs and loop resets", h: s.jobAction},
		{Pattern: "GET " + b + "/j/{job}/call/{n}", Roles: teamOnly, What: "a judge call's prompt and answer", h: s.call},
		{Pattern: "GET /blob/{tenant}/{sha256}", Roles: teamOnly, What: "any of the team's artifacts, renders and manifests by digest", h: s.blob},
		{Pattern: "GET /api/batches", Roles: teamOnly, What: "the JSON of the pages above", h: s.apiIndex},
		{Pattern: "GET /api/t/{tenant}/batches", Roles: teamOnly, What: "likewise", h: s.apiTenantIndex},
		{Pattern: "GET /api" + b, Roles: teamOnly, What: "likewise", h: s.apiBatch},
		{Pattern: "GET /api" + b + "/compare", Roles: teamOnly, What: "likewise", h: s.apiCompare},
		{Pattern: "GET /api" + b + "/audit", Roles: teamOnly, What: "likewise", h: s.apiAudit},
		{Pattern: "GET /api" + b + "/j/{job}", Roles: teamOnly, What: "likewise", h: s.apiJob},
		{Pattern: "GET /api" + b + "/j/{job}/call/{n}", Roles: teamOnly, What: "likewise", h: s.apiCall},
		{Pattern: "/api/", Roles: teamAndReviewer, What: "anything else of the API: 404", h: apiNotFound},
		{Pattern: "/", Roles: teamAndReviewer, What: "anything else: 404", h: notFound},
	}
}

// handle registers every route on mux, each behind authed with its roles.
func (s *server) handle(mux *http.ServeMux) {
	for _, rt := range s.routes() {
		if rt.open != nil {
			mux.HandleFunc(rt.Pattern, rt.open)
			continue
		}
		mux.HandleFunc(rt.Pattern, s.authed(rt.Roles, rt.h))
	}
}

// roleMay lists the routes a role's token may open, for its refusals.
func roleMay(r tokens.Role) string {
	var may []string
	for _, rt := range (&server{}).routes() {
		if rt.open == nil && rt.Pattern != "/" && rt.Pattern != "/api/" && slices.Contains(rt.Roles, r) {
			may = append(may, rt.Pattern)
		}
	}
	return strings.Join(may, ", ")
}

// Rights table markers in docs/security.md.
const (
	rightsBegin = "<!-- BEGIN CONSOLE RIGHTS: generated from the console's routes; `go test ./internal/console -run TestConsoleRights -update-rights` rewrites it -->"
	rightsEnd   = "<!-- END CONSOLE RIGHTS -->"
)

// rightsTable renders routes as the console's rights table of docs/security.md: a row
// per route, a column per role ("yes" or "no").
func rightsTable() string {
	var rights []tokens.Right
	for _, rt := range (&server{}).routes() {
		rights = append(rights, tokens.Right{Pattern: rt.Pattern, Roles: rt.Roles, What: rt.What})
	}
	return tokens.RightsTable("route", rights)
}
