package batch

import (
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

var idRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`)

func validID(id string) error {
	if !idRe.MatchString(id) {
		return fmt.Errorf("id %q: want 1-128 of [A-Za-z0-9_-]", id)
	}
	return nil
}

// IsURL reports whether an artifact is remote.
func IsURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// LocalPath resolves an artifact path against the batch folder. Paths that leave the
// folder are refused unless allowOutside, so a batch cannot read arbitrary files of the
// machine that submits it.
func (b *Batch) LocalPath(p string, allowOutside bool) (string, error) {
	abs := p
	if !filepath.IsAbs(p) {
		abs = filepath.Join(b.Dir, p)
	}
	abs = filepath.Clean(abs)
	if allowOutside {
		return abs, nil
	}
	dir, err := filepath.Abs(b.Dir)
	if err != nil {
		return "", err
	}
	full, err := filepath.Abs(abs)
	if err != nil {
		return "", err
	}
	if resolved, err := filepath.EvalSymlinks(full); err == nil {
		full = resolved
	}
	if resolvedDir, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolvedDir
	}
	if rel, err := filepath.Rel(dir, full); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("path %q is outside the batch folder (allow it with --allow-outside)", p)
	}
	return full, nil
}

// Select keeps only the ACs named in ids, in batch order, as the seed's `--ac id,id,...`
// picks the ACs of one run. An id the batch does not hold is an error (a usage error:
// judging fewer ACs than asked for must not pass silently); entries rejected for having no
// usable id are dropped, since none of them can be among those asked for.
func (b *Batch) Select(ids []string) error {
	want := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	if len(want) == 0 {
		return fmt.Errorf("%s: --ac names no AC", b.Path)
	}
	var kept []AC
	for _, ac := range b.ACs {
		if want[ac.ID] {
			kept = append(kept, ac)
			delete(want, ac.ID)
		}
	}
	if len(want) > 0 {
		missing := make([]string, 0, len(want))
		for id := range want {
			missing = append(missing, id)
		}
		sort.Strings(missing)
		return fmt.Errorf("%s: --ac %s: no such AC in the batch", b.Path, strings.Join(missing, ","))
	}
	b.ACs, b.Rejected = kept, nil
	return nil
}
