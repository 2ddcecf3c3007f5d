package artifact

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// gifFrames is a GIF89a of a w x h screen holding n frames of w x h, each with the
// smallest LZW stream there is (clear code, end code): enough for the block walker,
// which never decodes.
func gifFrames(w, h uint16, n int) []byte {
	b := []byte("GIF89a")
	b = binary.LittleEndian.AppendUint16(b, w)
	b = binary.LittleEndian.AppendUint16(b, h)
	b = append(b, 0x80, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff) // a global table of 2 colours
	for range n {
		b = append(b, 0x21, 0xf9, 4, 0, 10, 0, 0, 0) // graphic control extension
		b = append(b, 0x2c, 0, 0, 0, 0)
		b = binary.LittleEndian.AppendUint16(b, w)
		b = binary.LittleEndian.AppendUint16(b, h)
		b = append(b, 0, 2, 2, 0x44, 0x01, 0) // no local table; LZW min 2; clear, end
	}
	return append(b, 0x3b)
}

// iconDIB is an ICO holding one 32-bit w x h bitmap (BITMAPINFOHEADER with the doubled
// height icons use, the pixels, the AND mask).
func iconDIB(w, h int) []byte {
	dib := binary.LittleEndian.AppendUint32(nil, 40)
	dib = binary.LittleEndian.AppendUint32(dib, uint32(w))
	dib = binary.LittleEndian.AppendUint32(dib, uint32(2*h))
	dib = binary.LittleEndian.AppendUint16(dib, 1)
	dib = binary.LittleEndian.AppendUint16(dib, 32)
	dib = append(dib, make([]byte, 24)...)
	dib = append(dib, bytes.Repeat([]byte{0x20, 0x40, 0x80, 0xff}, w*h)...)
	dib = append(dib, make([]byte, (w+31)/32*4*h)...)
	ico := []byte{0, 0, 1, 0, 1, 0, byte(w), byte(h), 0, 0, 1, 0, 32, 0}
	ico = binary.LittleEndian.AppendUint32(ico, uint32(len(dib)))
	ico = binary.LittleEndian.AppendUint32(ico, 22)
	return append(ico, dib...)
}

// TestClassifyTruncatedOrCorruptImage: an image whose header is intact but whose data is
// cut off or damaged is refused with the decoder's reason, never sent to a judge.
func TestClassifyTruncatedOrCorruptImage(t *testing.T) {
	t.Parallel()
	png := realPNG(t, 300, 200)
	jpg := jpegBytes(t)
	gif := gifBytes(t)
	corruptPNG := bytes.Clone(png)
	corruptPNG[len(corruptPNG)/2] ^= 0xff // inside IDAT: its CRC no longer matches
	tests := []struct {
		name, file string
		data       []byte
	}{
		{"png cut in the middle of its pixels", "shot.png", png[:len(png)/2]},
		{"png cut just after its header", "shot.png", png[:60]},
		{"png without its IEND chunk", "shot.png", png[:len(png)-12]},
		{"png with a damaged pixel chunk", "shot.png", corruptPNG},
		{"png sniffed, cut", "blob", png[:len(png)/2]},
		{"jpeg cut in the middle of its scan", "photo.jpg", jpg[:len(jpg)/2]},
		{"jpeg cut after its header", "photo.jpg", jpg[:len(jpg)/5]},
		{"gif cut before its trailer", "anim.gif", gif[:len(gif)-1]},
		{"gif cut inside its frame", "anim.gif", gif[:len(gif)/2]},
		{"webp cut", "hero.webp", webpLossyBytes()[:len(webpLossyBytes())-6]},
		{"ico bitmap cut", "favicon", iconDIB(16, 16)[:22+40+16*16*2]},
		{"ico png cut", "favicon", icoWith(realPNG(t, 16, 16)[:50])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.file, tt.data, "")
			if !strings.HasPrefix(got.Blocked, "unreadable artifact: image ") || got.Class != "" {
				t.Fatalf("Classify(%q) = %+v; want an unreadable image", tt.file, got)
			}
		})
	}
	// Cut after a header that still parses, the data is what fails.
	for _, c := range []struct {
		data []byte
		says string
	}{{png[:len(png)-12], "unexpected EOF"}, {jpg[:len(jpg)-20], "invalid JPEG format: short Huffman data"}, {gif[:len(gif)-1], "gif: truncated"}} {
		if got := Classify("a", c.data, ""); got.Blocked != ReasonImageData+": "+c.says {
			t.Errorf("Classify(cut image) = %q; want %q", got.Blocked, ReasonImageData+": "+c.says)
		}
	}
}

// TestClassifyCompleteImagesDecode: whole images of every accepted format pass.
func TestClassifyCompleteImagesDecode(t *testing.T) {
	t.Parallel()
	for name, data := range map[string][]byte{
		"a.png": realPNG(t, 300, 200), "a.jpg": jpegBytes(t), "a.gif": gifBytes(t),
		"a.webp": webpBytes(), "b.webp": webpLossyBytes(), "favicon": iconDIB(16, 16),
	} {
		if got := Classify(name, data, ""); got.Blocked != "" || got.Class != ClassImage {
			t.Errorf("Classify(%s) = %+v; want an image", name, got)
		}
	}
}

// TestClassifyGIFFramesBounded: every frame fits the screen, but the frames together may
// not pass the pixel limit either; they are counted from their descriptors before
// anything is decoded.
func TestClassifyGIFFramesBounded(t *testing.T) {
	t.Parallel()
	got := Classify("anim.gif", gifFrames(4000, 4000, 3), "") // 3 x 16 MP
	if !strings.Contains(got.Blocked, "3 frames of 48000000 pixels") || !strings.Contains(got.Blocked, "40 megapixel") {
		t.Fatalf("Classify(3 frames of 16 MP) = %+v; want refused for 48 MP in all", got)
	}
	if _, _, err := gifFramePixels(gifFrames(4000, 4000, 3)[:40]); err == nil {
		t.Fatal("a GIF cut inside its frames walked to the end")
	}
}
