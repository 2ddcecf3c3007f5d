package ingress

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

// pathImage is the review queue's image route under /v1/batches/{batch}/review/: one
// image an item shows, and no other of the team's blobs.
const pathImage = "items/{item}/images/{sha256}"

// Route is one endpoint of the ingress and the roles whose tokens may use it. Routes is
// the one source of the server's routes, of the rights table in docs/security.md
// (RightsTable) and of the test that walks every endpoint with every role's token
// against that table: a right a token holds is one the docs list.
type Route = tokens.Right

var team, both = []tokens.Role{tokens.RoleTeam}, []tokens.Role{tokens.RoleTeam, tokens.RoleReviewer}

// Routes are every endpoint of the ingress, in the order the docs list them. A reviewer
// (tokens.RoleReviewer) reads the team's review queue blind and answers it: nothing of
// it names an AC, a role or the judge's verdict. Everything that would un-blind them
// (results, progress with its outcome summary, the gold set's specs and answers, the
// team's blobs by digest) or spend the team's budget (events, blobs) is the team's alone.
func Routes() []Route {
	b := PathBatches + "/{batch}"
	return []Route{
		{Pattern: "GET " + PathWhoami, Roles: both, What: "the token's tenant and role, and a team's spending allowance"},
		{Pattern: "PUT " + PathBlobs, Roles: team, What: "store an artifact: submitting is the team's"},
		{Pattern: "GET " + PathBlobs + "/{sha256}", Roles: team, What: "any of the team's blobs by digest, among them the artifacts that say which is ours"},
		{Pattern: "HEAD " + PathBlobs + "/{sha256}", Roles: team, What: "likewise"},
		{Pattern: "POST " + PathEvents, Roles: team, What: "submit, open and cancel batches, spot-checks, view resets, reviews by AC id (which name the AC)"},
		{Pattern: "GET " + b, Roles: team, What: "progress, and a completed batch's outcome summary and cost"},
		{Pattern: "GET " + b + "/results", Roles: team, What: "the results and manifests: the judges' verdicts"},
		{Pattern: "GET " + b + "/review", Roles: both, What: "the review queue, blind: what the judge was shown, the shape to answer in, the holder's own answer"},
		{Pattern: "GET " + b + "/review/export", Roles: both, What: "the blind export of the queue"},
		{Pattern: "GET " + b + "/review/" + pathImage, Roles: both, What: "an image a queued item shows, only if it shows it"},
		{Pattern: "POST " + b + "/review/answers", Roles: both, What: "record answers by item id, as the token's holder"},
		{Pattern: "GET " + b + "/review/gold", Roles: team, What: "the reviewed ACs' specs (which artifact is ours) and everyone's answers: it would un-blind a reviewer"},
	}
}

// roleMay says what a role's token may do, for its refusals.
func roleMay(r tokens.Role) string {
	var may []string
	for _, rt := range Routes() {
		if slices.Contains(rt.Roles, r) {
			may = append(may, rt.Pattern)
		}
	}
	return strings.Join(may, ", ")
}

// Rights table markers in docs/security.md.
const (
	RightsBegin = "<!-- BEGIN INGRESS RIGHTS: generated from ingress.Routes; `go test ./pkg/ingress -run TestIngressRights -update` rewrites it -->"
	RightsEnd   = "<!-- END INGRESS RIGHTS -->"
)

// RightsTable renders Routes as the rights table of docs/security.md: a row per
// endpoint, a column per role ("yes" or "no").
func RightsTable() string { return tokens.RightsTable("endpoint", Routes()) }

// reviewImage serves one image a queued item shows (client.ReviewImage): what a
// reviewer's export embeds, and never another of the team's blobs, since a reviewer
// holds no right to GET /v1/blobs.
func (s *server) reviewImage(w http.ResponseWriter, r *http.Request, tenant string) {
	id, x, ok := s.queue(w, r, tenant)
	if !ok {
		return
	}
	item, sha := r.PathValue("item"), r.PathValue("sha256")
	at, found := x.pos[item]
	if !found {
		s.problem(w, r, http.StatusNotFound, fmt.Sprintf("review queue of %s/%s has no item %q", tenant, id, item), nil)
		return
	}
	es, err := s.entries(r.Context(), tenant, id, x, []int{at})
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review image of %s/%s: %w", tenant, id, err))
		return
	}
	it, err := client.ReviewItemOf(r.Context(), s.cfg.Store, es[0])
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review image of %s/%s: %w", tenant, id, err))
		return
	}
	if !slices.ContainsFunc(it.Shown, func(p judge.RecordedPart) bool { return p.Image != nil && p.Image.SHA256 == sha }) {
		s.problem(w, r, http.StatusNotFound, fmt.Sprintf("item %s shows no image %s", item, sha), nil)
		return
	}
	data, mediaType, err := client.ReviewImage(r.Context(), s.cfg.Store, tenant, it, sha)
	if err != nil {
		s.failClassified(w, r, fmt.Errorf("review image %s of %s: %w", sha, item, err))
		return
	}
	h := w.Header()
	h.Set("Content-Type", mediaType)
	h.Set("Content-Length", strconv.Itoa(len(data)))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "sandbox; default-src 'none'")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}
