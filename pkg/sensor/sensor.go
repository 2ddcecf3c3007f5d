// Package sensor defines what every renderer sensor promises: given a view of an
// application, produce the picture a judge looks at (render.png) and the structured facts
// the deterministic gates read (probe.json).
//
// Sensors differ in how they reach the application (package web drives a headless
// Chromium, package command runs an operator-registered adapter), but the renderer treats
// them alike through the Sensor interface and the error kinds below. Everything a sensor
// reads from the application is app content, which is data and never instructions, so
// every probe is bounded with TruncateLabels before it leaves the sensor.
//
// The contract is generic, not rubric's: a sensor turns a view (a URL or an adapter's
// state, a viewport, an appearance) into a picture and probe facts, and knows no kind's
// rules. The rubric kind is the one that renders views today, and its gates and loop
// (pkg/kind/rubric/argus) read what a sensor produced; a kind that judges pictures of
// another application would use the same sensors, which is why they stay here, below
// the kinds, and why this package imports no kind.
package sensor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tribunal-dev/tribunal/pkg/errclass"
)

// MaxLabel is the longest text label, in runes, that a probe may carry. It mirrors the
// sensor contract's limit ("truncate any text label > 256 chars"): long enough for any
// honest UI label, too short to smuggle a prompt.
const MaxLabel = 256

// MaxID is the longest element id, in runes, a probe may carry. Ids are not labels: the
// seed cuts only text labels, and an id the a11y contract names must still be found whole
// (rubric's a11y gate), so ids under an id key (IsIDKey) keep up to MaxID runes.
// The bound is tribunal's own: a probe is judge input, and nothing bounded a hostile
// adapter's "id" otherwise.
const MaxID = 4096

// Cut marks a string that TruncateLabels shortened, so that a gate or a judge can tell an
// app's real label from one the sensor cut.
const Cut = "…"

// idKeys are the keys whose string values count as element ids in a probe. Sensors
// differ (DOM ids and data-testid on the web, accessibilityIdentifier on iOS, testID in
// React Native, camel-cased variants after a JSON transform), and a gate should not
// care which one produced the probe, so all of them are read.
var idKeys = map[string]bool{
	"id":                      true,
	"identifier":              true,
	"accessibilityIdentifier": true,
	"testId":                  true,
	"testid":                  true,
	"data-testid":             true,
	"dataTestid":              true,
}

// IsIDKey reports whether a probe key holds an element id. It is part of the contract,
// not of any one gate: every sensor keeps such values whole (MaxID) instead of cutting
// them like text labels, and a gate that looks ids up reads the same keys.
func IsIDKey(key string) bool { return idKeys[key] }

// Default viewport, used when a View leaves its Viewport empty. It matches the sensor
// contract's default so that renders stay comparable with references made elsewhere.
const (
	DefaultWidth  = 1440
	DefaultHeight = 900
)

// Appearance values the sensors understand. Anything else is passed through to adapters
// untouched, but the web sensor only knows how to emulate these two.
const (
	Light = "light"
	Dark  = "dark"
)

// Viewport is the size of the rendered surface in CSS pixels. The PNG has exactly this
// size because sensors render at a device scale factor of 1, which keeps pixel
// comparisons against references meaningful.
type Viewport struct {
	Width  int `json:"width"`
	Height int `json:"height"`
}

// View names one screen of the application under one set of conditions. The fields are
// the sensor contract's (target, state, appearance) triple plus what a sensor needs to
// reach it deterministically: the route and the fixture.
type View struct {
	// Route is where the view lives: a URL or path for the web sensor, an opaque
	// string handed to an adapter.
	Route string `json:"route"`
	// Target is the spec's name for the screen; sensors may use it for logging or
	// conventions, never for routing on their own.
	Target string `json:"target,omitempty"`
	// State is the spec's name for the screen's state (empty, loaded, error...).
	State string `json:"state,omitempty"`
	// Appearance is light or dark.
	Appearance string `json:"appearance,omitempty"`
	// Fixture names the deterministic data the app must render, so that the render
	// matches its reference regardless of live data.
	Fixture string `json:"fixture,omitempty"`
	// Viewport is the requested size; zero fields take the defaults.
	Viewport Viewport `json:"viewport"`
	// Project is the feature's own project, for a renderer that runs the sensor a
	// project ships (package command, the all-in-one mode); nil when the job says nothing.
	Project *Project `json:"-"`
}

// Project is where a view's feature lives on the machine that planned its job (seed
// 004's layout): the project root and the sensor script the project ships under it.
type Project struct {
	// Root is the project root, absolute: the folder holding argus/.
	Root string
	// Sense is argus/adapters/{adapter}/sense.sh relative to Root, "" when the project
	// ships none.
	Sense string
}

// Size returns the viewport with defaults applied, so that every sensor agrees on what
// an unspecified size means.
func (v View) Size() Viewport {
	s := v.Viewport
	s.Width = OrDefault(s.Width, DefaultWidth)
	s.Height = OrDefault(s.Height, DefaultHeight)
	return s
}

// OrDefault is v, or d when v is not positive: how a sensor's size and options fall back
// to their defaults.
func OrDefault[T int | int64 | time.Duration](v, d T) T {
	if v <= 0 {
		return d
	}
	return v
}

// Capture is what a sensor produced for one view: the perceptual artifact and the
// structured facts. Both are bytes because they go to blob storage as they are.
type Capture struct {
	// PNG is render.png.
	PNG []byte
	// Probe is probe.json: a JSON document whose strings are already bounded by
	// TruncateLabels.
	Probe []byte
}

// Sensor renders views. Implementations must be safe for concurrent use, because the
// renderer handles several jobs at once, and must return promptly when ctx ends.
//
// A failure must say whose fault it is: an *Error of FaultUnrenderable when the view itself
// could not be rendered (the AC blocks, retrying will not help), anything else when the
// rendering machinery failed (the message can be retried).
type Sensor interface {
	Sense(ctx context.Context, v View) (Capture, error)
}

// Fault says whose fault a failed render was, because the renderer must react
// differently: an unrenderable view blocks its AC, an infrastructure failure is retried.
type Fault int

const (
	// FaultUnrenderable means the view could not be rendered because of the
	// application under test: the page answered 404, navigation failed, the adapter's
	// build broke or it wrote no outputs.
	FaultUnrenderable Fault = iota + 1
	// FaultInfrastructure means the renderer itself failed: the browser would not
	// start or died, an adapter could not be executed at all.
	FaultInfrastructure
)

// String names the fault for logs and block reasons.
func (k Fault) String() string {
	switch k {
	case FaultUnrenderable:
		return "unrenderable"
	case FaultInfrastructure:
		return "infrastructure"
	default:
		return fmt.Sprintf("fault(%d)", int(k))
	}
}

// Error is a classified sensor failure. The renderer inspects Fault (through
// IsUnrenderable) to decide between blocking the AC and retrying.
type Error struct {
	// Fault says whose fault the failure is.
	Fault Fault
	// Reason is a short, human-readable description of what went wrong, suitable as
	// a block reason.
	Reason string
	// Err is the underlying cause, if any.
	Err error
}

// Error formats the reason and the cause.
func (e *Error) Error() string {
	prefix := "sensor: " + e.Fault.String()
	switch {
	case e.Reason != "" && e.Err != nil && strings.Contains(e.Reason, e.Err.Error()):
		return prefix + ": " + e.Reason // the reason already says it
	case e.Reason != "" && e.Err != nil:
		return fmt.Sprintf("%s: %s: %v", prefix, e.Reason, e.Err)
	case e.Reason != "":
		return prefix + ": " + e.Reason
	case e.Err != nil:
		return fmt.Sprintf("%s: %v", prefix, e.Err)
	default:
		return prefix
	}
}

// Unwrap exposes the cause so that errors.Is finds context errors and sentinels.
func (e *Error) Unwrap() error { return e.Err }

// Unrenderable builds a FaultUnrenderable error. The reason should say what the AC got
// wrong, because it ends up in the block reason the team reads.
func Unrenderable(err error, format string, args ...any) *Error {
	return &Error{Fault: FaultUnrenderable, Reason: fmt.Sprintf(format, args...), Err: err}
}

// Infrastructure builds a FaultInfrastructure error, for failures the AC did not cause.
func Infrastructure(err error, format string, args ...any) *Error {
	return &Error{Fault: FaultInfrastructure, Reason: fmt.Sprintf(format, args...), Err: err}
}

// FaultOf returns the fault of the first *Error in err's chain, or 0 when err carries no
// classification (for example a bare context error after the caller gave up).
func FaultOf(err error) Fault {
	var e *Error
	if errors.As(err, &e) {
		return e.Fault
	}
	return 0
}

// IsUnrenderable reports whether err says the view itself could not be rendered, which
// blocks the AC instead of retrying the render.
func IsUnrenderable(err error) bool { return FaultOf(err) == FaultUnrenderable }

// IsInfrastructure reports whether err says the rendering machinery failed.
func IsInfrastructure(err error) bool { return FaultOf(err) == FaultInfrastructure }

// ErrNoSensor is wrapped when a job asks for an adapter nobody registered. It is
// unrenderable rather than infrastructure because retrying cannot help: the AC names a
// sensor this deployment does not have.
var ErrNoSensor = errclass.New(errclass.Unavailable, "no sensor is registered")

// ErrRefused is wrapped when a view asks for something the renderer's policy forbids,
// such as a host outside the web sensor's allowed hosts. The AC is blocked with the
// reason: the app is not at fault, and retrying cannot help.
var ErrRefused = errclass.New(errclass.Refused, "refused by the renderer's policy")

// TruncateLabels bounds every text string in a decoded JSON value to max runes, in place
// where the containers allow it, and returns the (possibly new) value. An element id (a
// string under an id key, IsIDKey) is not a label: it keeps up to MaxID runes, so
// the a11y gate still finds a long id the contract names. A cut string keeps its
// first max-1 runes followed by Cut, so it is exactly max runes long. Map keys are
// bounded too, since an adapter's probe is arbitrary JSON and a key is as much app content
// as a value. A max below 1 means MaxLabel.
//
// The point is the judge's content-as-data guard: a label long enough to read as a prompt
// never reaches a judge.
func TruncateLabels(probe any, max int) any {
	if max < 1 {
		max = MaxLabel
	}
	return truncate(probe, max)
}

func truncate(v any, limit int) any {
	switch x := v.(type) {
	case string:
		return truncateString(x, limit)
	case map[string]any:
		truncateMap(x, limit, func(k string, val any) any {
			if s, ok := val.(string); ok {
				return truncateString(s, valueLimit(k, limit))
			}
			return truncate(val, limit)
		})
		return x
	case []any:
		for i := range x {
			x[i] = truncate(x[i], limit)
		}
		return x
	case map[string]string:
		truncateMap(x, limit, func(k, val string) string { return truncateString(val, valueLimit(k, limit)) })
		return x
	case []string:
		for i := range x {
			x[i] = truncateString(x[i], limit)
		}
		return x
	case []map[string]any:
		for i := range x {
			truncate(x[i], limit)
		}
		return x
	default:
		return v
	}
}

// valueLimit is how long the string value of key k may be: an id keeps up to MaxID runes
// (see MaxID), anything else limit.
func valueLimit(k string, limit int) int {
	if IsIDKey(k) {
		return max(limit, MaxID)
	}
	return limit
}

// truncateMap replaces every value of m by value(key, value) and cuts the keys longer than
// limit.
func truncateMap[V any](m map[string]V, limit int, value func(string, V) V) {
	var long []string
	for k, v := range m {
		m[k] = value(k, v)
		if utf8.RuneCountInString(k) > limit {
			long = append(long, k)
		}
	}
	renameKeys(m, long, limit)
}

// renameKeys replaces each long key by its cut form. Should two long keys cut to the same
// string, the one sorted first wins, so the outcome does not depend on map order.
func renameKeys[V any](m map[string]V, long []string, max int) {
	slices.Sort(long)
	for _, k := range long {
		v := m[k]
		delete(m, k)
		nk := truncateString(k, max)
		if _, taken := m[nk]; !taken {
			m[nk] = v
		}
	}
}

// truncateString cuts s to max runes, counting runes rather than bytes so that a
// multibyte label is never split inside a character.
func truncateString(s string, max int) string {
	if utf8.RuneCountInString(s) <= max {
		return s
	}
	keep := max - utf8.RuneCountInString(Cut)
	if keep < 0 {
		keep = 0
	}
	i, n := 0, 0
	for i < len(s) && n < keep {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		n++
	}
	return s[:i] + Cut
}

// TruncateJSON decodes a JSON document, bounds its strings with TruncateLabels and
// encodes it again. Numbers keep their exact text. Sensors use it on whatever probe they
// produced, so the bound holds no matter where the probe came from.
func TruncateJSON(data []byte, max int) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("decode probe: %w", err)
	}
	if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
		return nil, errors.New("decode probe: trailing data after the JSON value")
	}
	return MarshalProbe(TruncateLabels(v, max))
}

// MarshalProbe encodes a probe without HTML escaping, so that labels stay readable in
// probe.json (the probe is never embedded in HTML).
func MarshalProbe(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("encode probe: %w", err)
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}
