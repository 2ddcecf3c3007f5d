// Package artifact is the renderer's static sensor: it decides how a judge can take in an
// artifact (image for a vision model, text, HTML) and refuses what it cannot judge
// fairly: video, unknown binaries, remote non-HTML and, always, diffs. It applies the
// same rules to both sides of a comparison.
package artifact

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/jpeg"
	"image/png"
	"io"
	"mime"
	"net/http"
	"path"
	"runtime"
	"strings"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/text"
	"golang.org/x/image/bmp"
	"golang.org/x/image/webp"
)

// Classes a judge ingests.
const (
	ClassImage = "image"
	ClassText  = "text"
	ClassHTML  = "html"
)

// The causes an artifact blocks its AC for. Every blocked reason about an artifact starts
// with one of them, then ": " and the detail; manifests show them, and Recurs reads them.
const (
	CauseMissing     = "missing artifact"
	CauseRefused     = "refused artifact"
	CauseUnreadable  = "unreadable artifact"
	CauseUnsupported = "unsupported artifact"
)

// Blocked reasons, stable strings that appear in manifests.
const (
	ReasonDiff        = "diffs are never judged"
	ReasonVideo       = CauseUnsupported + ": video"
	ReasonBinary      = CauseUnsupported + ": binary content"
	ReasonRemoteNonHT = CauseUnsupported + ": remote non-HTML"
	ReasonEmpty       = CauseUnreadable + ": empty"
	// ReasonNotStored and ReasonStoredBad are the blob store's, not the artifact's: the
	// bytes the AC's event names are not in storage, or no longer hash to their name.
	ReasonNotStored = CauseMissing + ": not in blob storage"
	ReasonStoredBad = CauseUnreadable + ": stored bytes do not match their digest"
	// ReasonImageHeader prefixes the reason for an image whose header does not say how
	// big it is (truncated, malformed, or a format with no dimension reader here); the
	// parser's error follows after ": ".
	ReasonImageHeader = CauseUnreadable + ": image header"
	// ReasonImageData prefixes the reason for an image whose header is sound but whose
	// pixels do not decode (cut off, corrupt, or an encoding no decoder here reads);
	// the decoder's error follows after ": ".
	ReasonImageData = CauseUnreadable + ": image data"
)

// Recurs reports whether an AC blocked at render for reason would be blocked the same way
// by a run with the same artifacts (their bytes and paths): every part of reason (parts
// joined by "; ", each perhaps naming its artifact first) names a cause in an artifact
// itself or a diff. A cause in the blob store (ReasonNotStored, ReasonStoredBad: a new
// run stores the bytes again) or any other cause (a renderer that fetches no URLs, a
// missing input) may not recur. internal/rerun lets an earlier batch's blocked results
// stand only for reasons that recur. A URL's fetch failures also read CauseUnreadable,
// but a batch with URL artifacts is never reused.
func Recurs(reason string) bool {
	if reason == "" {
		return false
	}
	for _, part := range strings.Split(reason, "; ") {
		if strings.Contains(part, ReasonNotStored) || strings.Contains(part, ReasonStoredBad) {
			return false
		}
		recurs := strings.Contains(part, ReasonDiff)
		for _, c := range []string{CauseMissing, CauseRefused, CauseUnreadable, CauseUnsupported} {
			recurs = recurs || strings.Contains(part, c)
		}
		if !recurs {
			return false
		}
	}
	return true
}

// Image size limits. An image's header declares its width and height in a few bytes,
// and a decoder allocates for that declared size before it reads a single pixel: a
// 60-byte PNG can ask for 50000x50000 RGBA, 10 GB. So Classify reads only the header
// (image.DecodeConfig for PNG, JPEG and GIF; the RIFF chunk headers for WebP; the
// file and DIB headers for BMP and ICO) and refuses an image whose declared size is
// beyond these limits, before anything (the renderer, a judge's provider, a console
// thumbnail) decodes it in full. 40 megapixels is well above any screenshot or photo a
// judge compares (an 8K frame is 33 megapixels) yet about 160 MB as RGBA; no side may
// exceed 20,000 pixels, which also stops a 1-pixel-high strip of a billion pixels from
// passing as small.
const (
	MaxImagePixels = 40_000_000
	MaxImageSide   = 20_000
)

var imageTypes = map[string]string{
	".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif",
}

var videoExts = map[string]bool{".webm": true, ".mp4": true, ".mov": true, ".avi": true, ".mkv": true}

var textTypes = map[string]string{
	".md": "text/markdown", ".markdown": "text/markdown", ".txt": "text/plain", ".json": "application/json",
	".yaml": "application/yaml", ".yml": "application/yaml", ".go": "text/x-go", ".ts": "text/x-typescript",
	".tsx": "text/x-typescript", ".js": "text/javascript", ".rs": "text/x-rust", ".py": "text/x-python",
	".css": "text/css", ".csv": "text/csv", ".xml": "application/xml", ".svg": "image/svg+xml",
}

// decodeSlots bounds the full image decodes running at once in this process to one per
// CPU (decoding is CPU-bound anyway): each may hold up to MaxImagePixels of pixels, about
// 160 MB, so a renderer handling many images at once does not hold that many times over.
var decodeSlots = make(chan struct{}, runtime.GOMAXPROCS(0))

// Result is a classified artifact, or the reason it is blocked.
type Result struct {
	Class     string
	MediaType string
	// Blocked, when set, is why the artifact cannot be judged.
	Blocked string
}

// Classify decides how an artifact named name (a path or URL) with bytes data can be
// judged. declared is a media type the source claimed, if any. An image is also
// refused when its header declares more than MaxImagePixels or a side longer than
// MaxImageSide, or cannot be parsed (see checkImageSize), and, once its header has
// passed, when it does not decode in full (see decodeImage): a judge never receives an
// image that is cut off or corrupt.
func Classify(name string, data []byte, declared string) Result {
	ext := strings.ToLower(path.Ext(stripQuery(name)))
	if ext == ".diff" || ext == ".patch" {
		return Result{Blocked: fmt.Sprintf("%s (%s file)", ReasonDiff, ext)}
	}
	if videoExts[ext] || strings.HasPrefix(declared, "video/") {
		return Result{Blocked: fmt.Sprintf("%s (%s)", ReasonVideo, cmp.Or(ext, declared))}
	}
	if len(data) == 0 {
		return Result{Blocked: ReasonEmpty}
	}
	sniffed := http.DetectContentType(data)
	if mt, ok := imageTypes[ext]; ok {
		if !strings.HasPrefix(sniffed, "image/") {
			return Result{Blocked: fmt.Sprintf("%s: %s named as an image but its bytes are %s", CauseUnreadable, ext, sniffed)}
		}
		if reason := checkImage(data, sniffed); reason != "" {
			return Result{Blocked: reason}
		}
		return Result{Class: ClassImage, MediaType: mt}
	}
	if strings.HasPrefix(sniffed, "image/") && sniffed != "image/svg+xml" {
		if reason := checkImage(data, sniffed); reason != "" {
			return Result{Blocked: reason}
		}
		return Result{Class: ClassImage, MediaType: sniffed}
	}
	if strings.HasPrefix(sniffed, "video/") {
		return Result{Blocked: fmt.Sprintf("%s (%s)", ReasonVideo, sniffed)}
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return Result{Blocked: fmt.Sprintf("%s (%s)", ReasonBinary, sniffed)}
	}
	if IsDiff(data) {
		return Result{Blocked: ReasonDiff}
	}
	if ext == ".html" || ext == ".htm" || strings.HasPrefix(declared, "text/html") || strings.HasPrefix(sniffed, "text/html") {
		return Result{Class: ClassHTML, MediaType: "text/html"}
	}
	if mt, ok := textTypes[ext]; ok {
		return Result{Class: ClassText, MediaType: mt}
	}
	if mt := mime.TypeByExtension(ext); strings.HasPrefix(mt, "text/") {
		return Result{Class: ClassText, MediaType: strings.SplitN(mt, ";", 2)[0]}
	}
	return Result{Class: ClassText, MediaType: "text/plain"}
}

// LooksLikeDiff reports whether text is a unified diff or a git patch: a file header
// pair ("--- a" then "+++ b") followed by a hunk header, or a "diff --git" line, at the
// start of a line.
func LooksLikeDiff(data []byte) bool {
	return diffAt(strings.Split(string(data), "\n")) >= 0
}

// diffAt returns the index of the first line that starts a diff (see LooksLikeDiff), or -1.
func diffAt(lines []string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, "diff --git ") {
			return i
		}
		if strings.HasPrefix(l, "--- ") && i+2 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ") && strings.HasPrefix(lines[i+2], "@@ ") {
			return i
		}
	}
	return -1
}

// IsDiff reports whether a text file is a diff, which is refused, rather than a document
// that shows one. A file is a diff when a diff starts outside every Markdown fenced code
// block (CommonMark fences, ``` or ~~~, found with goldmark), or when the file holds
// nothing but fenced code blocks and one of them is a diff. So a guide whose fenced
// example is a patch is a document and is judged, while a unified diff or a git patch
// (prose before it included, as `git show` and `git format-patch` write it) is refused.
// A diff the writer took out of a fence to hide it is still refused, and one wrapped in
// a fence with nothing around it is refused too.
func IsDiff(data []byte) bool {
	if !LooksLikeDiff(data) {
		return false
	}
	doc := goldmark.New().Parser().Parse(text.NewReader(data))
	// fenced holds the byte ranges of the fenced blocks' content lines.
	var fenced []text.Segment
	onlyFences := doc.ChildCount() > 0
	for c := doc.FirstChild(); c != nil; c = c.NextSibling() {
		if c.Kind() != ast.KindFencedCodeBlock {
			onlyFences = false
		}
	}
	_ = ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if fb, ok := n.(*ast.FencedCodeBlock); ok && entering {
			for i := 0; i < fb.Lines().Len(); i++ {
				fenced = append(fenced, fb.Lines().At(i))
			}
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	if onlyFences {
		return true
	}
	inFence := func(start, stop int) bool {
		for _, seg := range fenced {
			if seg.Start < stop && start < seg.Stop {
				return true
			}
		}
		return false
	}
	// Keep the lines outside fences (blanked inside them, so a header's next lines stay
	// next) and look for a diff there.
	lines := strings.Split(string(data), "\n")
	off := 0
	for i, l := range lines {
		if inFence(off, off+len(l)+1) {
			lines[i] = ""
		}
		off += len(l) + 1
	}
	return diffAt(lines) >= 0
}

// checkImage returns why an image cannot be judged, or "": first its declared size,
// from the header alone, so a decompression bomb is refused before anything is
// allocated for it, then a full decode of every pixel.
func checkImage(data []byte, sniffed string) string {
	if reason := checkImageSize(data, sniffed); reason != "" {
		return reason
	}
	if err := decodeImage(data, sniffed); err != nil {
		return fmt.Sprintf("%s: %v", ReasonImageData, err)
	}
	return ""
}

// decodeImage decodes an image whose header checkImageSize has passed, every frame and
// every pixel, and reports why it cannot be. The decoders read to the end of the image
// data (PNG to its IEND chunk, JPEG to the end of its scans, GIF to its trailer), so a
// file cut off anywhere is an error, as is any corruption they detect.
func decodeImage(data []byte, sniffed string) error {
	decodeSlots <- struct{}{}
	defer func() { <-decodeSlots }()
	var err error
	switch sniffed {
	case "image/png":
		_, err = png.Decode(bytes.NewReader(data))
	case "image/jpeg":
		_, err = jpeg.Decode(bytes.NewReader(data))
	case "image/gif":
		err = decodeGIF(data)
	case "image/webp":
		_, err = webp.Decode(bytes.NewReader(data))
	case "image/bmp":
		_, err = bmp.Decode(bytes.NewReader(data))
	case "image/x-icon":
		err = decodeICO(data)
	default:
		err = fmt.Errorf("no decoder for %s", sniffed)
	}
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // a decoder that met the end early: the file is cut off
	}
	return err
}

// decodeGIF decodes every frame of a GIF. The header's screen size bounds each frame but
// not how many there are, so the frames' sizes are first added up from their
// descriptors (gifFramePixels) and an animation whose frames total more than
// MaxImagePixels is refused before any is decoded.
func decodeGIF(data []byte) error {
	px, frames, err := gifFramePixels(data)
	if err != nil {
		return err
	}
	if px > MaxImagePixels {
		return fmt.Errorf("gif: %d frames of %d pixels in all, more than the %s limit", frames, px, pixelLimit())
	}
	_, err = gif.DecodeAll(bytes.NewReader(data))
	return err
}

var errGIFTruncated = errors.New("gif: truncated")

// gifFramePixels walks a GIF's blocks (extensions and image descriptors, skipping their
// data sub-blocks) to the trailer and returns the pixels of all frames and their number.
func gifFramePixels(b []byte) (px int64, frames int, err error) {
	skipTable := func(i int, flags byte) int {
		if flags&0x80 != 0 {
			i += 3 << (flags&0x07 + 1)
		}
		return i
	}
	skipSubBlocks := func(i int) (int, error) {
		for {
			if i >= len(b) {
				return 0, errGIFTruncated
			}
			n := int(b[i])
			i++
			if n == 0 {
				return i, nil
			}
			i += n
		}
	}
	if len(b) < 13 {
		return 0, 0, errGIFTruncated
	}
	i := skipTable(13, b[10])
	for {
		if i >= len(b) {
			return 0, 0, errGIFTruncated
		}
		switch b[i] {
		case 0x21: // extension: label, then sub-blocks
			if i, err = skipSubBlocks(i + 2); err != nil {
				return 0, 0, err
			}
		case 0x2c: // image descriptor: position, size, flags, table, LZW code size, data
			if i+10 > len(b) {
				return 0, 0, errGIFTruncated
			}
			w, h := binary.LittleEndian.Uint16(b[i+5:]), binary.LittleEndian.Uint16(b[i+7:])
			px += int64(w) * int64(h)
			frames++
			if i, err = skipSubBlocks(skipTable(i+10, b[i+9]) + 1); err != nil {
				return 0, 0, err
			}
		case 0x3b: // trailer
			return px, frames, nil
		default:
			return 0, 0, fmt.Errorf("gif: unknown block 0x%02x at byte %d", b[i], i)
		}
	}
}

// decodeICO decodes every image of an ICO or CUR file (icoDimensions has checked the
// directory and each image's size): a PNG as such, a DIB as the bitmap it is.
func decodeICO(data []byte) error {
	count := int(binary.LittleEndian.Uint16(data[4:6]))
	for i := range count {
		e := data[6+16*i : 6+16*(i+1)]
		size, off := binary.LittleEndian.Uint32(e[8:12]), binary.LittleEndian.Uint32(e[12:16])
		img := data[off : off+size]
		var err error
		if bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
			_, err = png.Decode(bytes.NewReader(img))
		} else {
			err = decodeIconDIB(img)
		}
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return fmt.Errorf("ico: image %d: %w", i, err)
		}
	}
	return nil
}

// decodeIconDIB decodes an icon's bitmap: its DIB header and pixels behind a BMP file
// header made for them, with the height halved (an icon's DIB counts the rows of the
// AND mask that follows its pixels).
func decodeIconDIB(dib []byte) error {
	if len(dib) < 40 {
		return errors.New("bmp: truncated")
	}
	hsize := binary.LittleEndian.Uint32(dib[0:4])
	if hsize < 40 || uint64(hsize) > uint64(len(dib)) {
		return fmt.Errorf("bmp: icon bitmap header of %d bytes not supported", hsize)
	}
	off := 14 + hsize
	if bpp := binary.LittleEndian.Uint16(dib[14:16]); bpp <= 8 {
		colors := binary.LittleEndian.Uint32(dib[32:36])
		if colors == 0 || colors > 1<<bpp {
			colors = 1 << bpp
		}
		off += colors * 4
	}
	file := make([]byte, 14+len(dib))
	copy(file, "BM")
	binary.LittleEndian.PutUint32(file[2:6], uint32(len(file)))
	binary.LittleEndian.PutUint32(file[10:14], off)
	copy(file[14:], dib)
	h := int32(binary.LittleEndian.Uint32(dib[8:12]))
	binary.LittleEndian.PutUint32(file[14+8:14+12], uint32(h/2))
	_, err := bmp.Decode(bytes.NewReader(file))
	return err
}

// checkImageSize returns why an image of the sniffed media type cannot be judged
// because of its declared size, or "" when it is within MaxImagePixels and
// MaxImageSide. It reads headers only and never decodes pixels: the format is taken
// from the bytes (as sniffed), not from the name, since a decoder dispatches on the
// bytes too. A header that cannot be parsed is refused as well: it is not an image
// anything downstream can read, and its size is unknown.
func checkImageSize(data []byte, sniffed string) string {
	w, h, err := imageDimensions(data, sniffed)
	if err != nil {
		return fmt.Sprintf("%s: %v", ReasonImageHeader, err)
	}
	// int64: on a 32-bit platform w*h of two 65535s would overflow int.
	if px := int64(w) * int64(h); px > MaxImagePixels {
		return fmt.Sprintf("%s: image is %dx%d pixels, more than the %s limit", CauseUnreadable, w, h, pixelLimit())
	}
	if w > MaxImageSide || h > MaxImageSide {
		return fmt.Sprintf("%s: image is %dx%d pixels, a side longer than the %d pixel limit", CauseUnreadable, w, h, MaxImageSide)
	}
	return ""
}

// pixelLimit words MaxImagePixels for a reason: "40 megapixel".
func pixelLimit() string {
	if MaxImagePixels%1_000_000 == 0 {
		return fmt.Sprintf("%d megapixel", MaxImagePixels/1_000_000)
	}
	return fmt.Sprintf("%d pixel", MaxImagePixels)
}

// imageDimensions reads the declared width and height of an image from its header.
// For formats that can hold several images (WebP frames, ICO entries) it returns the
// largest declared by any of them, by pixel count, so a small canvas cannot smuggle in
// a huge frame.
func imageDimensions(data []byte, sniffed string) (w, h int, err error) {
	var cfg image.Config
	switch sniffed {
	case "image/png":
		cfg, err = png.DecodeConfig(bytes.NewReader(data))
	case "image/jpeg":
		cfg, err = jpeg.DecodeConfig(bytes.NewReader(data))
	case "image/gif":
		cfg, err = gif.DecodeConfig(bytes.NewReader(data))
	case "image/webp":
		return webpDimensions(data)
	case "image/bmp":
		return bmpDimensions(data)
	case "image/x-icon":
		return icoDimensions(data)
	default:
		return 0, 0, fmt.Errorf("no dimension reader for %s", sniffed)
	}
	if err != nil {
		return 0, 0, err
	}
	return cfg.Width, cfg.Height, nil
}

var errWebPTruncated = errors.New("webp: truncated")

// webpDimensions walks a WebP file's RIFF chunks (headers only, never the bitstream)
// and returns the largest size any of them declares: the VP8X canvas, each VP8
// (lossy) and VP8L (lossless) frame, and each ANMF animation frame and the frame
// inside it. Only the dimension fields are read; signatures and start codes inside a
// bitstream are left to the decoder, which refuses a frame without them before it
// allocates anything.
func webpDimensions(data []byte) (w, h int, err error) {
	if len(data) < 12 || string(data[0:4]) != "RIFF" || string(data[8:12]) != "WEBP" {
		return 0, 0, errors.New("webp: not a RIFF WEBP container")
	}
	body := data[12:]
	if riff := binary.LittleEndian.Uint32(data[4:8]); riff >= 4 && uint64(riff)-4 < uint64(len(body)) {
		body = body[:riff-4] // ignore bytes after the RIFF chunk, as decoders do
	}
	w, h, n, err := webpChunks(body, true)
	if err != nil {
		return 0, 0, err
	}
	if n == 0 {
		return 0, 0, errors.New("webp: no VP8, VP8L or VP8X chunk")
	}
	return w, h, nil
}

// webpChunks walks a sequence of RIFF chunks. first requires the first chunk to be an
// image chunk (VP8, VP8L or VP8X), as the WebP container specifies. n counts the
// chunks that declared a size.
func webpChunks(b []byte, first bool) (w, h, n int, err error) {
	keep := func(cw, ch int) {
		if int64(cw)*int64(ch) > int64(w)*int64(h) || n == 0 {
			w, h = cw, ch
		}
		n++
	}
	for len(b) > 0 {
		if len(b) < 8 {
			return 0, 0, 0, errWebPTruncated
		}
		fourcc, size := string(b[0:4]), binary.LittleEndian.Uint32(b[4:8])
		if uint64(size) > uint64(len(b)-8) {
			return 0, 0, 0, fmt.Errorf("webp: %q chunk of %d bytes runs past the end of the file", fourcc, size)
		}
		p := b[8 : 8+size]
		switch fourcc {
		case "VP8 ":
			// Frame tag (3 bytes), start code (3 bytes), then 14-bit width and height,
			// each with 2 scaling bits on top.
			if len(p) < 10 {
				return 0, 0, 0, errWebPTruncated
			}
			keep(int(binary.LittleEndian.Uint16(p[6:8])&0x3fff), int(binary.LittleEndian.Uint16(p[8:10])&0x3fff))
		case "VP8L":
			// Signature byte, then width-1 and height-1 in 14 bits each.
			if len(p) < 5 {
				return 0, 0, 0, errWebPTruncated
			}
			bits := binary.LittleEndian.Uint32(p[1:5])
			keep(int(bits&0x3fff)+1, int(bits>>14&0x3fff)+1)
		case "VP8X":
			// Flags (4 bytes), then canvas width-1 and height-1 in 24 bits each.
			if len(p) < 10 {
				return 0, 0, 0, errWebPTruncated
			}
			keep(int(le24(p[4:7]))+1, int(le24(p[7:10]))+1)
		case "ANMF":
			// Frame x, y (24 bits each), width-1, height-1 (24 bits each), duration
			// (24 bits), flags (1 byte), then the frame's own chunks.
			if len(p) < 16 {
				return 0, 0, 0, errWebPTruncated
			}
			keep(int(le24(p[6:9]))+1, int(le24(p[9:12]))+1)
			fw, fh, fn, err := webpChunks(p[16:], false)
			if err != nil {
				return 0, 0, 0, err
			}
			if fn > 0 {
				keep(fw, fh)
			}
		default:
			if first {
				return 0, 0, 0, fmt.Errorf("webp: first chunk is %q, not VP8, VP8L or VP8X", fourcc)
			}
		}
		first = false
		// Chunks are padded to an even size; a missing final pad byte is tolerated.
		next := 8 + uint64(size) + uint64(size&1)
		if next > uint64(len(b)) {
			next = uint64(len(b))
		}
		b = b[next:]
	}
	return w, h, n, nil
}

func le24(b []byte) uint32 { return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 }

// bmpDimensions reads a BMP's DIB header. Height is negative for a top-down bitmap.
func bmpDimensions(data []byte) (w, h int, err error) {
	if len(data) < 14 {
		return 0, 0, errors.New("bmp: truncated")
	}
	return dibDimensions(data[14:])
}

// dibDimensions reads width and height from a DIB header: the 12-byte OS/2
// BITMAPCOREHEADER (16-bit sizes) or a BITMAPINFOHEADER and its successors (32-bit,
// signed).
func dibDimensions(d []byte) (w, h int, err error) {
	if len(d) < 4 {
		return 0, 0, errors.New("bmp: truncated")
	}
	size := binary.LittleEndian.Uint32(d[0:4])
	switch {
	case size == 12 && len(d) >= 12:
		return int(binary.LittleEndian.Uint16(d[4:6])), int(binary.LittleEndian.Uint16(d[6:8])), nil
	case size >= 40 && len(d) >= 12:
		w := int64(int32(binary.LittleEndian.Uint32(d[4:8])))
		h := int64(int32(binary.LittleEndian.Uint32(d[8:12])))
		if w < 0 {
			return 0, 0, errors.New("bmp: negative width")
		}
		if h < 0 {
			h = -h
		}
		return clampInt(w), clampInt(h), nil
	case size == 12 || size >= 40:
		return 0, 0, errors.New("bmp: truncated")
	}
	return 0, 0, fmt.Errorf("bmp: unknown header size %d", size)
}

// clampInt converts a non-negative int64 to int, saturating on 32-bit platforms (the
// size check refuses the result either way).
func clampInt(v int64) int {
	if int64(int(v)) != v {
		return int(^uint(0) >> 1)
	}
	return int(v)
}

// icoDimensions reads an ICO or CUR directory and the header of each image in it. The
// directory's own sizes are one byte each (0 meaning 256), but an entry's image is a
// PNG or a DIB with its own, possibly far larger, header, which is what a decoder
// allocates for; both are checked and the largest returned.
func icoDimensions(data []byte) (w, h int, err error) {
	if len(data) < 6 {
		return 0, 0, errors.New("ico: truncated")
	}
	count := int(binary.LittleEndian.Uint16(data[4:6]))
	if count == 0 {
		return 0, 0, errors.New("ico: no images")
	}
	if len(data) < 6+16*count {
		return 0, 0, errors.New("ico: truncated directory")
	}
	keep := func(cw, ch int) {
		if int64(cw)*int64(ch) > int64(w)*int64(h) || w == 0 {
			w, h = cw, ch
		}
	}
	for i := range count {
		e := data[6+16*i : 6+16*(i+1)]
		dw, dh := int(e[0]), int(e[1])
		if dw == 0 {
			dw = 256
		}
		if dh == 0 {
			dh = 256
		}
		keep(dw, dh)
		size, off := binary.LittleEndian.Uint32(e[8:12]), binary.LittleEndian.Uint32(e[12:16])
		if uint64(off)+uint64(size) > uint64(len(data)) {
			return 0, 0, fmt.Errorf("ico: image %d runs past the end of the file", i)
		}
		img := data[off : off+size]
		var iw, ih int
		if bytes.HasPrefix(img, []byte("\x89PNG\r\n\x1a\n")) {
			cfg, err := png.DecodeConfig(bytes.NewReader(img))
			if err != nil {
				return 0, 0, fmt.Errorf("ico: image %d: %w", i, err)
			}
			iw, ih = cfg.Width, cfg.Height
		} else {
			if iw, ih, err = dibDimensions(img); err != nil {
				return 0, 0, fmt.Errorf("ico: image %d: %w", i, err)
			}
			ih /= 2 // a DIB in an icon counts the AND mask's rows in its height
		}
		keep(iw, ih)
	}
	return w, h, nil
}

func stripQuery(name string) string {
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		return name[:i]
	}
	return name
}
