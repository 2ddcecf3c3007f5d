// Package rerun decides when the all-in-one mode need not judge a batch again. A batch
// whose every decision-relevant input is the same as that of a batch that completed in
// the same state folder would be decided the same way (its model answers are in the
// judge-call cache, and every other step is a pure function of its inputs), so the
// earlier batch's results stand: `tribunal run` says so and writes them again instead of
// rendering, gating and deciding every AC anew, the way a build cache skips an unchanged
// target.
//
// The key (Inputs.Key) covers what can change a decision: tribunal's own build, the
// tenant, the batch file's bytes and path, the plan (every job's id, iteration and spec,
// and so every artifact's digest: the client hashes them before anything is published),
// the judge's identity and sampling settings and the services' options. A batch whose
// decisions also rest on state outside the key is never reused (Unkeyable): a looping
// kind (a rubric view continues its loop across runs), an artifact named by URL (its
// bytes are not hashed before the run) and `positions: auto` (it reads the tenant's flip
// history, which every batch changes). The index (Index) maps a key to the last batch
// that completed with it; before its results stand they are read back and checked
// (Stands): completed, not cancelled, not being redriven, every job final, none blocked
// for a cause that a new run might not repeat.
package rerun

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/artifact"
	"github.com/tribunal-dev/tribunal/pkg/errclass"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// Inputs are everything that can change the decisions of a batch run in the all-in-one
// mode. Each field is part of the key; one that cannot be known leaves the key unknown.
type Inputs struct {
	// Tribunal identifies the build deciding (Build): a different build may decide
	// differently.
	Tribunal string `json:"tribunal"`
	Tenant   string `json:"tenant"`
	// Source is the batch file as the results name it; BatchFile the SHA-256 of its bytes.
	Source    string `json:"source"`
	BatchFile string `json:"batch_file"`
	// Plan is the plan's digest (client.Prepared.Digest): every job's id, iteration and
	// spec in order, the artifacts by their SHA-256. Jobs is how many jobs it holds.
	Plan string `json:"plan"`
	Jobs int    `json:"jobs"`
	// Judge is the judge provider's identity and the settings of what it is asked: the
	// provider, model, endpoint, response format, sampling parameters, and for recorded
	// answers the answers themselves.
	Judge map[string]string `json:"judge"`
	// Options are the services' settings that reach a decision.
	Options map[string]string `json:"options,omitempty"`
}

// ErrUnknown marks a key that cannot be computed: the batch is judged again.
var ErrUnknown = errclass.New(errclass.NotFound, "rerun key unknown")

// Key is the SHA-256 of the inputs, in hex. It fails with ErrUnknown when a required
// input is missing.
func (in Inputs) Key() (string, error) {
	for _, f := range []struct{ name, v string }{{"tribunal", in.Tribunal}, {"tenant", in.Tenant}, {"batch_file", in.BatchFile}, {"plan", in.Plan}} {
		if f.v == "" {
			return "", fmt.Errorf("%w: no %s", ErrUnknown, f.name)
		}
	}
	if in.Jobs <= 0 || len(in.Judge) == 0 {
		return "", fmt.Errorf("%w: no jobs or no judge", ErrUnknown)
	}
	// encoding/json writes map keys sorted: the same inputs always encode the same.
	data, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnknown, err)
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

// FileDigest is the SHA-256 of a file's bytes, in hex.
func FileDigest(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Build identifies the running build of tribunal. A build from a clean checkout is named
// by its build information (module, Go version, every dependency's version and sum,
// build settings, the commit). Build information without a commit, or from a tree with
// changes not committed, does not say what the code is, so the executable's own SHA-256
// is added: any rebuild that changes a byte of the binary is another build, and an
// unchanged one (Go builds are reproducible) the same. Reading a 60 MB executable takes
// about 0.15 s, so it is done once per process, and a caller may start it early (in a
// goroutine) to overlap other start-up work.
func Build() (string, error) { return buildOnce() }

var buildOnce = sync.OnceValues(build)

func build() (string, error) {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return executableBuild("")
	}
	return buildID(info, func() (string, error) { return executableBuild(info.String()) })
}

// buildID names a build from its information, calling exe when the information alone
// does not say which code it is.
func buildID(info *debug.BuildInfo, exe func() (string, error)) (string, error) {
	revision, modified := "", ""
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" || modified != "false" {
		return exe()
	}
	sum := sha256.Sum256([]byte(info.String()))
	return "build:" + hex.EncodeToString(sum[:]), nil
}

func executableBuild(info string) (string, error) {
	path, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("%w: tribunal's executable: %w", ErrUnknown, err)
	}
	digest, err := FileDigest(path)
	if err != nil {
		return "", fmt.Errorf("%w: tribunal's executable: %w", ErrUnknown, err)
	}
	sum := sha256.Sum256([]byte(info))
	return "exe:" + digest + ":" + hex.EncodeToString(sum[:8]), nil
}

// Unkeyable says why a job's decision rests on state the key does not hold, "" when
// the key holds all of it.
func Unkeyable(spec events.JobSpec) string {
	if _, looping := registry.Looping(spec.Kind); looping {
		return fmt.Sprintf("%s: a %s job continues its loop from run to run", spec.ACID, spec.Kind)
	}
	k, err := registry.Lookup(spec.Kind)
	if err != nil {
		return fmt.Sprintf("%s: %v", spec.ACID, err)
	}
	e := k.Estimate(spec)
	if e.Positions == events.PositionsAuto {
		return fmt.Sprintf("%s: positions auto reads the tenant's flip history, which every batch changes", spec.ACID)
	}
	for _, s := range e.Sources {
		if s.Src.URL != "" {
			return fmt.Sprintf("%s: artifact %s is a URL, its bytes are only read while judging", spec.ACID, s.Src.URL)
		}
	}
	return ""
}

// Entry is a completed batch whose results stand for its inputs' key, or (Stopped) the
// batch a run of those inputs stopped before it completed, which the next run continues.
type Entry struct {
	Key    string `json:"key"`
	Tenant string `json:"tenant"`
	Batch  string `json:"batch"`
	// Plan is the batch's plan digest, checked against its header.
	Plan        string    `json:"plan"`
	Jobs        int       `json:"jobs"`
	Judges      []string  `json:"judges,omitempty"`
	CompletedAt time.Time `json:"completed_at"`
	ExitCode    int       `json:"exit_code"`
	// Stopped is set on a batch whose run stopped before it completed.
	Stopped *Stop `json:"stopped,omitempty"`
}

// Stop is when and why a run stopped before its batch completed: "no space left",
// "interrupted" (Ctrl-C) or "timed out".
type Stop struct {
	At  time.Time `json:"at"`
	Why string    `json:"why"`
}

// IndexDir is the index's folder under a state folder.
const IndexDir = "reruns"

// Index maps keys to the batches whose results stand for them: one small JSON file per
// key in the state folder, beside the NATS store whose records it points into. The
// state folder's lock admits one process at a time, so writes do not race.
type Index struct{ dir string }

// OpenIndex is the index of the state folder stateDir.
func OpenIndex(stateDir string) *Index { return &Index{dir: filepath.Join(stateDir, IndexDir)} }

func (x *Index) path(key string) (string, error) {
	if len(key) != 64 || strings.Trim(key, "0123456789abcdef") != "" {
		return "", fmt.Errorf("rerun key %q: want 64 lowercase hex characters", key)
	}
	return filepath.Join(x.dir, key+".json"), nil
}

// Lookup is the entry for key, nil when there is none.
func (x *Index) Lookup(key string) (*Entry, error) {
	p, err := x.path(key)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("rerun index: %w", err)
	}
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("rerun index %s: %w", p, err)
	}
	if e.Key != key || e.Batch == "" || e.Tenant == "" {
		return nil, fmt.Errorf("rerun index %s: the entry is not for this key", p)
	}
	return &e, nil
}

// Record makes e the batch whose results stand for e.Key.
func (x *Index) Record(e Entry) error {
	p, err := x.path(e.Key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(x.dir, 0o750); err != nil {
		return fmt.Errorf("rerun index: %w", err)
	}
	data, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("rerun index: %w", err)
	}
	if err := os.Rename(tmp, p); err != nil {
		return fmt.Errorf("rerun index: %w", err)
	}
	return nil
}

// Forget drops key's entry, if any.
func (x *Index) Forget(key string) error {
	p, err := x.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rerun index: %w", err)
	}
	return nil
}

// Stands reports why the batch e names cannot stand for a rerun, nil when it can: its
// header h and its job records jobs, as read back from the state folder, must be the
// batch e recorded, completed and intact.
func Stands(e Entry, h *records.Batch, jobs []*records.Job) error {
	switch {
	case h == nil:
		return fmt.Errorf("batch %s is no longer recorded", e.Batch)
	case h.Cancel != nil:
		return fmt.Errorf("batch %s was cancelled", e.Batch)
	case h.Completion == nil:
		return fmt.Errorf("batch %s is not complete", e.Batch)
	case h.Redrive != nil:
		return fmt.Errorf("batch %s is being redriven", e.Batch)
	case h.Plan == nil || h.Plan.Digest != e.Plan:
		return fmt.Errorf("batch %s's plan is not the one recorded for this key", e.Batch)
	case h.Size != e.Jobs || len(jobs) != h.Size:
		return fmt.Errorf("batch %s: %d job records of %d", e.Batch, len(jobs), h.Size)
	}
	seen := make([]bool, h.Size)
	for _, j := range jobs {
		if j.Index < 0 || j.Index >= h.Size || seen[j.Index] {
			return fmt.Errorf("batch %s: job %s has index %d, out of place", e.Batch, j.ACID, j.Index)
		}
		seen[j.Index] = true
		if !j.Final() {
			return fmt.Errorf("batch %s: job %s has no outcome", e.Batch, j.ACID)
		}
		for _, c := range j.Calls {
			if c.Status != events.VoteOK {
				return fmt.Errorf("batch %s: job %s had a %s answer from %s, which a new run would ask again", e.Batch, j.ACID, c.Status, c.Judge)
			}
		}
		if j.Status == events.StatusBlocked && !stableBlock(j) {
			return fmt.Errorf("batch %s: job %s was blocked at %s (%s), which a new run might not repeat", e.Batch, j.ACID, j.BlockStage, j.BlockReason)
		}
	}
	return nil
}

// stableBlock reports whether a blocked job's cause would block it again: failed gates,
// the batch entry's own problem, or a render blocked only for causes in the artifacts
// themselves (artifact.Recurs). Any other cause (a service that gave up, a provider or
// runner that failed, storage that lost the bytes, a cancel) may not recur, and the batch
// is judged again.
func stableBlock(j *records.Job) bool {
	switch j.BlockStage {
	case "gate":
		return true
	case "render":
	default:
		return false
	}
	if j.Spec.Problem != "" && j.BlockReason == j.Spec.Problem {
		return true
	}
	return artifact.Recurs(j.BlockReason)
}

// Describe is one line naming an entry for people: the batch, when it completed and who
// judged it.
func Describe(e *Entry) string {
	judges := append([]string(nil), e.Judges...)
	sort.Strings(judges)
	var b bytes.Buffer
	fmt.Fprintf(&b, "batch %s (tenant %s, completed %s", e.Batch, e.Tenant, e.CompletedAt.Local().Format("2006-01-02 15:04:05"))
	if len(judges) > 0 {
		fmt.Fprintf(&b, ", judged by %s", strings.Join(judges, ", "))
	} else {
		b.WriteString(", no judge was asked")
	}
	b.WriteString(")")
	return b.String()
}
