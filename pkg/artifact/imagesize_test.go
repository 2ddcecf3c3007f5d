package artifact

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"
)

// pngHeader is a PNG signature and an IHDR chunk (8-bit RGBA, so DecodeConfig needs
// nothing after it) with a valid CRC, followed by a few bytes of body: enough for any
// header reader, nowhere near the pixels it declares.
func pngHeader(w, h uint32) []byte {
	b := []byte("\x89PNG\r\n\x1a\n")
	ihdr := make([]byte, 0, 17)
	ihdr = append(ihdr, "IHDR"...)
	ihdr = binary.BigEndian.AppendUint32(ihdr, w)
	ihdr = binary.BigEndian.AppendUint32(ihdr, h)
	ihdr = append(ihdr, 8, 6, 0, 0, 0) // depth 8, RGBA, deflate, no filter, no interlace
	b = binary.BigEndian.AppendUint32(b, 13)
	b = append(b, ihdr...)
	b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(ihdr))
	return append(b, "\x00\x00\x00\x00IDAT\x35\xaf\x06\x1e"...) // an empty IDAT, bad CRC: never read
}

// gifHeader is a GIF89a header and logical screen descriptor, no color table, then
// the trailer.
func gifHeader(w, h uint16) []byte {
	b := []byte("GIF89a")
	b = binary.LittleEndian.AppendUint16(b, w)
	b = binary.LittleEndian.AppendUint16(b, h)
	return append(b, 0, 0, 0, ';')
}

// jpegHeader is SOI, a baseline SOF0 segment for one 8-bit component and an SOS
// segment with no scan data (DecodeConfig stops at SOS, or at SOF after a JFIF APP0).
func jpegHeader(w, h uint16) []byte {
	b := []byte{0xff, 0xd8, 0xff, 0xc0, 0x00, 0x0b, 8}
	b = binary.BigEndian.AppendUint16(b, h)
	b = binary.BigEndian.AppendUint16(b, w)
	b = append(b, 1, 1, 0x11, 0)
	return append(b, 0xff, 0xda, 0x00, 0x08, 1, 1, 0x00, 0, 0x3f, 0, 0xff, 0xd9)
}

func riffChunk(fourcc string, payload []byte) []byte {
	b := append([]byte(fourcc), binary.LittleEndian.AppendUint32(nil, uint32(len(payload)))...)
	b = append(b, payload...)
	if len(payload)%2 == 1 {
		b = append(b, 0)
	}
	return b
}

func webpFile(chunks ...[]byte) []byte {
	body := []byte("WEBP")
	for _, c := range chunks {
		body = append(body, c...)
	}
	return append(append([]byte("RIFF"), binary.LittleEndian.AppendUint32(nil, uint32(len(body)))...), body...)
}

func le24b(v uint32) []byte { return []byte{byte(v), byte(v >> 8), byte(v >> 16)} }

// vp8x is a VP8X chunk declaring a w x h canvas.
func vp8x(w, h uint32) []byte {
	p := append([]byte{0, 0, 0, 0}, le24b(w-1)...)
	return riffChunk("VP8X", append(p, le24b(h-1)...))
}

// vp8l is a VP8L chunk header (signature, then 14-bit width-1 and height-1).
func vp8l(w, h uint32) []byte {
	bits := (w - 1) | (h-1)<<14
	return riffChunk("VP8L", append([]byte{0x2f}, binary.LittleEndian.AppendUint32(nil, bits)...))
}

// vp8 is a lossy key-frame header: frame tag, start code, 14-bit width and height.
func vp8(w, h uint16) []byte {
	p := []byte{0x10, 0x02, 0x00, 0x9d, 0x01, 0x2a}
	p = binary.LittleEndian.AppendUint16(p, w)
	p = binary.LittleEndian.AppendUint16(p, h)
	return riffChunk("VP8 ", append(p, 0, 0))
}

// anmf is an animation frame of w x h holding the given chunks.
func anmf(w, h uint32, inner ...[]byte) []byte {
	p := append(le24b(0), le24b(0)...)
	p = append(p, le24b(w-1)...)
	p = append(p, le24b(h-1)...)
	p = append(p, le24b(100)...)
	p = append(p, 0)
	for _, c := range inner {
		p = append(p, c...)
	}
	return riffChunk("ANMF", p)
}

// bmpHeader is a BITMAPFILEHEADER and a BITMAPINFOHEADER.
func bmpHeader(w, h int32) []byte {
	b := []byte("BM")
	b = binary.LittleEndian.AppendUint32(b, 54)
	b = append(b, 0, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, 54)
	b = binary.LittleEndian.AppendUint32(b, 40)
	b = binary.LittleEndian.AppendUint32(b, uint32(w))
	b = binary.LittleEndian.AppendUint32(b, uint32(h))
	b = binary.LittleEndian.AppendUint16(b, 1)
	b = binary.LittleEndian.AppendUint16(b, 24)
	return append(b, make([]byte, 24)...)
}

// icoWith is an ICO of one entry (directory size 16x16) holding img.
func icoWith(img []byte) []byte {
	b := []byte{0, 0, 1, 0, 1, 0, 16, 16, 0, 0, 1, 0, 32, 0}
	b = binary.LittleEndian.AppendUint32(b, uint32(len(img)))
	b = binary.LittleEndian.AppendUint32(b, 22)
	return append(b, img...)
}

func realPNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for i := range img.Pix {
		img.Pix[i] = byte(i)
	}
	img.Set(0, 0, color.RGBA{1, 2, 3, 255})
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestClassifyImageDimensions(t *testing.T) {
	t.Parallel()
	const tooMany = "more than the 40 megapixel limit"
	const tooLong = "a side longer than the 20000 pixel limit"
	tests := []struct {
		name, file string
		data       []byte
		// mediaType, when set, is the expected type of an image that passes;
		// otherwise blocked must be a substring of Result.Blocked.
		mediaType, blocked string
	}{
		{"real png", "shot.png", realPNG(t, 300, 200), "image/png", ""},
		{"real jpeg", "photo.jpg", jpegBytes(t), "image/jpeg", ""},
		{"real gif", "anim.gif", gifBytes(t), "image/gif", ""},
		{"real webp, lossless", "hero.webp", webpBytes(), "image/webp", ""},
		{"real webp, lossy", "hero.webp", webpLossyBytes(), "image/webp", ""},
		{"png one row over the pixel limit", "big.png", pngHeader(8000, 5001), "", "unreadable artifact: image is 8000x5001 pixels, " + tooMany},
		{"png one column over the side limit", "wide.png", pngHeader(20001, 10), "", "unreadable artifact: image is 20001x10 pixels, " + tooLong},
		{"png too tall", "tall.png", pngHeader(1, 30000), "", "image is 1x30000 pixels, " + tooLong},
		{"png bomb", "bomb.png", pngHeader(50000, 50000), "", "unreadable artifact: image is 50000x50000 pixels, " + tooMany},
		{"png bomb sniffed without extension", "bomb", pngHeader(50000, 50000), "", tooMany},
		{"png bomb named .jpg", "bomb.jpg", pngHeader(30000, 30000), "", "image is 30000x30000 pixels"},
		{"jpeg bomb", "photo.jpg", jpegHeader(65000, 65000), "", "image is 65000x65000 pixels, " + tooMany},
		{"gif bomb", "anim.gif", gifHeader(65535, 65535), "", "image is 65535x65535 pixels, " + tooMany},
		{"gif bomb under .bin", "blob.bin", gifHeader(65535, 65535), "", tooMany},
		{"webp vp8 largest", "a.webp", webpFile(vp8(16383, 16383)), "", "image is 16383x16383 pixels, " + tooMany},
		{"webp vp8l bomb", "a.webp", webpFile(vp8l(16384, 16384)), "", "image is 16384x16384 pixels, " + tooMany},
		{"webp vp8x huge canvas", "a.webp", webpFile(vp8x(30000, 30000), vp8l(16, 16)), "", "unreadable artifact: image is 30000x30000 pixels, " + tooMany},
		{"webp vp8x max canvas", "a.webp", webpFile(vp8x(1<<24, 1<<24)), "", "image is 16777216x16777216 pixels"},
		{"webp vp8x long canvas", "a.webp", webpFile(vp8x(100000, 1)), "", "image is 100000x1 pixels, " + tooLong},
		{"webp small canvas, huge frame", "a.webp", webpFile(vp8x(16, 16), vp8l(16000, 16000)), "", "image is 16000x16000 pixels"},
		{"webp huge animation frame", "a.webp", webpFile(vp8x(16, 16), anmf(9000, 9000, vp8l(16, 16))), "", "image is 9000x9000 pixels"},
		{"webp huge frame in animation", "a.webp", webpFile(vp8x(16, 16), anmf(16, 16, vp8l(9000, 9000))), "", "image is 9000x9000 pixels"},
		{"bmp bomb", "blob.bin", bmpHeader(100000, -100000), "", "image is 100000x100000 pixels, " + tooMany},
		{"bmp bomb named .png", "x.png", bmpHeader(100000, 100000), "", "image is 100000x100000 pixels"},
		{"ico with png", "favicon", icoWith(realPNG(t, 16, 16)), "image/x-icon", ""},
		{"ico with png bomb", "favicon", icoWith(pngHeader(50000, 50000)), "", "image is 50000x50000 pixels"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.file, tt.data, "")
			if tt.mediaType != "" {
				if got.Blocked != "" || got.Class != ClassImage || got.MediaType != tt.mediaType {
					t.Fatalf("Classify(%q) = %+v; want image %s", tt.file, got, tt.mediaType)
				}
				return
			}
			if !strings.Contains(got.Blocked, tt.blocked) || !strings.HasPrefix(got.Blocked, "unreadable artifact: image is ") {
				t.Fatalf("Classify(%q) = %+v; want blocked with %q", tt.file, got, tt.blocked)
			}
			if got.Class != "" || got.MediaType != "" {
				t.Errorf("blocked result also has class %q / media type %q", got.Class, got.MediaType)
			}
		})
	}
}

// TestClassifyHeaderWithinLimitsIsDecoded: a header declaring a size within the limits
// passes the size check, and the full decode that follows refuses it for the pixels it
// lacks; a judge never gets an image whose header alone is intact.
func TestClassifyHeaderWithinLimitsIsDecoded(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, file string
		data       []byte
	}{
		{"png at exactly the pixel limit", "big.png", pngHeader(8000, 5000)},
		{"png at exactly the side limit", "wide.png", pngHeader(20000, 2000)},
		{"jpeg header", "photo.jpg", jpegHeader(4000, 3000)},
		{"gif header", "anim.gif", gifHeader(640, 480)},
		{"webp vp8", "a.webp", webpFile(vp8(640, 480))},
		{"webp vp8l", "a.webp", webpFile(vp8l(1024, 768))},
		{"webp vp8x", "a.webp", webpFile(vp8x(800, 600), vp8l(800, 600))},
		{"webp animation", "a.webp", webpFile(vp8x(64, 64), anmf(64, 64, vp8l(64, 64)), anmf(32, 32, vp8(32, 32)))},
		{"bmp", "blob.bin", bmpHeader(640, -480)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if reason := checkImageSize(tt.data, http.DetectContentType(tt.data)); reason != "" {
				t.Fatalf("size check of %q: %s; want it within the limits", tt.file, reason)
			}
			got := Classify(tt.file, tt.data, "")
			if !strings.HasPrefix(got.Blocked, ReasonImageData+": ") || got.Class != "" {
				t.Fatalf("Classify(%q) = %+v; want blocked with prefix %q", tt.file, got, ReasonImageData)
			}
		})
	}
}

// TestClassifyUnreadableImageHeader: an image whose header does not parse is refused,
// since its size, and whether anything can decode it, is unknown.
func TestClassifyUnreadableImageHeader(t *testing.T) {
	t.Parallel()
	full := pngHeader(100, 100)
	badCRC := bytes.Clone(full)
	badCRC[29] ^= 0xff
	tests := []struct {
		name, file string
		data       []byte
	}{
		{"png signature only", "a.png", []byte("\x89PNG\r\n\x1a\n")},
		{"png truncated IHDR", "a.png", full[:20]},
		{"png truncated before IHDR CRC", "a.png", full[:29]},
		{"png signature and IHDR tag only", "a.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")},
		{"png truncated, sniffed", "blob", full[:24]},
		{"png bad IHDR CRC", "a.png", badCRC},
		{"png zero width", "a.png", pngHeader(0, 10)},
		{"jpeg SOI only", "a.jpg", []byte{0xff, 0xd8, 0xff}},
		{"jpeg truncated SOF", "a.jpg", jpegHeader(10, 10)[:9]},
		{"gif truncated", "a.gif", []byte("GIF89a\x10\x00")},
		{"webp truncated chunk", "a.webp", webpFile(vp8x(10, 10))[:25]},
		{"webp chunk past the end", "a.webp", append([]byte("RIFF\x20\x00\x00\x00WEBPVP8L\xff\x00\x00\x00"), make([]byte, 8)...)},
		{"webp unknown first chunk", "a.webp", webpFile(riffChunk("VP8Z", make([]byte, 10)))},
		{"webp vp8 too short", "a.webp", webpFile(riffChunk("VP8 ", make([]byte, 6)))},
		{"bmp truncated", "blob.bin", []byte("BM\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x28\x00\x00\x00")},
		{"ico entry past the end", "favicon", icoWith(nil)[:20]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.file, tt.data, "")
			if !strings.HasPrefix(got.Blocked, ReasonImageHeader+": ") {
				t.Fatalf("Classify(%q) = %+v; want blocked with prefix %q", tt.file, got, ReasonImageHeader)
			}
			if got.Class != "" || got.MediaType != "" {
				t.Errorf("blocked result also has class %q / media type %q", got.Class, got.MediaType)
			}
		})
	}
}

// TestClassifyImageBombIsNotDecoded: a 50000x50000 RGBA PNG would take 10 GB to
// decode; Classify reads its header, so it answers at once and allocates next to
// nothing.
func TestClassifyImageBombIsNotDecoded(t *testing.T) {
	bombs := map[string][]byte{
		"bomb.png":  pngHeader(50000, 50000),
		"bomb.gif":  gifHeader(65535, 65535),
		"bomb.jpg":  jpegHeader(65535, 65535),
		"bomb.webp": webpFile(vp8x(1<<24, 1<<24)),
	}
	for name, data := range bombs {
		start := time.Now()
		r := Classify(name, data, "")
		if d := time.Since(start); d > 250*time.Millisecond {
			t.Errorf("%s: Classify took %v", name, d)
		}
		if !strings.Contains(r.Blocked, "megapixel limit") {
			t.Fatalf("%s: Blocked = %q", name, r.Blocked)
		}

		const runs = 20
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		for range runs {
			Classify(name, data, "")
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / runs; per > 1<<20 {
			t.Errorf("%s: Classify allocated %d bytes per call; a header check needs far less than 1 MiB", name, per)
		}
		if allocs := testing.AllocsPerRun(runs, func() { Classify(name, data, "") }); allocs > 100 {
			t.Errorf("%s: %v allocations per call", name, allocs)
		}
	}
}
