package command

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/sensor"
)

// parseArgs is the contract's command line, parsed the way an adapter script would.
const parseArgs = `#!/bin/sh
set -eu
while [ $# -gt 0 ]; do
  case "$1" in
    --route) route=$2; shift 2;;
    --state) state=$2; shift 2;;
    --appearance) appearance=$2; shift 2;;
    --fixture) fixture=$2; shift 2;;
    --out) out=$2; shift 2;;
    *) echo "unknown flag $1" >&2; exit 2;;
  esac
done
`

// writeAdapter writes an executable shell script and returns its path.
func writeAdapter(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(parseArgs+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyPNG writes a 3x2 PNG for the adapters to copy.
func tinyPNG(t *testing.T, dir string) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 3, 2))
	img.Set(1, 1, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tiny.png")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

type fixture struct {
	dir, png string
	reg      *Registry
	pidFile  string
}

func setup(t *testing.T, timeout time.Duration) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, png: tinyPNG(t, dir), pidFile: filepath.Join(dir, "grandchild.pid")}
	long := strings.Repeat("x", 10_000)
	adapters := map[string]string{
		"good": writeAdapter(t, dir, "good.sh", `
cp "`+f.png+`" "$out/render.png"
printf '{"route":"%s","state":"%s","appearance":"%s","fixture":"%s","viewport":"%sx%s","target":"%s","label":"%s"}' \
  "$route" "$state" "$appearance" "$fixture" "$TRIBUNAL_VIEWPORT_WIDTH" "$TRIBUNAL_VIEWPORT_HEIGHT" "$TRIBUNAL_TARGET" "`+long+`" > "$out/probe.json"
`),
		"fails": writeAdapter(t, dir, "fails.sh", `
echo "compiling..." >&2
echo "error: Settings.swift:12: cannot find 'Foo' in scope" >&2
exit 65
`),
		"slow": writeAdapter(t, dir, "slow.sh", `
sleep 30 &
echo $! > "`+f.pidFile+`"
echo "booting simulator" >&2
wait
`),
		"noprobe": writeAdapter(t, dir, "noprobe.sh", `
cp "`+f.png+`" "$out/render.png"
`),
		"badpng": writeAdapter(t, dir, "badpng.sh", `
printf 'not a png' > "$out/render.png"
echo '{}' > "$out/probe.json"
`),
		"badjson": writeAdapter(t, dir, "badjson.sh", `
cp "`+f.png+`" "$out/render.png"
echo '{"unterminated": ' > "$out/probe.json"
`),
		"symlink": writeAdapter(t, dir, "symlink.sh", `
cp "`+f.png+`" "$out/render.png"
ln -s /etc/passwd "$out/probe.json"
`),
		"env": writeAdapter(t, dir, "env.sh", `
cp "`+f.png+`" "$out/render.png"
printf '{"secret":"%s","extra":"%s"}' "${TRIBUNAL_TEST_SECRET:-}" "${EXTRA:-}" > "$out/probe.json"
`),
	}
	reg, err := New(Options{Adapters: adapters, Timeout: timeout, Env: []string{"EXTRA=yes"}})
	if err != nil {
		t.Fatal(err)
	}
	f.reg = reg
	return f
}

var view = sensor.View{
	Route: "/settings", Target: "settings", State: "loaded", Appearance: "dark", Fixture: "fx-1",
	Viewport: sensor.Viewport{Width: 390, Height: 844},
}

func TestAdapterSuccess(t *testing.T) {
	f := setup(t, 10*time.Second)
	c, err := f.reg.Sense(context.Background(), "good", view)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(f.png)
	if !bytes.Equal(c.PNG, want) {
		t.Error("render.png differs from what the adapter wrote")
	}
	var probe map[string]string
	if err := json.Unmarshal(c.Probe, &probe); err != nil {
		t.Fatalf("probe: %v", err)
	}
	for k, v := range map[string]string{
		"route": "/settings", "state": "loaded", "appearance": "dark", "fixture": "fx-1",
		"viewport": "390x844", "target": "settings",
	} {
		if probe[k] != v {
			t.Errorf("adapter saw %s=%q, want %q", k, probe[k], v)
		}
	}
	if n := utf8.RuneCountInString(probe["label"]); n != sensor.MaxLabel || !strings.HasSuffix(probe["label"], sensor.Cut) {
		t.Errorf("label not cut: %d runes", n)
	}
}

func TestAdapterNonZeroExit(t *testing.T) {
	f := setup(t, 10*time.Second)
	_, err := f.reg.Sense(context.Background(), "fails", view)
	if !sensor.IsUnrenderable(err) {
		t.Fatalf("want unrenderable, got %v", err)
	}
	if !strings.Contains(err.Error(), "cannot find 'Foo' in scope") {
		t.Errorf("stderr tail missing from %q", err)
	}
	if !strings.Contains(err.Error(), "exit status 65") {
		t.Errorf("exit status missing from %q", err)
	}
}

func TestAdapterTimeoutKillsGroup(t *testing.T) {
	const timeout = time.Second
	f := setup(t, timeout)
	start := time.Now()
	_, err := f.reg.Sense(context.Background(), "slow", view)
	elapsed := time.Since(start)
	if !sensor.IsUnrenderable(err) || !strings.Contains(err.Error(), "did not finish within") {
		t.Fatalf("want an unrenderable timeout, got %v", err)
	}
	if !strings.Contains(err.Error(), "booting simulator") {
		t.Errorf("stderr tail missing from %q", err)
	}
	// Killing only the script would leave "sleep 30" holding stderr, and Wait would
	// give up only after WaitDelay (2s more).
	if elapsed > timeout+time.Second {
		t.Errorf("a %s timeout took %s", timeout, elapsed)
	}
	raw, err := os.ReadFile(f.pidFile)
	if err != nil {
		t.Fatalf("adapter did not record its child: %v", err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(raw)))
	deadline := time.Now().Add(2 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("the adapter's child %d (sleep 30) survived the timeout", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// alive reports whether pid runs; a zombie waiting to be reaped counts as dead.
func alive(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

func TestAdapterBadOutputs(t *testing.T) {
	f := setup(t, 10*time.Second)
	for name, want := range map[string]string{
		"noprobe": "probe.json",
		"badpng":  "not a valid PNG",
		"badjson": "not JSON",
		"symlink": "not a regular file",
	} {
		_, err := f.reg.Sense(context.Background(), name, view)
		if !sensor.IsUnrenderable(err) {
			t.Errorf("%s: want unrenderable, got %v", name, err)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %q does not mention %q", name, err, want)
		}
	}
}

func TestAdapterUnknown(t *testing.T) {
	f := setup(t, 10*time.Second)
	_, err := f.reg.Sense(context.Background(), "ios", view)
	if !errors.Is(err, sensor.ErrNoSensor) || !sensor.IsUnrenderable(err) {
		t.Fatalf("want ErrNoSensor (unrenderable), got %v", err)
	}
	if !strings.Contains(err.Error(), `no sensor is registered for adapter "ios"`) {
		t.Errorf("message: %v", err)
	}
}

func TestAdapterEnvironmentIsMinimal(t *testing.T) {
	t.Setenv("TRIBUNAL_TEST_SECRET", "s3cr3t")
	f := setup(t, 10*time.Second)
	c, err := f.reg.Sense(context.Background(), "env", view)
	if err != nil {
		t.Fatal(err)
	}
	var probe map[string]string
	if err := json.Unmarshal(c.Probe, &probe); err != nil {
		t.Fatal(err)
	}
	if probe["secret"] != "" {
		t.Error("the renderer's environment leaked into the adapter")
	}
	if probe["extra"] != "yes" {
		t.Error("Options.Env did not reach the adapter")
	}
}

func TestAdapterCancel(t *testing.T) {
	f := setup(t, 10*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start := time.Now()
	_, err := f.reg.Sense(ctx, "slow", view)
	if !errors.Is(err, context.Canceled) || sensor.FaultOf(err) != 0 {
		t.Errorf("want a bare context.Canceled, got %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("cancel took %s", d)
	}
}

func TestNewRejectsMissingExecutable(t *testing.T) {
	if _, err := New(Options{Adapters: map[string]string{"x": "/nonexistent/sense.sh"}}); err == nil {
		t.Error("want an error for a missing adapter executable")
	}
}

// TestAdapterReceivesTheRouteAsWritten pins the sensor contract ("sense.sh --route R
// --state S --appearance A --fixture F --out DIR") with the seed's iOS recipe, whose
// route is an "app://feature/target" deep route, "opaque to the loop; interpreted by the
// adapter": the adapter's command line carries every route exactly as the spec wrote it.
func TestAdapterReceivesTheRouteAsWritten(t *testing.T) {
	dir := t.TempDir()
	shot := tinyPNG(t, dir)
	log := filepath.Join(dir, "args.log")
	logger := filepath.Join(dir, "logger.sh")
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + log + "\n" + parseArgs[len("#!/bin/sh\n"):] +
		"cp \"" + shot + "\" \"$out/render.png\"\necho '{\"id\":\"screen.list\"}' > \"$out/probe.json\"\n"
	if err := os.WriteFile(logger, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	reg, err := New(Options{Adapters: map[string]string{"ios": logger}})
	if err != nil {
		t.Fatal(err)
	}
	for _, route := range []string{"app://tasks/list", "app://tasks/list?tab=done&sort=due", "screen list", "--not-a-flag", "http://localhost:3000/example"} {
		t.Run(route, func(t *testing.T) {
			if _, err := reg.Sense(context.Background(), "ios", sensor.View{Route: route, Target: "list", State: "populated", Appearance: "dark", Fixture: "happy-path"}); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(log)
			if err != nil {
				t.Fatal(err)
			}
			args := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
			want := []string{"--route", route, "--state", "populated", "--appearance", "dark", "--fixture", "happy-path", "--out"}
			if len(args) != len(want)+1 || strings.Join(args[:len(want)], "\n") != strings.Join(want, "\n") {
				t.Fatalf("adapter arguments %q, want %q DIR", args, want)
			}
		})
	}
}
