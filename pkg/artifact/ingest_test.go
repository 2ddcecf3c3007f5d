package artifact

import (
	"bytes"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"strings"
	"testing"
)

func testImage() image.Image {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := 0; x < 4; x++ {
		for y := 0; y < 4; y++ {
			img.Set(x, y, color.RGBA{R: uint8(60 * x), G: uint8(60 * y), B: 128, A: 255})
		}
	}
	return img
}

func pngBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := png.Encode(&b, testImage()); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, testImage(), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gifBytes(t *testing.T) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := gif.Encode(&b, testImage(), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webpBytes is a complete 1x1 lossless WebP (a widely used feature-detection image).
func webpBytes() []byte {
	return []byte("RIFF\x1a\x00\x00\x00WEBPVP8L\x0d\x00\x00\x00\x2f\x00\x00\x00\x10\x07\x10\x11\x11\x88\x88\xfe\x07\x00")
}

// webpLossyBytes is a complete 1x1 lossy WebP.
func webpLossyBytes() []byte {
	return []byte("RIFF\x22\x00\x00\x00WEBPVP8 \x16\x00\x00\x00\x30\x01\x00\x9d\x01\x2a\x01\x00\x01\x00\x0e\xc0\xfe\x25\xa4\x00\x03\x70\x00\x00\x00\x00")
}

const unifiedDiff = "--- a/notes.md\n+++ b/notes.md\n@@ -1,2 +1,2 @@\n-old line\n+new line\n context\n"

const gitDiff = "Some release notes.\n\ndiff --git a/x.go b/x.go\nindex 123..456 100644\n"

// notADiff has "--- " and "+++ " lines (a markdown rule, a note) but no hunk header.
const notADiff = "# Title\n\n--- separator text\n+++ not a file header\nplain paragraph\n--- \nend\n"

func TestClassify(t *testing.T) {
	t.Parallel()
	type want struct {
		class, mediaType string
		// blocked, when set, must be a substring of Result.Blocked; blockedPrefix must
		// be its prefix.
		blocked, blockedPrefix string
	}
	tests := []struct {
		name     string
		file     string
		data     []byte
		declared string
		want     want
	}{
		// Images, by extension with real bytes.
		{"png", "badge.png", pngBytes(t), "", want{class: ClassImage, mediaType: "image/png"}},
		{"png upper-case ext", "BADGE.PNG", pngBytes(t), "", want{class: ClassImage, mediaType: "image/png"}},
		{"jpg", "photo.jpg", jpegBytes(t), "", want{class: ClassImage, mediaType: "image/jpeg"}},
		{"jpeg", "photo.jpeg", jpegBytes(t), "", want{class: ClassImage, mediaType: "image/jpeg"}},
		{"gif", "anim.gif", gifBytes(t), "", want{class: ClassImage, mediaType: "image/gif"}},
		{"webp", "hero.webp", webpBytes(), "", want{class: ClassImage, mediaType: "image/webp"}},
		{"png in URL with query", "https://cdn.example/badge.png?v=3#x", pngBytes(t), "", want{class: ClassImage, mediaType: "image/png"}},
		{"png bytes without extension are sniffed", "badge", pngBytes(t), "", want{class: ClassImage, mediaType: "image/png"}},
		{"gif bytes under .bin are sniffed", "blob.bin", gifBytes(t), "", want{class: ClassImage, mediaType: "image/gif"}},

		// An image name whose bytes are not an image.
		{"png named text", "badge.png", []byte("this is not a picture\n"), "", want{blocked: "named as an image", blockedPrefix: "unreadable artifact"}},
		{"jpg named html", "photo.jpg", []byte("<html><body>hi</body></html>"), "", want{blockedPrefix: "unreadable artifact: .jpg"}},

		// Video, by extension (whatever the bytes) and by declared or sniffed type.
		{"webm", "demo.webm", []byte("x"), "", want{blockedPrefix: ReasonVideo, blocked: ".webm"}},
		{"mp4", "demo.mp4", []byte("x"), "", want{blockedPrefix: ReasonVideo, blocked: ".mp4"}},
		{"mov", "demo.mov", []byte("x"), "", want{blockedPrefix: ReasonVideo, blocked: ".mov"}},
		{"avi", "demo.avi", []byte("x"), "", want{blockedPrefix: ReasonVideo, blocked: ".avi"}},
		{"mkv", "demo.mkv", []byte("x"), "", want{blockedPrefix: ReasonVideo, blocked: ".mkv"}},
		{"MP4 upper-case", "DEMO.MP4", []byte("x"), "", want{blockedPrefix: ReasonVideo}},
		{"empty mp4 is still video", "demo.mp4", nil, "", want{blockedPrefix: ReasonVideo}},
		{"declared video/mp4", "clip", []byte("hello"), "video/mp4", want{blockedPrefix: ReasonVideo, blocked: "video/mp4"}},
		{"declared video/webm under .md", "clip.md", []byte("# hi"), "video/webm", want{blockedPrefix: ReasonVideo, blocked: "video"}},
		{"sniffed webm bytes", "clip.bin", []byte("\x1a\x45\xdf\xa3\x01\x00\x00\x00\x00\x00\x00\x1f\x42\x86\x81\x01"), "", want{blockedPrefix: ReasonVideo, blocked: "video/webm"}},

		// Diffs, by name and by content, whatever the name.
		{".diff file", "change.diff", []byte("anything"), "", want{blockedPrefix: ReasonDiff, blocked: ".diff"}},
		{".patch file", "change.patch", []byte("anything"), "", want{blockedPrefix: ReasonDiff, blocked: ".patch"}},
		{".PATCH upper-case", "CHANGE.PATCH", []byte("anything"), "", want{blockedPrefix: ReasonDiff}},
		{".diff URL with query", "https://git.example/pr/1.diff?full=1", []byte("x"), "", want{blockedPrefix: ReasonDiff}},
		{"empty .diff", "change.diff", nil, "", want{blockedPrefix: ReasonDiff}},
		{"unified diff under .md", "notes.md", []byte(unifiedDiff), "", want{blocked: ReasonDiff, blockedPrefix: ReasonDiff}},
		{"git diff under .md", "notes.md", []byte(gitDiff), "", want{blocked: ReasonDiff, blockedPrefix: ReasonDiff}},
		{"unified diff under .html", "page.html", []byte(unifiedDiff), "", want{blockedPrefix: ReasonDiff}},
		{"unified diff declared text/html", "page", []byte(unifiedDiff), "text/html", want{blockedPrefix: ReasonDiff}},
		{"unified diff under .txt", "notes.txt", []byte("intro\n" + unifiedDiff), "", want{blockedPrefix: ReasonDiff}},
		{"non-diff with --- lines", "notes.md", []byte(notADiff), "", want{class: ClassText, mediaType: "text/markdown"}},

		// Binary and empty content.
		{"NUL byte in .txt", "notes.txt", []byte("hello\x00world"), "", want{blockedPrefix: ReasonBinary}},
		{"NUL byte in .md", "notes.md", []byte("# t\n\x00\x01\x02"), "", want{blockedPrefix: ReasonBinary}},
		{"invalid UTF-8", "notes.txt", []byte{'o', 'k', 0xc3, 0x28, 0xa0, 0xa1}, "", want{blockedPrefix: ReasonBinary}},
		{"unknown binary", "data.bin", []byte{0x00, 0x01, 0x02, 0x03, 0xff, 0xfe}, "", want{blockedPrefix: ReasonBinary}},
		{"empty .md", "notes.md", nil, "", want{blocked: ReasonEmpty, blockedPrefix: ReasonEmpty}},
		{"empty .png", "badge.png", []byte{}, "", want{blockedPrefix: ReasonEmpty}},
		{"empty no name", "", nil, "", want{blockedPrefix: ReasonEmpty}},

		// HTML, by extension, by declared type and by sniffing.
		{"html by ext", "page.html", []byte("just words"), "", want{class: ClassHTML, mediaType: "text/html"}},
		{"htm by ext", "page.htm", []byte("just words"), "", want{class: ClassHTML, mediaType: "text/html"}},
		{"html by declared type", "page", []byte("just words"), "text/html; charset=utf-8", want{class: ClassHTML, mediaType: "text/html"}},
		{"html by sniffing", "page", []byte("<!DOCTYPE html><html><body><p>hi</p></body></html>"), "", want{class: ClassHTML, mediaType: "text/html"}},
		{"html by sniffing under .txt", "page.txt", []byte("<html><body>hi</body></html>"), "", want{class: ClassHTML, mediaType: "text/html"}},

		// Text media types.
		{"markdown", "notes.md", []byte("# Notes\n\nSome text.\n"), "", want{class: ClassText, mediaType: "text/markdown"}},
		{"markdown long ext", "notes.markdown", []byte("# Notes\n"), "", want{class: ClassText, mediaType: "text/markdown"}},
		{"go", "main.go", []byte("package main\n\nfunc main() {}\n"), "", want{class: ClassText, mediaType: "text/x-go"}},
		{"plain .txt", "error.txt", []byte("field name is required\n"), "", want{class: ClassText, mediaType: "text/plain"}},
		{"no extension is plain text", "README", []byte("read me\n"), "", want{class: ClassText, mediaType: "text/plain"}},
		{"json", "data.json", []byte(`{"a":1}`), "", want{class: ClassText, mediaType: "application/json"}},
		{"unicode text", "notes.txt", []byte("héllo wörld ✓\n"), "", want{class: ClassText, mediaType: "text/plain"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.file, tt.data, tt.declared)
			if tt.want.blocked == "" && tt.want.blockedPrefix == "" {
				if got.Blocked != "" {
					t.Fatalf("Classify(%q) blocked: %q; want class %s", tt.file, got.Blocked, tt.want.class)
				}
				if got.Class != tt.want.class || got.MediaType != tt.want.mediaType {
					t.Fatalf("Classify(%q) = %s %s; want %s %s", tt.file, got.Class, got.MediaType, tt.want.class, tt.want.mediaType)
				}
				return
			}
			if got.Blocked == "" {
				t.Fatalf("Classify(%q) = %+v; want blocked", tt.file, got)
			}
			if got.Class != "" || got.MediaType != "" {
				t.Errorf("blocked result also has class %q / media type %q", got.Class, got.MediaType)
			}
			if tt.want.blocked != "" && !strings.Contains(got.Blocked, tt.want.blocked) {
				t.Errorf("Blocked = %q; want it to contain %q", got.Blocked, tt.want.blocked)
			}
			if tt.want.blockedPrefix != "" && !strings.HasPrefix(got.Blocked, tt.want.blockedPrefix) {
				t.Errorf("Blocked = %q; want prefix %q", got.Blocked, tt.want.blockedPrefix)
			}
		})
	}
}

// TestClassifyVideoReasonNamesVideo pins that every video block says "video", which is
// what manifests and users search for.
func TestClassifyVideoReasonNamesVideo(t *testing.T) {
	t.Parallel()
	for _, ext := range []string{".webm", ".mp4", ".mov", ".avi", ".mkv"} {
		r := Classify("clip"+ext, []byte("bytes"), "")
		if !strings.Contains(r.Blocked, "video") {
			t.Errorf("%s: Blocked = %q; want it to name video", ext, r.Blocked)
		}
	}
	for _, mt := range []string{"video/mp4", "video/webm", "video/quicktime"} {
		r := Classify("clip", []byte("bytes"), mt)
		if !strings.Contains(r.Blocked, "video") {
			t.Errorf("declared %s: Blocked = %q; want it to name video", mt, r.Blocked)
		}
	}
}

func TestLooksLikeDiff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		want bool
	}{
		{"unified", unifiedDiff, true},
		{"unified after prose", "Intro paragraph\n\n" + unifiedDiff, true},
		{"git header only", "diff --git a/a b/a\n", true},
		{"git header mid-document", gitDiff, true},
		{"header pair without hunk", "--- a/x\n+++ b/x\nno hunk\n", false},
		{"hunk without header pair", "@@ -1 +1 @@\n-a\n+b\n", false},
		{"markdown rules", notADiff, false},
		{"--- at end of text", "text\n--- ", false},
		{"--- then +++ at end", "--- a\n+++ b", false},
		{"indented header is not a diff", "  --- a/x\n  +++ b/x\n  @@ -1 +1 @@\n", false},
		{"'diff --git' inside a line", "run `diff --git a b` to compare\n", false},
		{"empty", "", false},
		{"plain prose", "hello\nworld\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := LooksLikeDiff([]byte(tt.in)); got != tt.want {
				t.Errorf("LooksLikeDiff(%q) = %v; want %v", tt.in, got, tt.want)
			}
		})
	}
}

// TestOnlyDiffFilesAreRefusedAsDiffs pins the rule of issue 14 on seed 000's dispatch
// ("local text / .html / .md ... → Read"; tribunal's own never-a-diff rule on top):
// only files that are diffs are refused as diffs. A Markdown guide containing a fenced
// patch is a document and is judged; a unified diff, a git patch (with its prose) or a
// .diff/.patch file stays blocked, and so does a diff taken out of, or wrapped alone in,
// a fence.
func TestOnlyDiffFilesAreRefusedAsDiffs(t *testing.T) {
	t.Parallel()
	guide := "# Upgrading to v2\n\nChange the import and the call site:\n\n```diff\n" +
		"diff --git a/main.go b/main.go\nindex 1..2 100644\n" + unifiedDiff + "```\n\nThen run the tests.\n"
	tilde := "Steps:\n\n~~~~\n" + unifiedDiff + "~~~~\n\nDone.\n"
	inList := "1. Apply this:\n\n   ```patch\n   diff --git a/x b/x\n   ```\n2. Rebuild.\n"
	tests := []struct {
		name, file, data string
		blocked          bool
	}{
		{"md guide with a fenced git patch", "UPGRADE.md", guide, false},
		{"md guide with a tilde-fenced unified diff", "notes.md", tilde, false},
		{"fenced patch in a list item", "notes.md", inList, false},
		{"txt guide with a fenced patch", "notes.txt", guide, false},
		{"unified diff", "notes.md", unifiedDiff, true},
		{"git patch with prose before it", "change.txt", gitDiff, true},
		{"format-patch mail", "0001-fix.txt", "From 1234 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] fix\n\n---\n x | 2 +-\n\ndiff --git a/x b/x\n", true},
		{"guide that also carries an unfenced diff", "UPGRADE.md", guide + "\n" + unifiedDiff, true},
		{"a diff closing the fence early", "notes.md", "Intro\n\n```\nok\n```\n" + unifiedDiff, true},
		{"nothing but a fenced diff", "change.md", "```diff\n" + unifiedDiff + "```\n", true},
		{".patch file with a guide inside", "guide.patch", guide, true},
		{".diff file", "x.diff", "anything", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := Classify(tt.file, []byte(tt.data), "")
			if got := strings.HasPrefix(r.Blocked, ReasonDiff); got != tt.blocked {
				t.Fatalf("Classify(%s) = %+v; refused as a diff: %v, want %v", tt.file, r, got, tt.blocked)
			}
			if !tt.blocked && r.Class != ClassText {
				t.Fatalf("a document must be judged as text: %+v", r)
			}
		})
	}
}

// Recurs tells causes in the artifacts (which the same bytes and paths meet again) from
// causes elsewhere, for every reason this package and the client write.
func TestRecurs(t *testing.T) {
	t.Parallel()
	for reason, want := range map[string]bool{
		ReasonVideo:                     true,
		ReasonEmpty:                     true,
		ReasonDiff + " (.patch file)":   true,
		ReasonImageData + ": truncated": true,
		CauseRefused + ": ../x is outside the batch folder":                                  true,
		`ours artifact "a.md": ` + CauseMissing + ": a.md":                                   true,
		`ours artifact "a.md": ` + ReasonEmpty + `; reference artifact "r": ` + ReasonBinary: true,
		ReasonNotStored: false,
		ReasonStoredBad: false,
		`ours artifact "a.md": ` + ReasonEmpty + `; reference artifact "r": ` + ReasonNotStored: false,
		"remote artifact: this renderer fetches no URLs":                                        false,
		"missing input": false,
		"":              false,
	} {
		if got := Recurs(reason); got != want {
			t.Errorf("Recurs(%q) = %v, want %v", reason, got, want)
		}
	}
}
