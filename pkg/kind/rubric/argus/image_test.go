package argus

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"testing"
)

// render draws a 100x100 test screen: a background, a header bar and n changed pixels.
func render(t *testing.T, w, h int, shift uint8, changed int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			c := color.NRGBA{R: 240 + shift/2, G: 240 + shift/2, B: 236 + shift/2, A: 255}
			if y < 12 {
				c = color.NRGBA{R: 26 + shift, G: 77 + shift, B: 189 + shift, A: 255}
			}
			img.SetNRGBA(x, y, c)
		}
	}
	for i := 0; i < changed; i++ {
		img.SetNRGBA(i%w, h-1-i/w, color.NRGBA{R: 200, G: 20, B: 20, A: 255})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestCompareImages(t *testing.T) {
	t.Parallel()
	base := render(t, 100, 100, 0, 0)
	cases := []struct {
		name      string
		prev, cur []byte
		unchanged bool
		method    string
		diff      int
	}{
		{"identical", base, render(t, 100, 100, 0, 0), true, MethodPixel, 0},
		{"0.4% of pixels differ", base, render(t, 100, 100, 0, 40), true, MethodPixel, 40},
		{"0.5% is no longer under the bar", base, render(t, 100, 100, 0, 50), false, MethodPixel, 50},
		{"1% of pixels differ", base, render(t, 100, 100, 0, 100), false, MethodPixel, 100},
		// +4 levels in every channel of the header, +2 in the body: well inside 5%.
		{"colour jitter under 5%", base, render(t, 100, 100, 4, 0), true, MethodPixel, 0},
		// +30 levels in the header and +15 in the body: every pixel is recoloured.
		{"colour change over 5%", base, render(t, 100, 100, 30, 0), false, MethodPixel, 10000},
		{"different size", base, render(t, 100, 101, 0, 0), false, MethodPixel, 10100},
		{"undecodable, same bytes", []byte("not a png"), []byte("not a png"), true, MethodSHA256, 0},
		{"undecodable, different bytes", []byte("not a png"), []byte("not a png either"), false, MethodSHA256, 0},
		{"one side undecodable", base, base[:len(base)/2], false, MethodSHA256, 0},
		{"empty input", nil, nil, true, MethodSHA256, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := CompareImages(c.prev, c.cur)
			if got.Unchanged != c.unchanged || got.Method != c.method || got.DiffPixels != c.diff {
				t.Fatalf("%+v", got)
			}
			if c.method == MethodPixel && got.TotalPixels == 0 {
				t.Error("total pixels not reported")
			}
			if c.method == MethodSHA256 && got.Reason == "" {
				t.Error("fallback without a reason")
			}
		})
	}
	if got := CompareImages(base, render(t, 100, 101, 0, 0)); !got.SizeMismatch {
		t.Error("size mismatch not flagged")
	}
}

func TestSnapshotStatus(t *testing.T) {
	t.Parallel()
	base := render(t, 50, 50, 0, 0)
	if s, _ := SnapshotStatus(nil, base); s != GateSkip {
		t.Errorf("no baseline: %s", s)
	}
	if s, _ := SnapshotStatus(base, render(t, 50, 50, 2, 0)); s != GatePass {
		t.Errorf("jitter: %s", s)
	}
	if s, c := SnapshotStatus(base, render(t, 50, 50, 0, 100)); s != GateDiff || c.DiffPixels != 100 {
		t.Errorf("changed: %s %+v", s, c)
	}
}

func TestCompareImagesRefusesHugeHeaders(t *testing.T) {
	t.Parallel()
	// A valid PNG header claiming 100000x100000 pixels must not be decoded.
	img := image.NewGray(image.Rect(0, 0, 1, 1))
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	// IHDR width and height live at bytes 16..23; the CRC is then wrong, which the
	// config decoder does not check, so the size check is what rejects it.
	copy(b[16:24], []byte{0, 1, 0x86, 0xA0, 0, 1, 0x86, 0xA0})
	got := CompareImages(b, b)
	if got.Method != MethodSHA256 || !got.Unchanged {
		t.Fatalf("%+v", got)
	}
}
