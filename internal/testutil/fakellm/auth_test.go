package fakellm

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func get(t *testing.T, url string, header http.Header) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header = header
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAPIKey: with a key set the server answers 401 without it or with another one, on
// the model list and on chat completions alike, as OpenAI does; with it, it serves.
func TestAPIKey(t *testing.T) {
	s := New(Options{APIKey: "sk-right-key-1234"})
	defer s.Close()
	bearer := func(k string) http.Header { return http.Header{"Authorization": {"Bearer " + k}} }
	for _, tc := range []struct {
		name   string
		header http.Header
		status int
		msg    string
	}{
		{"no key", http.Header{}, 401, "You didn't provide an API key"},
		{"wrong key", bearer("sk-wrong-key-9999"), 401, "Incorrect API key provided: sk-*****9999"},
		{"right key", bearer("sk-right-key-1234"), 200, DefaultModel},
		{"azure header", http.Header{"Api-Key": {"sk-right-key-1234"}}, 200, DefaultModel},
	} {
		status, body := get(t, s.BaseURL()+"/models", tc.header)
		if status != tc.status || !strings.Contains(body, tc.msg) {
			t.Errorf("%s: GET /models = %d %s; want %d with %q", tc.name, status, body, tc.status, tc.msg)
		}
		req, _ := http.NewRequest(http.MethodPost, s.BaseURL()+"/chat/completions", strings.NewReader(chatBody))
		req.Header = tc.header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: chat = %d, want %d", tc.name, resp.StatusCode, tc.status)
		}
	}
	if s.ModelListings() != 4 || s.Calls() != 4 {
		t.Errorf("counted %d listings and %d chat calls, want 4 and 4", s.ModelListings(), s.Calls())
	}
}

func TestNoModels(t *testing.T) {
	t.Parallel()
	s := New(Options{NoModels: true})
	defer s.Close()
	if status, body := get(t, s.BaseURL()+"/models", http.Header{}); status != 404 {
		t.Errorf("GET /models = %d %s, want 404", status, body)
	}
}
