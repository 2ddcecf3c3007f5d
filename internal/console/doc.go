// Package console is tribunal's web console: server-rendered pages (html/template, a
// little CSS, no JavaScript at all: pages of work in progress reload with a meta
// refresh) over the state the services already keep. Reviewers see batches with live
// progress, every AC's verdict un-blinded (the console is for people, never for
// judges), rubric renders beside their reference with the dimension scores and the HE-2
// spot-check controls, equivalence cases with their verdicts, and a batch's audit.
//
// It reads JetStream KV (tribunal_batches for headers and progress, tribunal_jobs for
// job records, rubric loop state and sign-offs included) and blob storage (a completed
// batch's index, read once and kept as stored, serves its table, filters, charts and
// comparisons: a page of a 100,000-AC batch does not read 100,000 records, a page in
// batch order decodes only the chunks of the index it shows, the CSV export reads it a
// chunk at a time, writing rows as it goes, and a comparison walks both batches' indexes
// chunk by chunk side by side). A running batch has no index yet: one follower per batch,
// shared by its viewers, reads its job records once through an ordered consumer on the
// jobs bucket's stream and then only the records written since, applied to its entries
// and summary counts, so a page's refresh reads no record (live.go). It
// publishes one event only, spotcheck.recorded. Reading KV needs the
// services' NATS user, so teams are kept apart here, not by NATS.
//
// # Routes
//
//	GET  /                                   batches of the caller's tenant(s), newest first
//	GET  /t/{tenant}/                        one tenant's batches
//	GET  /t/{tenant}/b/{batch}               progress, summary, charts, the AC table
//	                                         (?status= kind= outcome= route= judge= cached=
//	                                         q= sort= dir= page= per=)
//	GET  /t/{tenant}/b/{batch}/export.csv    the AC table as CSV (the same query, unpaged;
//	                                         streamed, another order than the batch's
//	                                         sorted through spill files in $TMPDIR)
//	GET  /t/{tenant}/b/{batch}/compare?with= which verdicts changed from another batch
//	                                         (page= per=; streamed, compareRows)
//	GET  /t/{tenant}/b/{batch}/j/{job}       one AC, with its kind's section (stage.Paging)
//	GET  /t/{tenant}/b/{batch}/j/{job}/call/{n}    a judge call's prompt and answer
//	POST /t/{tenant}/b/{batch}/j/{job}/{action}    a form of the kind's section (stage.PageActing:
//	                                         rubric's spotcheck, HE-2 approve / reject, and reset)
//	GET  /t/{tenant}/b/{batch}/audit         the audit report (Config.Audit)
//	GET  /t/{tenant}/b/{batch}/report        the trust report (Config.Report)
//	GET  /t/{tenant}/b/{batch}/review        the review queue, blind
//	GET  /t/{tenant}/b/{batch}/review/{item} an item as the judge was shown it, and the
//	                                         answer form (POST records review.recorded)
//	GET  /t/{tenant}/b/{batch}/review/{item}/image/{sha256}   an image the item shows
//	GET  /api/...                            the JSON of every page above (snake_case)
//	GET  /blob/{tenant}/{sha256}             one artifact, render or manifest
//	GET  /login, POST /login, POST /logout   the token cookie
//	GET  /static/console.css
//
// # Access
//
// Config.Tenants maps bearer tokens to tenants ("*", AllTenants, sees every tenant). A
// request authenticates with "Authorization: Bearer <token>" or with the HttpOnly,
// SameSite=Strict tribunal_token cookie that the /login form sets. Every handler checks
// the tenant in its path against the caller's: another team's batch, job or artifact is
// answered with the very same 404 as one that does not exist, so batch ids cannot be
// probed. Anonymous browsers are sent to /login; other anonymous requests get 401.
//
// A token has a role (tokens.Role). A team's opens every page of its team; a reviewer's
// ("<team>:reviewer") only the team's review queues (`/` lists them), each queue's items,
// their images and the answer form: every other page would un-blind it, and refuses it with a 403 naming the
// role (another team's batch is the same 404 as ever). routes is the one source of the
// mux and of the rights table in docs/security.md (TestConsoleRights walks it).
//
// With no tokens at all the console is open and shows every tenant. That is the
// single-team all-in-one mode (`tribunal run --console`); such a console must listen
// on loopback only.
//
// The spot-check POST is accepted only from the console's own pages: the Origin header
// (else Sec-Fetch-Site, else the Referer) must name the console's host, and the form
// carries a token derived from the session's credential by an HMAC under a key that
// never leaves the process (Config.CSRFKey to share it between replicas).
//
// # Artifacts are data
//
// Everything from a build (artifacts, judge text, transcripts) goes through
// html/template's escaping: text artifacts are shown in <pre>, HTML as its source,
// images inline from /blob. /blob serves the stored media type (an untyped upload is
// sniffed as an image or plain text, never as HTML) with nosniff and a sandbox content
// security policy, so an artifact never runs script in the console's origin.
package console
