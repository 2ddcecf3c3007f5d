package e2e

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/tribunal-dev/tribunal/internal/testutil/poll"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// pngBytes is a small solid PNG.
func pngBytes(t *testing.T, c color.RGBA) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 8, 6))
	for y := 0; y < 6; y++ {
		for x := 0; x < 8; x++ {
			img.Set(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const unifiedDiff = `--- a/notes.md
+++ b/notes.md
@@ -1,2 +1,2 @@
 # Notes
-Old line.
+New line.
`

// forbiddenIn lists what may never reach a judge that occurs in text (case-insensitive).
func forbiddenIn(text string, forbidden []string) []string {
	low := strings.ToLower(text)
	var hits []string
	for _, f := range forbidden {
		if strings.Contains(low, strings.ToLower(f)) {
			hits = append(hits, f)
		}
	}
	return hits
}

// TestJudgeIsBlind: everything a judge instance can receive (the gates.done events on the
// bus and the requests its provider gets) is free of role labels, paths and diffs; images
// arrive as image parts; a diff is blocked before any judge.
func TestJudgeIsBlind(t *testing.T) {
	env := NewEnv(t)
	env.pipeline()
	rec := recordCalls(scriptedJudge(t, "A"))
	env.Start(rec, "judge-1", bus.Judge)

	// Everything a judge instance can receive, straight off the subjects.
	var mu sync.Mutex
	var seen []*nats.Msg
	nc := env.Conn()
	if _, err := nc.Subscribe(events.AnyTenant(events.TypeGatesDone), func(m *nats.Msg) {
		mu.Lock()
		seen = append(seen, m)
		mu.Unlock()
	}); err != nil {
		t.Fatal(err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}

	oursPNG, refPNG := pngBytes(t, color.RGBA{200, 30, 30, 255}), pngBytes(t, color.RGBA{30, 30, 200, 255})
	files := map[string]string{
		"batch.yaml":            "version: 1\nname: blind\nacs:\n",
		"ours/intro.md":         "# Intro\nWelcome to the tool.\n",
		"reference/intro.md":    "# Intro\nWelcome, this tool helps you.\n",
		"ours/usage.txt":        "Run it with --fast.\n",
		"reference/usage.txt":   "Run it; add --fast for speed.\n",
		"ours/shot.png":         string(oursPNG),
		"reference/shot.png":    string(refPNG),
		"ours/change.md":        unifiedDiff,
		"reference/change.md":   "# Notes\nNew line.\n",
		"ours/nested/deep.json": `{"title": "settings", "items": 3}` + "\n",
		"reference/deep.json":   `{"title": "settings", "items": 4}` + "\n",
	}
	addAC(files, "AC-intro", "the intro is welcoming", "ours/intro.md", "reference/intro.md")
	addAC(files, "AC-usage", "the usage line is clear", "ours/usage.txt", "reference/usage.txt")
	addAC(files, "AC-shot", "the screenshot is legible", "ours/shot.png", "reference/shot.png")
	addAC(files, "AC-diff", "the change is right", "ours/change.md", "reference/change.md")
	addAC(files, "AC-json", "the settings are sensible", "ours/nested/deep.json", "reference/deep.json")
	b := WriteBatch(t, files)
	sub := env.Submit(b, e2eTenant)
	res := env.Wait(sub, 30*time.Second)

	// What must never reach a judge.
	forbidden := []string{"ours", "reference", b.Dir, b.Path, filepath.Dir(b.Dir), "--- a/", "+++ b/", "@@ "}
	for p := range files {
		forbidden = append(forbidden, p, filepath.Join(b.Dir, p), filepath.Base(p))
	}

	rows := rowsByID(res.Rows)
	if r := rows["AC-diff"]; r.Status != "blocked" || !strings.Contains(r.Reason, "diffs are never judged") {
		t.Errorf("diff AC: %+v, want blocked because diffs are never judged", r)
	}
	for _, id := range []string{"AC-intro", "AC-usage", "AC-shot", "AC-json"} {
		if rows[id].Status != "compared" {
			t.Errorf("%s: %+v, want compared", id, rows[id])
		}
	}

	calls := rec.Snapshot()
	if len(calls) != 4 {
		t.Errorf("%d judge calls, want 4 (every AC but the diff)", len(calls))
	}
	images := 0
	for _, c := range calls {
		if c.Req.Key == "AC-diff" {
			t.Errorf("the diff AC reached a judge")
		}
		text := requestText(c.Req) + "\n" + c.Req.Model
		if hits := forbiddenIn(text, forbidden); len(hits) > 0 {
			t.Errorf("request for %s carries %q:\n%s", c.Req.Key, hits, text)
		}
		for _, m := range c.Req.Messages {
			for _, p := range m.Parts {
				if p.Image == nil {
					continue
				}
				images++
				if p.Image.MediaType != "image/png" || (!bytes.Equal(p.Image.Data, oursPNG) && !bytes.Equal(p.Image.Data, refPNG)) {
					t.Errorf("image part %s (%d bytes) is not one of the batch's PNGs", p.Image.MediaType, len(p.Image.Data))
				}
				if c.Req.Key != "AC-shot" {
					t.Errorf("image part in the request for %s", c.Req.Key)
				}
			}
		}
	}
	if images != 2 {
		t.Errorf("%d image parts, want the 2 PNGs of AC-shot", images)
	}

	want := int(env.subjectCount(events.AnyTenant(events.TypeGatesDone)))
	if want != 4 {
		t.Errorf("%d gates.done events, want 4", want)
	}
	poll.Until(t, 5*time.Second, "the subscription to see every gates.done", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= want, fmt.Sprintf("%d/%d", len(seen), want)
	})
	mu.Lock()
	defer mu.Unlock()
	for _, m := range seen {
		all := string(m.Data)
		for k, vs := range m.Header {
			all += "\n" + k + ": " + strings.Join(vs, ",")
		}
		if hits := forbiddenIn(all, forbidden); len(hits) > 0 {
			t.Errorf("gates.done on %s carries %q: %q", m.Subject, hits, all)
		}
		ev, err := events.Decode(m.Data)
		if err != nil {
			t.Fatalf("gates.done does not decode: %v", err)
		}
		if ev.JobID == "AC-diff" {
			t.Errorf("the diff AC was published to judges")
		}
		gd := ev.Payload.(*events.GatesDone)
		for _, s := range gd.Slots {
			if s.Name != "A" && s.Name != "B" {
				t.Errorf("slot named %q", s.Name)
			}
		}
	}
}
