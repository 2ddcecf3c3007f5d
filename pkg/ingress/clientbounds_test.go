package ingress_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/bounds"
	"github.com/tribunal-dev/tribunal/pkg/ingress"
)

// spaces is an endless reader of JSON whitespace.
type spaces struct{}

func (spaces) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	return len(p), nil
}

// TestClientAnswersBounded: the client reads every answer within its bound and refuses,
// saying so, one over it or one whose shape breaks the limits every document from outside
// is held to (pkg/bounds), rather than decoding a gigabyte or a part of one: a batch's
// progress over 4 MiB, a review page over 2 × MaxReviewPageBytes, a review page of more
// items than a page may hold, an answer nested 10,000 deep.
func TestClientAnswersBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == ingress.PathWhoami:
			fmt.Fprint(w, `{"tenant": "team-a"}`)
		case r.URL.Path == ingress.PathBatches+"/big":
			fmt.Fprint(w, `{"tenant": "team-a", "batch_id": "big", "total": 1`)
			_, _ = io.CopyN(w, spaces{}, 5<<20)
			fmt.Fprint(w, `}`)
		case r.URL.Path == ingress.PathBatches+"/big/review":
			fmt.Fprint(w, `{"items": [`)
			_, _ = io.CopyN(w, spaces{}, 2*ingress.MaxReviewPageBytes)
			fmt.Fprint(w, `]}`)
		case r.URL.Path == ingress.PathBatches+"/many/review":
			fmt.Fprint(w, `{"items": [`+strings.Repeat(`{},`, 1<<17)+`{}]}`)
		case r.URL.Path == ingress.PathBatches+"/deep/review":
			fmt.Fprint(w, `{"items": `+strings.Repeat("[", 10_000)+strings.Repeat("]", 10_000)+`}`)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c, err := ingress.Dial(context.Background(), srv.URL, tokA, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Progress(ctxT(t), "big"); err == nil || !strings.Contains(err.Error(), "the answer is over 4194304 bytes") {
		t.Errorf("a progress of 5 MiB: %v", err)
	}
	if _, err := c.ReviewQueue(ctxT(t), "big"); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("the answer is over %d bytes", 2*ingress.MaxReviewPageBytes)) {
		t.Errorf("a review page over its bound: %v", err)
	}
	for _, b := range []string{"many", "deep"} {
		if _, err := c.ReviewQueue(ctxT(t), b); !errorsIsExceeded(err) {
			t.Errorf("a %s review page: %v", b, err)
		}
	}
}

func errorsIsExceeded(err error) bool {
	var be *bounds.Error
	return errors.As(err, &be) && errors.Is(err, bounds.ErrExceeded)
}
