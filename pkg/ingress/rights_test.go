package ingress_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	"image/png"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/internal/e2e"
	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
	"github.com/tribunal-dev/tribunal/pkg/tokens"
)

var update = flag.Bool("update", false, "rewrite the ingress rights table of docs/security.md from ingress.Routes")

const securityDoc = "../../docs/security.md"

// documentedRights reads the ingress rights table of docs/security.md: for each endpoint,
// the roles whose tokens may use it. With -update it first rewrites the table from
// ingress.RightsTable; otherwise the table must be what RightsTable renders.
func documentedRights(t *testing.T) map[string]map[tokens.Role]bool {
	t.Helper()
	data, err := os.ReadFile(securityDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(data)
	begin, end := strings.Index(doc, ingress.RightsBegin), strings.Index(doc, ingress.RightsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no ingress rights table between %q and %q", securityDoc, ingress.RightsBegin, ingress.RightsEnd)
	}
	want := ingress.RightsTable()
	if *update {
		doc = doc[:begin+len(ingress.RightsBegin)] + "\n" + want + doc[end:]
		if err := os.WriteFile(securityDoc, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		begin, end = strings.Index(doc, ingress.RightsBegin), strings.Index(doc, ingress.RightsEnd)
	}
	table := strings.TrimSpace(doc[begin+len(ingress.RightsBegin) : end])
	const how = "`go test ./pkg/ingress -run TestIngressRights -update` rewrites it"
	if table != strings.TrimSpace(want) {
		t.Errorf("the ingress rights table of %s is not what ingress.Routes renders; %s", securityDoc, how)
	}
	out, err := tokens.ParseRightsTable(table)
	if err != nil {
		t.Fatalf("%s: %v", securityDoc, err)
	}
	return out
}

// TestIngressRights: every endpoint of the ingress, with every role's token, is answered
// as the rights table of docs/security.md says, and the table is every route the server
// has (ingress.Routes, from which it is rendered): a reviewer's token lists team-a's
// queue blind, exports it, reads the images its items show and answers, and is refused
// (403, naming its role, nothing stored or published) whatever else, the results, the
// gold set, the batch's progress, the team's blobs by digest, submitting. A reviewer of
// team-b is answered on team-a's batch exactly as on a batch nobody submitted.
func TestIngressRights(t *testing.T) {
	documented := documentedRights(t)
	var patterns []string
	for _, rt := range ingress.Routes() {
		patterns = append(patterns, rt.Pattern)
		if documented[rt.Pattern] == nil {
			t.Errorf("route %s is not in %s's rights table", rt.Pattern, securityDoc)
		}
	}
	for ep := range documented {
		if !slices.Contains(patterns, ep) {
			t.Errorf("%s's rights table lists %s, which the ingress does not serve", securityDoc, ep)
		}
	}

	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	// Screenshots, so the judge was shown images and the queue's image route serves one.
	files := map[string]string{"batch.yaml": "version: 1\nname: e2e\nreview: {count: 2}\nacs:\n"}
	for i := range 3 {
		files[fmt.Sprintf("ours/%d.png", i)] = string(pngOf(t, uint8(10*i)))
		files[fmt.Sprintf("ref/%d.png", i)] = string(pngOf(t, uint8(10*i+1)))
		files["batch.yaml"] += fmt.Sprintf("  - id: AC-%d\n    criterion: the page looks right\n    ours: ours/%d.png\n    reference: ref/%d.png\n", i+1, i, i)
	}
	b := e2e.WriteBatch(t, files)
	sub, err := (&client.Submitter{Pub: c, Store: c}).Submit(ctxT(t), b, c.Tenant(), client.NewBatchID(b))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Poll(ctxT(t), 50*time.Millisecond, func(ctx context.Context) (*client.Progress, error) { return c.Progress(ctx, sub.BatchID) }, func(client.Progress) {}); err != nil {
		t.Fatal(err)
	}
	local := mustQueue(t, f, sub.BatchID)
	item := local[0].Item
	it, err := client.ReviewItemOf(ctxT(t), f.env.Store, local[0])
	if err != nil {
		t.Fatal(err)
	}
	var image string
	for _, p := range it.Shown {
		if p.Image != nil {
			image = p.Image.SHA256
		}
	}
	if image == "" {
		t.Fatalf("the item shows no image: %+v", it.Shown)
	}
	var record string
	for _, call := range local[0].Job().Calls {
		if call.Record != nil {
			record = call.Record.SHA256
		}
	}
	if record == "" {
		t.Fatal("no call record to read")
	}
	concrete := func(pattern, batch string) (method, path string) {
		method, path, _ = strings.Cut(pattern, " ")
		path = strings.NewReplacer("{batch}", batch, "{item}", item, "{sha256}", record).Replace(path)
		if strings.Contains(pattern, "/images/") {
			path = strings.Replace(path, "/images/"+record, "/images/"+image, 1)
		}
		return method, path
	}
	putBody := []byte("a blob a reviewer tries to store")
	bodyOf := func(method, path string) (io.Reader, string) {
		switch {
		case method == http.MethodPut:
			return bytes.NewReader(putBody), "text/plain"
		case path == ingress.PathEvents:
			return strings.NewReader(`{"events": []}`), ingress.MediaJSON
		case method == http.MethodPost:
			return strings.NewReader(`{}`), "application/json"
		}
		return nil, ""
	}
	do := func(tok, method, path string) (int, ingress.Problem) {
		t.Helper()
		body, ct := bodyOf(method, path)
		req, _ := http.NewRequestWithContext(ctxT(t), method, f.url+path, body)
		req.Header.Set("Authorization", "Bearer "+tok)
		if ct != "" {
			req.Header.Set("Content-Type", ct)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		var p ingress.Problem
		_ = json.Unmarshal(data, &p)
		return resp.StatusCode, p
	}

	before := streamCount(t, f.js)
	toks := map[tokens.Role]string{tokens.RoleTeam: tokA, tokens.RoleReviewer: tokRA}
	for _, role := range tokens.Roles {
		for _, pattern := range patterns {
			method, path := concrete(pattern, sub.BatchID)
			code, p := do(toks[role], method, path)
			switch {
			case documented[pattern][role] && (code == http.StatusUnauthorized || code == http.StatusForbidden):
				t.Errorf("%s with a %s's token: %d %q, but %s lets it", pattern, role, code, p.Error, securityDoc)
			case !documented[pattern][role] && (code != http.StatusForbidden || method != http.MethodHead && (p.Role != string(role) || p.Class != ingress.ClassRefused)):
				// (A HEAD answer has no body to name the role in.)
				t.Errorf("%s with a %s's token: %d %+v, want 403 naming the role, as %s says", pattern, role, code, p, securityDoc)
			case role == tokens.RoleReviewer && documented[pattern][role] && code/100 != 2:
				// What a reviewer may do, it can do: every one of its requests is served.
				t.Errorf("%s with a reviewer's token: %d %q, want it served", pattern, code, p.Error)
			}
		}
	}
	// Nothing a reviewer was refused stored or published anything; the team's own PUT
	// stored its blob, and its empty requests published nothing.
	if after := streamCount(t, f.js); after != before {
		t.Errorf("the stream holds %d events, %d before the walk", after, before)
	}
	h := sha256.Sum256(putBody)
	if _, err := f.env.Store.Stat(ctxT(t), blob.Ref{Tenant: "team-a", SHA256: hex.EncodeToString(h[:])}); err != nil {
		t.Errorf("the team's PUT: %v", err)
	}

	// The image route serves only what the item shows: not the call record, though it is
	// team-a's blob.
	if code, p := do(tokRA, http.MethodGet, ingress.PathBatches+"/"+sub.BatchID+"/review/items/"+item+"/images/"+record); code != http.StatusNotFound || !strings.Contains(p.Error, "shows no image") {
		t.Errorf("the image route on a blob the item does not show: %d %q", code, p.Error)
	}

	// Team-b's reviewer, on every route its role has, is answered on team-a's batch as on
	// a batch nobody submitted.
	for _, pattern := range patterns {
		if !documented[pattern][tokens.RoleReviewer] || !strings.Contains(pattern, "{batch}") {
			continue
		}
		m, path := concrete(pattern, sub.BatchID)
		_, npath := concrete(pattern, "never-submitted")
		code, p := do(tokRB, m, path)
		ncode, np := do(tokRB, m, npath)
		if code != http.StatusNotFound || p.Error != "batch team-b/"+sub.BatchID+": not found" || ncode != code || np.Error != strings.ReplaceAll(p.Error, sub.BatchID, "never-submitted") {
			t.Errorf("team-b's reviewer %s on team-a's batch: %d %q; on a batch nobody submitted: %d %q", pattern, code, p.Error, ncode, np.Error)
		}
	}
}

// TestReviewerToken: a reviewer of team-a, holding only a reviewer's token, reads the
// queue blind and exports it through the client as the team does, answers an item, and
// the review is by them (their token's fingerprint), shown as theirs and not the team's;
// the client knows its role, and what a reviewer may not read is refused with it.
func TestReviewerToken(t *testing.T) {
	f := start(t, true, ingress.Config{})
	c := dial(t, f, tokA)
	sub := submitReviewed(t, c, 3, "review: {count: 2}\n")
	rv := dial(t, f, tokRA)
	if rv.Tenant() != "team-a" || rv.Role() != string(tokens.RoleReviewer) || rv.SpendAllowance() != nil || c.Role() != string(tokens.RoleTeam) {
		t.Fatalf("reviewer client: tenant %q role %q spend %v; team's role %q", rv.Tenant(), rv.Role(), rv.SpendAllowance(), c.Role())
	}
	q, err := rv.ReviewQueue(ctxT(t), sub.BatchID)
	if err != nil || len(q) != 2 {
		t.Fatalf("the reviewer's queue: %d items, %v", len(q), err)
	}
	ex, err := rv.ReviewExport(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	teamEx, err := c.ReviewExport(ctxT(t), sub.BatchID)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := mustJSON(t, ex), mustJSON(t, teamEx); g != w {
		t.Errorf("the reviewer's export\n%s\nwant the team's\n%s", g, w)
	}
	answer := `{"raw_winner":"B","confidence":0.7,"biggest_gap":"slot B"}`
	if _, err := rv.RecordAnswers(ctxT(t), sub.BatchID, []byte(`{"`+q[0].Item+`":`+answer+`}`)); err != nil {
		t.Fatal(err)
	}
	me := ingress.Reviewer("team-a", tokRA)
	if rv.Reviewer() != me {
		t.Errorf("client Reviewer %q, want %q", rv.Reviewer(), me)
	}
	poll.Until(t, 20*time.Second, "the reviewer's answer in their listing", func() (bool, string) {
		q, err := rv.ReviewStatus(ctxT(t), sub.BatchID)
		if err != nil {
			t.Fatal(err)
		}
		return q[0].Yours != nil && string(q[0].Yours.Answer) == answer, q[0].Status
	})
	for _, e := range mustQueue(t, f, sub.BatchID) {
		if e.Item == q[0].Item {
			if r := e.Job().Reviews; len(r) != 1 || r[0].By != me || r[0].Via != "ingress" || r[0].At.IsZero() {
				t.Errorf("the reviewer's review: %+v", r)
			}
		}
	}
	if it := mustList(t, f, tokA, sub.BatchID).Items[0]; it.Status != ingress.StatusReviewed || it.Yours != nil {
		t.Errorf("the reviewer's answer to the team's token: %s, yours %+v", it.Status, it.Yours)
	}
	var ie *ingress.Error
	for name, fn := range map[string]func() error{
		"results":  func() error { _, err := rv.Results(ctxT(t), sub.BatchID); return err },
		"gold":     func() error { _, err := rv.ReviewGold(ctxT(t), sub.BatchID); return err },
		"progress": func() error { _, err := rv.Progress(ctxT(t), sub.BatchID); return err },
	} {
		if err := fn(); !errors.As(err, &ie) || ie.Status != http.StatusForbidden || ie.Problem.Role != string(tokens.RoleReviewer) {
			t.Errorf("a reviewer's %s: %v, want 403 naming its role", name, err)
		}
	}
}

// pngOf is a small PNG of one grey level.
func pngOf(t *testing.T, level uint8) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 8, 8))
	for i := range img.Pix {
		img.Pix[i] = level
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
