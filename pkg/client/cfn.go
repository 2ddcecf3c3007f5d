package client

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// CFNRoot is the project root seed 000's manifests go under, found from dir the way the
// seed's vote step looks for them: the nearest folder at or above dir that holds a
// .cfn-cache folder or a .git (the repository's root), so a manifest written from a
// subfolder lands where the vote step reads; dir itself when neither is found. The
// search never climbs out of a repository: its root ends it.
func CFNRoot(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("project root: %w", err)
	}
	for d := abs; ; {
		if st, err := os.Stat(filepath.Join(d, ".cfn-cache")); err == nil && st.IsDir() {
			return d, nil
		}
		// A .git folder, or the .git file of a worktree or submodule.
		if _, err := os.Stat(filepath.Join(d, ".git")); err == nil {
			return d, nil
		}
		up := filepath.Dir(d)
		if up == d {
			return abs, nil
		}
		d = up
	}
}

// WriteCFNTo writes the batch's ab manifest as WriteCFN does, but to the file path (seed
// 000's --out FILE), replacing what is there; its folder is created. It returns false
// when the batch has no ab manifest (no ab AC) and writes nothing then.
func (r *Results) WriteCFNTo(path string, now time.Time) (bool, error) {
	if r.Manifest == nil {
		return false, nil
	}
	m := r.Manifest.CFN(strconv.FormatInt(now.UnixNano(), 10))
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return false, fmt.Errorf("cfn manifest: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return false, fmt.Errorf("cfn manifest folder: %w", err)
	}
	// Through a temporary file and a rename, so a reader never meets half a manifest.
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return false, fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return false, fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return false, fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return false, fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return false, fmt.Errorf("write cfn manifest %s: %w", path, err)
	}
	return true, nil
}
