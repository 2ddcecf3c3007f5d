// Package ingest is the renderer's static sensor: it decides how a judge can take in an
// artifact (image for a vision model, text, HTML) and refuses what it cannot judge
// fairly: video, unknown binaries, remote non-HTML and, always, diffs. It applies the
// same rules to both sides of a comparison.
package ingest

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"path"
	"strings"
	"unicode/utf8"
)

// Classes a judge ingests.
const (
	ClassImage = "image"
	ClassText  = "text"
	ClassHTML  = "html"
)

// Blocked reasons, stable strings that appear in manifests.
const (
	ReasonDiff        = "diffs are never judged"
	ReasonVideo       = "unsupported artifact: video"
	ReasonBinary      = "unsupported artifact: binary content"
	ReasonRemoteNonHT = "unsupported artifact: remote non-HTML"
	ReasonEmpty       = "unreadable artifact: empty"
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

// Result is a classified artifact, or the reason it is blocked.
type Result struct {
	Class     string
	MediaType string
	// Blocked, when set, is why the artifact cannot be judged.
	Blocked string
}

// Classify decides how an artifact named name (a path or URL) with bytes data can be
// judged. declared is a media type the source claimed, if any.
func Classify(name string, data []byte, declared string) Result {
	ext := strings.ToLower(path.Ext(stripQuery(name)))
	if ext == ".diff" || ext == ".patch" {
		return Result{Blocked: fmt.Sprintf("%s (%s file)", ReasonDiff, ext)}
	}
	if videoExts[ext] || strings.HasPrefix(declared, "video/") {
		return Result{Blocked: fmt.Sprintf("%s (%s)", ReasonVideo, firstNonEmpty(ext, declared))}
	}
	if len(data) == 0 {
		return Result{Blocked: ReasonEmpty}
	}
	sniffed := http.DetectContentType(data)
	if mt, ok := imageTypes[ext]; ok {
		if !strings.HasPrefix(sniffed, "image/") {
			return Result{Blocked: fmt.Sprintf("unreadable artifact: %s named as an image but its bytes are %s", ext, sniffed)}
		}
		return Result{Class: ClassImage, MediaType: mt}
	}
	if strings.HasPrefix(sniffed, "image/") && sniffed != "image/svg+xml" {
		return Result{Class: ClassImage, MediaType: sniffed}
	}
	if strings.HasPrefix(sniffed, "video/") {
		return Result{Blocked: fmt.Sprintf("%s (%s)", ReasonVideo, sniffed)}
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		return Result{Blocked: fmt.Sprintf("%s (%s)", ReasonBinary, sniffed)}
	}
	if LooksLikeDiff(data) {
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
// pair ("--- a" then "+++ b") followed by a hunk header, or a "diff --git" line.
func LooksLikeDiff(data []byte) bool {
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "diff --git ") {
			return true
		}
		if strings.HasPrefix(l, "--- ") && i+2 < len(lines) && strings.HasPrefix(lines[i+1], "+++ ") && strings.HasPrefix(lines[i+2], "@@ ") {
			return true
		}
	}
	return false
}

func stripQuery(name string) string {
	if i := strings.IndexAny(name, "?#"); i >= 0 {
		return name[:i]
	}
	return name
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
