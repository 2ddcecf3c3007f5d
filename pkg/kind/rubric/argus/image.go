package argus

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"image"
	_ "image/gif"  // renders may arrive as GIF
	_ "image/jpeg" // or JPEG
	_ "image/png"  // PNG is what sensors normally write
)

// Image comparison methods.
const (
	// MethodPixel means both images decoded and were compared pixel by pixel.
	MethodPixel = "pixel"
	// MethodSHA256 means at least one image could not be decoded and the bytes were
	// compared exactly instead.
	MethodSHA256 = "sha256"
)

// UnchangedMaxDiffFraction is the share of differing pixels below which two renders are
// the same screen: anti-aliasing and font hinting touch a few pixels between otherwise
// identical renders, and a real change to a view touches far more than half a percent.
const UnchangedMaxDiffFraction = 0.005

// PixelTolerance is how far apart two pixels' colours may be and still count as equal:
// the Euclidean distance over premultiplied R, G, B, A, each scaled to 0..1. Colour
// management and compression shift channels by a level or two; 5% of full scale absorbs
// that without hiding a changed colour.
const PixelTolerance = 0.05

// maxComparePixels caps the decoded size so a crafted header cannot make the gater
// allocate gigabytes; larger images are compared by hash.
const maxComparePixels = 64 << 20

// ImageComparison is the outcome of comparing a previous render with the current one.
type ImageComparison struct {
	// Unchanged lets the loop confirm a pass without asking the judge again.
	Unchanged bool `json:"unchanged"`
	// Method is MethodPixel or MethodSHA256.
	Method string `json:"method"`
	// DiffPixels and TotalPixels are the pixel counts for MethodPixel (both equal to
	// the larger image's area when the sizes differ); zero for MethodSHA256.
	DiffPixels  int `json:"diff_pixels"`
	TotalPixels int `json:"total_pixels"`
	// SizeMismatch is set when the images have different dimensions.
	SizeMismatch bool `json:"size_mismatch,omitempty"`
	// Reason says why the hash fallback was used.
	Reason string `json:"reason,omitempty"`
}

// CompareImages decides whether the current render is unchanged from the previous one.
// Decodable images are unchanged when fewer than UnchangedMaxDiffFraction of their
// pixels differ by more than PixelTolerance; images of different sizes are always
// changed. When either image cannot be decoded the comparison falls back to SHA-256
// equality of the bytes, which can only err towards "changed" and so at worst costs an
// extra judge call, never a skipped one.
func CompareImages(prev, cur []byte) ImageComparison {
	a, errA := decodeBounded(prev)
	b, errB := decodeBounded(cur)
	if errA != nil || errB != nil {
		reason := ""
		if errA != nil {
			reason = "previous: " + errA.Error()
		} else {
			reason = "current: " + errB.Error()
		}
		return ImageComparison{
			Unchanged: sha256.Sum256(prev) == sha256.Sum256(cur),
			Method:    MethodSHA256,
			Reason:    reason,
		}
	}
	ab, bb := a.Bounds(), b.Bounds()
	if ab.Dx() != bb.Dx() || ab.Dy() != bb.Dy() {
		total := max(ab.Dx()*ab.Dy(), bb.Dx()*bb.Dy())
		return ImageComparison{Method: MethodPixel, DiffPixels: total, TotalPixels: total, SizeMismatch: true}
	}
	total := ab.Dx() * ab.Dy()
	if total == 0 {
		return ImageComparison{Unchanged: bytes.Equal(prev, cur), Method: MethodSHA256, Reason: "empty image"}
	}
	diff := 0
	tol := PixelTolerance * PixelTolerance
	for y := 0; y < ab.Dy(); y++ {
		for x := 0; x < ab.Dx(); x++ {
			r1, g1, b1, a1 := a.At(ab.Min.X+x, ab.Min.Y+y).RGBA()
			r2, g2, b2, a2 := b.At(bb.Min.X+x, bb.Min.Y+y).RGBA()
			if sq(r1, r2)+sq(g1, g2)+sq(b1, b2)+sq(a1, a2) > tol {
				diff++
			}
		}
	}
	return ImageComparison{
		Unchanged:   float64(diff) < UnchangedMaxDiffFraction*float64(total),
		Method:      MethodPixel,
		DiffPixels:  diff,
		TotalPixels: total,
	}
}

// sq is the squared difference of two 16-bit channels scaled to 0..1.
func sq(x, y uint32) float64 {
	d := (float64(x) - float64(y)) / 0xffff
	return d * d
}

// decodeBounded decodes an image after checking its declared size.
func decodeBounded(data []byte) (image.Image, error) {
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if cfg.Width < 0 || cfg.Height < 0 || float64(cfg.Width)*float64(cfg.Height) > maxComparePixels {
		return nil, fmt.Errorf("decode: %dx%d is larger than %d pixels", cfg.Width, cfg.Height, maxComparePixels)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	return img, nil
}

// SnapshotStatus is the snapshot gate over a committed baseline: pass when the render
// is unchanged from it, diff otherwise, skip when there is no baseline yet (a view
// gets its baseline at sign-off).
func SnapshotStatus(baseline, cur []byte) (GateStatus, ImageComparison) {
	if baseline == nil {
		return GateSkip, ImageComparison{}
	}
	c := CompareImages(baseline, cur)
	if c.Unchanged {
		return GatePass, c
	}
	return GateDiff, c
}
