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
//
// An id that is no AC's may name one part of an AC whose jobs are parts of it (a rubric
// AC's views), by the part's job id, "<ac>--<part>": the AC is kept with that part only.
// parted says which ACs' jobs are parts, as each AC's kind says (stage.Selecting, looked
// up through the registry by the caller: the batch format knows no kind's parts); nil
// means none is.
func (b *Batch) Select(ids []string, parted func(AC) bool) error {
	want := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	if len(want) == 0 {
		return fmt.Errorf("%s: --ac names no AC", b.Path)
	}
	parts := map[string][]string{}
	for id := range want {
		if b.hasAC(id) {
			continue
		}
		if ac, ok := b.partOwner(id, parted); ok {
			parts[ac] = append(parts[ac], id)
			delete(want, id)
		}
	}
	var kept []AC
	for _, ac := range b.ACs {
		v, named := parts[ac.ID]
		if want[ac.ID] || named {
			if !want[ac.ID] {
				sort.Strings(v)
				ac = ac.WithViews(append(ac.Views(), v...))
			}
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

func (b *Batch) hasAC(id string) bool {
	for _, ac := range b.ACs {
		if ac.ID == id {
			return true
		}
	}
	return false
}

// partOwner is the AC with parts (parted) whose parts' job ids start with "<ac>--" for
// id, the longest such AC id when several do.
func (b *Batch) partOwner(id string, parted func(AC) bool) (string, bool) {
	if parted == nil {
		return "", false
	}
	owner := ""
	for _, ac := range b.ACs {
		if strings.HasPrefix(id, ac.ID+"--") && len(ac.ID) > len(owner) && parted(ac) {
			owner = ac.ID
		}
	}
	return owner, owner != ""
}

// SelectTargets keeps only the ACs with one of the targets named in ids, each narrowed to
// those targets' parts: a run's --target (seed 004's `target:`, alias `screen:`)
// converges one target of a rubric feature. targetsOf lists an AC's target ids as its
// kind reads them (stage.Selecting, looked up through the registry by the caller: a
// rubric feature's spec.json), ok false for an AC of a kind without targets, which is
// left out; an AC whose targets cannot be read (err) is kept, to be reported blocked with
// the reason. A target no AC has is an error, naming the targets there are.
func (b *Batch) SelectTargets(ids []string, targetsOf func(AC) (targets []string, ok bool, err error)) error {
	want := map[string]bool{}
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			want[id] = true
		}
	}
	if len(want) == 0 {
		return fmt.Errorf("%s: --target names no target", b.Path)
	}
	found := map[string]bool{}
	var kept []AC
	var all []string
	unread := false
	for _, ac := range b.ACs {
		targets, ok, err := targetsOf(ac)
		if !ok {
			continue
		}
		if err != nil {
			unread = true
			ac = ac.WithTargets(sortedKeys(want))
			kept = append(kept, ac)
			continue
		}
		var mine []string
		for _, t := range targets {
			all = append(all, ac.ID+":"+t)
			if want[t] {
				mine = append(mine, t)
				found[t] = true
			}
		}
		if len(mine) > 0 {
			ac = ac.WithTargets(mine)
			kept = append(kept, ac)
		}
	}
	var missing []string
	for _, id := range sortedKeys(want) {
		if !found[id] {
			missing = append(missing, id)
		}
	}
	if len(kept) == 0 || len(missing) > 0 && !unread {
		there := "none"
		if len(all) > 0 {
			there = strings.Join(all, ", ")
		}
		return fmt.Errorf("%s: --target %s: no entry of the batch has it (targets: %s)", b.Path, strings.Join(missing, ","), there)
	}
	b.ACs, b.Rejected = kept, nil
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
