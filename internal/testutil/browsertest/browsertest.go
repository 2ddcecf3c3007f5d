// Package browsertest starts the system's Chromium headless for tests that look at pages
// the way a person does (chromedp), or skips the test when there is none.
package browsertest

import (
	"context"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
)

// Start starts a headless Chromium of the given window size for the test and returns a
// chromedp context on its first tab; both end at the test's cleanup.
func Start(t testing.TB, width, height int) context.Context {
	t.Helper()
	Need(t)
	path, err := web.FindBrowser()
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.Flag("headless", true),
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(width, height))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(cancelCtx)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// Available reports whether the system has a Chromium the web sensor would start.
func Available() bool {
	_, err := web.FindBrowser()
	return err == nil
}

// Need skips the test when the system has no Chromium.
func Need(t testing.TB) {
	t.Helper()
	if !Available() {
		t.Skip("chromium not installed: .ci/run installs Debian's chromium package")
	}
}
