package artifact

// This test FAILS against the code at the time of writing (see the test report).

import (
	"context"
	"strconv"
	"testing"
	"time"
)

// Bug I: MaxRedirects is off by one. CheckRedirect refuses when len(via) >= MaxRedirects,
// and via already holds every request made, so the N-th redirect is refused and the
// block reason says "more than N redirects" after exactly N. With MaxRedirects: 1 no
// redirect at all is followed.
func TestBugFetchFollowsExactlyMaxRedirects(t *testing.T) {
	t.Parallel()
	srv, _ := fetchServer(t, nil)
	for _, max := range []int{1, 2, 5} {
		f := NewFetcher(FetchOptions{AllowPrivate: true, Timeout: 5 * time.Second, MaxRedirects: max})
		got, err := f.Fetch(context.Background(), srv.URL+"/redirect?n="+strconv.Itoa(max))
		if err != nil {
			t.Fatal(err)
		}
		if got.Blocked != "" {
			t.Errorf("MaxRedirects %d, %d redirects: blocked %q", max, max, got.Blocked)
		}
		got, _ = f.Fetch(context.Background(), srv.URL+"/redirect?n="+strconv.Itoa(max+1))
		if got.Blocked == "" {
			t.Errorf("MaxRedirects %d, %d redirects: accepted", max, max+1)
		}
	}
}
