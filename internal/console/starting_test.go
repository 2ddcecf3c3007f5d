package console

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestStartingHold: a console waiting for its state answers 503; one held (a `tribunal
// view` that stepped aside for a run) answers 503 with a page that says why and reloads;
// Start serves the console again.
func TestStartingHold(t *testing.T) {
	var s Starting
	get := func() *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/static/console.css", nil))
		return rec
	}
	if rec := get(); rec.Code != 503 || !strings.Contains(rec.Body.String(), "waiting for the services") || s.Ready() {
		t.Fatalf("starting: %d %q", rec.Code, rec.Body.String())
	}
	s.Hold("tribunal run (pid 42) is using <this> folder")
	rec := get()
	if rec.Code != 503 || !strings.Contains(rec.Body.String(), "tribunal run (pid 42) is using &lt;this&gt; folder") ||
		!strings.Contains(rec.Body.String(), `http-equiv="refresh"`) || rec.Header().Get("Retry-After") == "" || s.Ready() {
		t.Fatalf("held: %d %q", rec.Code, rec.Body.String())
	}
	// The API answers JSON while held, as it does when serving: a poller never parses a page.
	api := httptest.NewRecorder()
	s.ServeHTTP(api, httptest.NewRequest(http.MethodGet, "/api/batches", nil))
	var body struct {
		Error string `json:"error"`
		Busy  bool   `json:"busy"`
	}
	if err := json.Unmarshal(api.Body.Bytes(), &body); api.Code != 503 || err != nil || !body.Busy || !strings.Contains(body.Error, "pid 42") ||
		api.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("held API: %d %q %v", api.Code, api.Body.String(), err)
	}
	s.Start(Config{})
	if !s.Ready() {
		t.Fatal("not ready after Start")
	}
	// The console itself answers now.
	if rec := get(); rec.Code != 200 || !strings.Contains(rec.Header().Get("Content-Type"), "text/css") {
		t.Fatalf("started console still held: %q", rec.Body.String())
	}
}
