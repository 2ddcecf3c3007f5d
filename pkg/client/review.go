package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"slices"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge"
	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/review"
	"github.com/tribunal-dev/tribunal/pkg/rulebook"
)

// ReviewItemID is the name a job goes by in its batch's review queue: a digest of its
// tenant, batch and AC id, so a reviewer's page, an export and an answers file name the
// item without telling the reviewer the AC's id (which may say what is being tested).
// A case of a kind reviewed per case is named by ReviewCaseItemID.
func ReviewItemID(tenant, batch, ac string) string {
	h := sha256.Sum256([]byte(tenant + "\x00" + batch + "\x00" + ac))
	return "item-" + hex.EncodeToString(h[:6])
}

// ReviewCaseItemID is the item id of one case of an AC reviewed per case (equivalence):
// ReviewItemID over the AC id and the case, NUL-separated; an AC reviewed whole (caseID
// "") keeps ReviewItemID.
func ReviewCaseItemID(tenant, batch, ac, caseID string) string {
	if caseID == "" {
		return ReviewItemID(tenant, batch, ac)
	}
	return ReviewItemID(tenant, batch, ac+"\x00"+caseID)
}

// ReviewEntry is one AC of a batch's review queue, as the team sees it (never the
// reviewer: it names the AC and why it is there, which would tell them what the judge
// thought).
type ReviewEntry struct {
	Item string `json:"item"`
	AC   string `json:"ac_id"`
	Kind string `json:"kind"`
	// Case is the case of the AC the item is, for a kind reviewed per case (equivalence:
	// one item per case the judge gave a verdict); "" for a kind reviewed whole.
	Case    string   `json:"case,omitempty"`
	Reasons []string `json:"reasons"`
	// Reviewers are who reviewed it, in the order they first answered.
	Reviewers []string `json:"reviewers,omitempty"`
	job       *records.Job
}

// Job is the entry's job record.
func (e ReviewEntry) Job() *records.Job { return e.job }

// WithJob is the entry over j, its job's record as read now: its reviewers are j's. An
// index of a queue keeps its entries without their records (WithJob(nil)) and reads the
// records of the items a page holds, so a page costs what it holds.
func (e ReviewEntry) WithJob(j *records.Job) ReviewEntry {
	e.job, e.Reviewers = j, nil
	if j != nil {
		for _, r := range j.Reviews {
			if r.Case == e.Case {
				e.Reviewers = append(e.Reviewers, r.By)
			}
		}
	}
	return e
}

// ReviewSources are the doubts from beyond a verdict that send an AC to the queue
// (review.UnsureSource): the hook for trial disagreement and escalation (issue 26). Each
// source is asked with the job record; nil by default.
var ReviewSources []func(j *records.Job) []string

// ReviewQueue is a batch's review queue, in batch order, with the batch's policy: the
// seeded sample over every job of the batch (drawn under the batch file's name, so every
// run of the file draws the same ACs), the ACs the team flagged and, when the batch
// asks, the ones the judge was unsure of (the kind's signals and ReviewSources). A batch
// that set no review setting has only flagged ACs in its queue.
func ReviewQueue(ctx context.Context, b bus.Buckets, tenant, batchID string) ([]ReviewEntry, review.Policy, error) {
	jobs, err := records.New(b).LoadJobs(ctx, tenant, batchID)
	if err != nil {
		return nil, review.Policy{}, err
	}
	entries, p := QueueOf(tenant, batchID, jobs)
	return entries, p, nil
}

// QueueOf is ReviewQueue over loaded job records.
func QueueOf(tenant, batchID string, jobs []*records.Job) ([]ReviewEntry, review.Policy) {
	slices.SortFunc(jobs, func(a, b *records.Job) int { return a.Index - b.Index })
	var p review.Policy
	name := ""
	for _, j := range jobs {
		if r := j.Spec.Review; r != nil {
			p, name = review.Policy{Share: r.Share, Count: r.Count, Seed: r.Seed, Unsure: r.Unsure}, r.Name
			break
		}
	}
	cands := make([]review.Candidate, 0, len(jobs))
	byID := map[string]*records.Job{}
	for _, j := range jobs {
		byID[j.ACID] = j
		c := review.Candidate{ID: j.ACID, Flagged: j.Spec.Review != nil && j.Spec.Review.Flagged}
		k, err := kind.Lookup(j.Spec.Kind)
		if err != nil {
			cands = append(cands, c)
			continue
		}
		if ck, ok := k.(kind.CaseReviewing); ok {
			// One candidate per judged case, drawn together by the sample.
			for _, cs := range ck.ReviewCases(j) {
				cc := c
				cc.Case, cc.Unsure = cs, ck.CaseUnsure(j, cs)
				_, _, cc.Judged = caseJudgeVerdict(ck, j, cs)
				cands = append(cands, cc)
			}
			if len(ck.ReviewCases(j)) == 0 {
				cands = append(cands, c)
			}
			continue
		}
		if rk, ok := k.(kind.Reviewing); ok {
			_, _, c.Judged = judgeVerdict(rk, j)
			c.Unsure = rk.Unsure(j)
		}
		cands = append(cands, c)
	}
	var sources []review.UnsureSource
	for _, s := range ReviewSources {
		sources = append(sources, func(ac string) []string { return s(byID[ac]) })
	}
	review.AddUnsure(cands, sources...)
	var out []ReviewEntry
	for _, e := range p.Queue(name, cands) {
		j := byID[e.ID]
		re := ReviewEntry{Item: ReviewCaseItemID(tenant, batchID, e.ID, e.Case), AC: e.ID, Kind: string(j.Spec.Kind), Case: e.Case, Reasons: e.Reasons, job: j}
		for _, r := range j.Reviews {
			if r.Case == e.Case {
				re.Reviewers = append(re.Reviewers, r.By)
			}
		}
		out = append(out, re)
	}
	return out, p
}

// judgeVerdict is the judge's verdict of a job, the one kept in its first review once a
// person decided.
func judgeVerdict(rk kind.Reviewing, j *records.Job) (review.Verdict, string, bool) {
	if len(j.Reviews) > 0 {
		return j.Reviews[0].Judge, j.Reviews[0].Model, true
	}
	return rk.JudgeVerdict(j)
}

// caseJudgeVerdict is judgeVerdict for one case of a job reviewed per case.
func caseJudgeVerdict(ck kind.CaseReviewing, j *records.Job, caseID string) (review.Verdict, string, bool) {
	for _, r := range j.Reviews {
		if r.Case == caseID {
			return r.Judge, r.Model, true
		}
	}
	return ck.CaseJudgeVerdict(j, caseID)
}

// ReviewItem is what a reviewer is shown of one queued AC: exactly what the judge was
// sent (the messages of the job's first judge call, in which slots A and B are blinded
// as the judge had them; for a case of an AC reviewed per case, the first call judging
// that case, whose label is the case; for a kind that names the call of the verdict
// reviewed, kind.ReviewCalling, that call: a rubric view's last judged iteration), the
// shape to answer in (kind.ReviewTemplateOf), and nothing else: no AC
// id, no case id, no path, no role, no judge verdict, no reason it was queued.
type ReviewItem struct {
	Item string `json:"item"`
	Kind string `json:"kind"`
	// Instructions are the judge's instructions (its system message).
	Instructions string `json:"instructions,omitempty"`
	// Shown are the parts of what the judge was asked, in order: text, or an image by
	// its digest (read it with ReviewImage).
	Shown []judge.RecordedPart `json:"shown"`
	// Answer is the shape to answer in (the kind's verdict object).
	Answer string `json:"answer_shape"`
	// Missing says why nothing can be shown (the judge's call was not kept): such an
	// item cannot be reviewed blind, and says so instead of showing something else.
	Missing string `json:"missing,omitempty"`
}

// ReviewItemOf reads what a reviewer is shown of a queued AC.
func ReviewItemOf(ctx context.Context, store blob.Store, e ReviewEntry) (ReviewItem, error) {
	it := ReviewItem{Item: e.Item, Kind: e.Kind}
	j := e.job
	k, err := kind.Lookup(j.Spec.Kind)
	if err != nil {
		return it, err
	}
	switch k.(type) {
	case kind.CaseReviewing:
		if e.Case == "" {
			return it, fmt.Errorf("%s: a %s job is reviewed per case and the item names none", e.Item, j.Spec.Kind)
		}
	case kind.Reviewing:
	default:
		return it, fmt.Errorf("%s: a %s job cannot be reviewed", e.Item, j.Spec.Kind)
	}
	it.Answer = kind.ReviewTemplateOf(k, j)
	var rec *events.Blob
	if rc, ok := k.(kind.ReviewCalling); ok {
		// The kind names the call of the verdict reviewed (rubric: the loop's last).
		if c, ok := rc.ReviewCall(j); ok {
			rec = c.Record
		}
	} else {
		for _, c := range j.Calls {
			if c.Record != nil && (e.Case == "" || c.Label == e.Case) {
				rec = c.Record
				break
			}
		}
	}
	if rec == nil {
		it.Missing = "the judge's call was not kept, so what it saw cannot be shown"
		return it, nil
	}
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: j.Tenant, SHA256: rec.SHA256})
	if err != nil {
		return it, fmt.Errorf("%s: the judge's call: %w", e.Item, err)
	}
	cr, err := judge.DecodeCallRecord(data)
	if err != nil || len(cr.Exchanges) == 0 {
		return it, fmt.Errorf("%s: the judge's call record does not read: %v", e.Item, err)
	}
	for _, m := range cr.Exchanges[0].Messages {
		switch m.Role {
		case "system":
			for _, p := range m.Parts {
				it.Instructions += p.Text
			}
		case "user":
			it.Shown = append(it.Shown, m.Parts...)
		}
	}
	return it, nil
}

// ReviewImage reads an image a review item shows, only if the item shows it: the queue
// never serves any other of the tenant's blobs.
func ReviewImage(ctx context.Context, store blob.Store, tenant string, it ReviewItem, sha string) ([]byte, string, error) {
	for _, p := range it.Shown {
		if p.Image != nil && p.Image.SHA256 == sha {
			data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: tenant, SHA256: sha})
			return data, p.Image.MediaType, err
		}
	}
	return nil, "", fmt.Errorf("%s shows no image %s", it.Item, sha)
}

// FindReviewEntry finds the queue entry named key: its item id or, for a team reviewing
// in its own tool, its AC id.
func FindReviewEntry(q []ReviewEntry, key string) (ReviewEntry, bool) {
	for _, e := range q {
		if e.Item == key || e.AC == key {
			return e, true
		}
	}
	return ReviewEntry{}, false
}

// MaxReviewFile bounds an answers file.
const MaxReviewFile = 16 << 20

// ReviewAnswers reads an answers file: one JSON object mapping an item id (or an AC id)
// to an answer in the kind's verdict shape, as seed 000's winner file maps AC ids to
// verdicts ({"AC-7": {"raw_winner": "A", "confidence": 0.8, "biggest_gap": "..."}}). A
// key given twice is refused, as the same key twice is two answers to one question. The
// answers keep the file's order.
func ReviewAnswers(r io.Reader) ([]string, map[string]json.RawMessage, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxReviewFile+1))
	if err != nil {
		return nil, nil, err
	}
	if len(data) > MaxReviewFile {
		return nil, nil, fmt.Errorf("answers file: more than %d bytes", MaxReviewFile)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("answers file: want one JSON object of answers by item id")
	}
	var keys []string
	out := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, nil, fmt.Errorf("answers file: %w", err)
		}
		k := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, nil, fmt.Errorf("answers file: %s: %w", k, err)
		}
		if _, dup := out[k]; dup {
			return nil, nil, fmt.Errorf("answers file: %s is answered twice", k)
		}
		keys = append(keys, k)
		out[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fmt.Errorf("answers file: %w", err)
	}
	if dec.More() {
		return nil, nil, errors.New("answers file: more than one JSON value")
	}
	return keys, out, nil
}

// CheckReviewAnswer checks an answer to a queued job against its kind's answer contract
// before anything is published, so a mistake is reported to the person who made it.
func CheckReviewAnswer(e ReviewEntry, answer []byte) error {
	k, err := kind.Lookup(e.job.Spec.Kind)
	if err != nil {
		return err
	}
	switch rk := k.(type) {
	case kind.CaseReviewing:
		if e.Case == "" {
			return fmt.Errorf("%s: %s is reviewed per case: the answer names no case (field case)", e.Item, e.AC)
		}
		_, err = rk.CaseReviewAnswer(e.job, e.Case, answer)
	case kind.Reviewing:
		_, err = rk.ReviewAnswer(e.job, answer)
	default:
		return fmt.Errorf("%s: a %s job cannot be reviewed", e.Item, e.job.Spec.Kind)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", e.Item, err)
	}
	return nil
}

// ReviewEvent is a person's review of job as published: compacted JSON answer, the
// job's iteration and attempt, id step by reviewer and answer.
func ReviewEvent(j *records.Job, answer []byte, by, via string) (events.Event, error) {
	return ReviewCaseEvent(j, "", answer, by, via)
}

// ReviewCaseEvent is ReviewEvent for one case of a job reviewed per case (caseID ""
// for a job reviewed whole).
func ReviewCaseEvent(j *records.Job, caseID string, answer []byte, by, via string) (events.Event, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, answer); err != nil {
		return events.Event{}, fmt.Errorf("answer: %w", err)
	}
	p := &events.ReviewRecorded{Kind: j.Spec.Kind, Answer: buf.String(), By: by, Via: via, Case: caseID}
	e := events.NewAttempt(p, j.Tenant, j.Batch, j.ACID, j.Iteration, p.Step(), j.Attempt, nil)
	if err := p.Validate(); err != nil {
		return events.Event{}, err
	}
	return e, nil
}

// RecordReview publishes a person's review of a queued job.
func RecordReview(pub Publisher, e ReviewEntry, answer []byte, by, via string) error {
	if err := CheckReviewAnswer(e, answer); err != nil {
		return err
	}
	ev, err := ReviewCaseEvent(e.job, e.Case, answer, by, via)
	if err != nil {
		return err
	}
	msgs, err := bus.Messages(ev)
	if err != nil {
		return err
	}
	return pub.Publish("", msgs...)
}

// LocalReviewer names the person at this machine (user@host), who reviews with the local
// CLI and viewer: on one user's own machine their login is their identity.
func LocalReviewer() string {
	name := os.Getenv("USER")
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	host, _ := os.Hostname()
	return strings.Trim(name+"@"+host, "@")
}

// ReviewPairs are a batch's reviewed jobs as agreement compares them: one pair per
// review (so per case of a job reviewed per case), the judge's verdict as it was before
// any review decided.
func ReviewPairs(jobs []*records.Job) []review.Pair {
	slices.SortFunc(jobs, func(a, b *records.Job) int { return a.Index - b.Index })
	var out []review.Pair
	for _, j := range jobs {
		var scale review.Scale
		if k, err := kind.Lookup(j.Spec.Kind); err == nil {
			if rk, ok := k.(interface{ ReviewScale() review.Scale }); ok {
				scale = rk.ReviewScale()
			}
		}
		for _, r := range j.Reviews {
			out = append(out, review.Pair{AC: j.ACID, Case: r.Case, Kind: string(j.Spec.Kind), Model: r.Model, By: r.By, Judge: r.Judge, Person: r.Person, Scale: scale})
		}
	}
	return out
}

// ReviewReport is a batch's agreement with people.
type ReviewReport struct {
	// Reviewed counts the reviewed ACs, Reviews the reviews.
	Reviewed int `json:"reviewed"`
	Reviews  int `json:"reviews"`
	// Decides says the batch let people decide the outcome.
	Decides bool `json:"decides"`
	// Via counts the reviews by how they came ("import", "viewer", "console").
	Via       map[string]int     `json:"via"`
	Agreement []review.Agreement `json:"agreement"`
}

// ReviewAgreement is a batch's agreement with people over its job records; nil when
// nobody reviewed any.
func ReviewAgreement(jobs []*records.Job, seed uint64) (*ReviewReport, error) {
	pairs := ReviewPairs(jobs)
	if len(pairs) == 0 {
		return nil, nil
	}
	rep := &ReviewReport{Reviews: len(pairs), Via: map[string]int{}}
	for _, j := range jobs {
		if len(j.Reviews) > 0 {
			rep.Reviewed++
		}
		for _, r := range j.Reviews {
			rep.Via[r.Via]++
		}
		rep.Decides = rep.Decides || j.Spec.Review != nil && j.Spec.Review.Decides
	}
	a, err := review.Agree(pairs, seed)
	if err != nil {
		return nil, err
	}
	rep.Agreement = a
	return rep, nil
}

// reviewedFold is a completed batch folded again after people's reviews decided.
type reviewedFold struct {
	summary   events.BatchCompleted
	manifests map[events.Kind][]byte
}

// reviewedCompletion folds a completed batch's records again with the rules' own fold
// (rulebook.Fold) when a person's review decided an outcome the stored completion does
// not hold yet. The aggregator revises the stored completion and manifests itself when a
// deciding review comes after the batch completed (records.Completion.Revised), so this
// is for a batch it has not revised: one completed by an earlier version, or a revision
// still to be made up after a crash (a decision later than the completion's time, which
// is its latest decision's). The summary, exit code and manifests then say what the
// people decided (an ab comparison so decided carries tribunal.review); nil when the
// stored completion does.
func reviewedCompletion(tenant, batchID string, c *records.Completion, recs []*records.Job) (*reviewedFold, error) {
	stale := false
	for _, j := range recs {
		stale = stale || reviewDecidedAfter(j, c)
	}
	if !stale {
		return nil, nil
	}
	f := rulebook.NewFold(tenant, batchID)
	for _, j := range recs {
		f.Add(j)
	}
	return reviewed(f, tenant, batchID, c)
}

// reviewDecidedAfter reports whether a person's review decided j's outcome after the
// completion c was folded (so c is stale for it).
func reviewDecidedAfter(j *records.Job, c *records.Completion) bool {
	for _, r := range j.Reviews {
		if r.Decides && j.DecidedBy == r.Event && (c.Revised == nil || j.DecidedAt.After(c.At)) {
			return true
		}
	}
	return false
}

// refold is reviewedCompletion for a batch whose records are read one at a time: the
// completion folded again from them (rulebook.Fold spills what it holds).
func refold(ctx context.Context, st records.Store, tenant, batchID string, c *records.Completion) (*reviewedFold, error) {
	f := rulebook.NewFold(tenant, batchID)
	if err := st.EachJob(ctx, tenant, batchID, func(j *records.Job) error { f.Add(j); return nil }); err != nil {
		return nil, err
	}
	return reviewed(f, tenant, batchID, c)
}

// reviewed completes f as c's completion, with the reviews it folded.
func reviewed(f *rulebook.Fold, tenant, batchID string, c *records.Completion) (*reviewedFold, error) {
	done, err := f.Complete(c.By, c.Attempt)
	if err != nil {
		return nil, fmt.Errorf("batch %s/%s folded with its reviews: %w", tenant, batchID, err)
	}
	return &reviewedFold{summary: done.Completion.Summary, manifests: done.Manifests}, nil
}

// manifest is a kind's manifest of the results: folded with the reviews when they
// decided, else as stored at completion.
func (r *Results) manifest(ctx context.Context, store blob.Store, k events.Kind, ref events.Blob) ([]byte, error) {
	if r.reviewed != nil {
		if m, ok := r.reviewed.manifests[k]; ok {
			return m, nil
		}
	}
	data, _, err := blob.ReadAll(ctx, store, blob.Ref{Tenant: r.Tenant, SHA256: ref.SHA256})
	return data, err
}

// ResolvedAnswer is one answer of an answers file with the queue item it answers.
type ResolvedAnswer struct {
	Entry  ReviewEntry
	Answer json.RawMessage
}

// ResolveAnswers finds the queue item of every answer of an answers file (ReviewAnswers),
// in the file's order. A key is an item id or an AC id. An AC reviewed per case
// (equivalence) is answered per case: its answer says its case in a "case" field beside
// the kind's verdict fields ({"AC-3": {"case": "plain-fix", "verdict": …}}), or a list of
// such answers for several cases; keyed by its item id, the case may be left out. An
// answer for an AC reviewed per case naming no case, or a case not in the queue, is
// refused naming the AC and the field; so is the same item answered twice in one file.
func ResolveAnswers(q []ReviewEntry, keys []string, answers map[string]json.RawMessage) ([]ResolvedAnswer, error) {
	var out []ResolvedAnswer
	seen := map[string]string{}
	add := func(key string, e ReviewEntry, a json.RawMessage) error {
		if prev, dup := seen[e.Item]; dup {
			return fmt.Errorf("%s: %s is answered twice (also by %s)", key, e.Item, prev)
		}
		seen[e.Item] = key
		out = append(out, ResolvedAnswer{Entry: e, Answer: a})
		return nil
	}
	for _, k := range keys {
		var matched []ReviewEntry
		for _, e := range q {
			if e.Item == k || e.AC == k {
				matched = append(matched, e)
			}
		}
		if len(matched) == 0 {
			return nil, fmt.Errorf("%s is not in the review queue", k)
		}
		if matched[0].Case == "" {
			if err := add(k, matched[0], answers[k]); err != nil {
				return nil, err
			}
			continue
		}
		raw := bytes.TrimSpace(answers[k])
		list := []json.RawMessage{raw}
		if len(raw) > 0 && raw[0] == '[' {
			if err := json.Unmarshal(raw, &list); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
		}
		ac := matched[0].AC
		var cases []string
		for _, e := range matched {
			cases = append(cases, e.Case)
		}
		for _, a := range list {
			caseID, rest, err := splitCase(a)
			if err != nil {
				return nil, fmt.Errorf("%s (AC %s): %w", k, ac, err)
			}
			switch {
			case caseID == "" && len(matched) == 1 && matched[0].Item == k:
				caseID = matched[0].Case
			case caseID == "":
				return nil, fmt.Errorf("%s: AC %s is reviewed per case: the answer names no case (field case; its cases in the queue: %s)", k, ac, strings.Join(cases, ", "))
			}
			i := slices.Index(cases, caseID)
			if i < 0 {
				return nil, fmt.Errorf("%s: AC %s: case %q is not in the review queue (field case; its cases in the queue: %s)", k, ac, caseID, strings.Join(cases, ", "))
			}
			if err := add(k, matched[i], rest); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// splitCase takes the "case" field out of an answer object, keeping the other fields
// in their order.
func splitCase(a json.RawMessage) (string, json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(a))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return "", nil, errors.New("want an answer object")
	}
	var buf bytes.Buffer
	buf.WriteByte('{')
	caseID, n := "", 0
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return "", nil, err
		}
		key := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", nil, fmt.Errorf("%s: %w", key, err)
		}
		if key == "case" {
			if err := json.Unmarshal(v, &caseID); err != nil || caseID == "" {
				return "", nil, fmt.Errorf("case: want a case id, got %s", v)
			}
			continue
		}
		if n > 0 {
			buf.WriteByte(',')
		}
		n++
		kb, _ := json.Marshal(key)
		buf.Write(kb)
		buf.WriteByte(':')
		buf.Write(v)
	}
	buf.WriteByte('}')
	return caseID, buf.Bytes(), nil
}
