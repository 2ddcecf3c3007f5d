package argus

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Color is an sRGB colour as design tokens write it: R, G and B on the 0..255 scale and
// A (opacity) in 0..1. Channels are float64 because compositing a translucent colour
// produces values between the 8-bit steps, and rounding them back would move a ratio
// that sits right at a threshold.
type Color struct {
	// R, G and B are 0..255.
	R, G, B float64
	// A is opacity, 0 (transparent) to 1 (opaque).
	A float64
}

// ParseHexColor reads "#RGB", "#RRGGBB" or "#RRGGBBAA" (the leading '#' may be left
// out, hex digits in either case). Four-digit "#RGBA" is rejected: token files in this
// format never use it, and guessing whether it is shorthand or a typo would hide an
// error in a value that decides a pass or fail.
func ParseHexColor(s string) (Color, error) {
	h := strings.TrimPrefix(strings.TrimSpace(s), "#")
	switch len(h) {
	case 3:
		h = string([]byte{h[0], h[0], h[1], h[1], h[2], h[2]})
	case 6, 8:
	default:
		return Color{}, fmt.Errorf("colour %q: want #RGB, #RRGGBB or #RRGGBBAA", s)
	}
	var ch [4]float64
	ch[3] = 255
	for i := 0; i < len(h)/2; i++ {
		v, err := strconv.ParseUint(h[2*i:2*i+2], 16, 8)
		if err != nil {
			return Color{}, fmt.Errorf("colour %q: %q is not a hex byte", s, h[2*i:2*i+2])
		}
		ch[i] = float64(v)
	}
	return Color{R: ch[0], G: ch[1], B: ch[2], A: ch[3] / 255}, nil
}

// UnmarshalJSON accepts the two spellings tokens.json uses for one colour: a hex
// string or an {r,g,b,a} object.
func (c *Color) UnmarshalJSON(data []byte) error {
	v, err := decodeJSON(data, true)
	if err != nil {
		return fmt.Errorf("colour: %w", err)
	}
	col, err := colorValue(v)
	if err != nil {
		return err
	}
	*c = col
	return nil
}

// Hex formats the colour as #RRGGBB, or #RRGGBBAA when it is not opaque, rounding
// channels to the nearest 8-bit step. It is for display only.
func (c Color) Hex() string {
	b := func(v float64) int { return int(math.Round(math.Max(0, math.Min(255, v)))) }
	if c.A >= 1 {
		return fmt.Sprintf("#%02X%02X%02X", b(c.R), b(c.G), b(c.B))
	}
	return fmt.Sprintf("#%02X%02X%02X%02X", b(c.R), b(c.G), b(c.B), b(c.A*255))
}

// isColorObject tells an {r,g,b,a} colour apart from an appearance map such as
// {"light": ..., "dark": ...}: any channel key makes it a colour (and then all three
// colour channels are required).
func isColorObject(o jsonObject) bool {
	for _, m := range o {
		switch m.Key {
		case "r", "g", "b", "a":
			return true
		}
	}
	return false
}

// colorValue converts a decoded hex string or {r,g,b,a} object.
func colorValue(v any) (Color, error) {
	switch t := v.(type) {
	case string:
		return ParseHexColor(t)
	case jsonObject:
		if !isColorObject(t) {
			return Color{}, fmt.Errorf("colour object needs r, g and b")
		}
		c := Color{A: 1}
		have := map[string]bool{}
		for _, m := range t {
			f, ok := numberValue(m.Val)
			var dst *float64
			limit := 255.0
			switch m.Key {
			case "r":
				dst = &c.R
			case "g":
				dst = &c.G
			case "b":
				dst = &c.B
			case "a":
				dst, limit = &c.A, 1
			default:
				if isComment(m.Key) {
					continue
				}
				return Color{}, fmt.Errorf("colour object: unknown key %q (want r, g, b, a)", m.Key)
			}
			if !ok || f < 0 || f > limit {
				return Color{}, fmt.Errorf("colour object: %s must be a number in [0,%g], got %s", m.Key, limit, describe(m.Val))
			}
			*dst = f
			have[m.Key] = true
		}
		for _, k := range []string{"r", "g", "b"} {
			if !have[k] {
				return Color{}, fmt.Errorf("colour object: missing %q", k)
			}
		}
		return c, nil
	}
	return Color{}, fmt.Errorf("colour must be a hex string or an {r,g,b,a} object, got %s", kindOf(v))
}

// describe renders a decoded value for an error message, short.
func describe(v any) string {
	switch t := v.(type) {
	case string:
		if len(t) > 40 {
			t = t[:40] + "..."
		}
		return strconv.Quote(t)
	case json.Number:
		return string(t)
	case bool:
		return strconv.FormatBool(t)
	}
	return kindOf(v)
}

// Over composites c over an opaque background in sRGB space (the way browsers and
// UIKit blend a translucent colour) and returns the opaque result. The background's own
// alpha is not looked at; CheckContrast refuses translucent backgrounds before it gets
// here because their result depends on whatever lies underneath.
func (c Color) Over(bg Color) Color {
	a := c.A
	return Color{
		R: c.R*a + bg.R*(1-a),
		G: c.G*a + bg.G*(1-a),
		B: c.B*a + bg.B*(1-a),
		A: 1,
	}
}

// linearize converts one 0..255 sRGB channel to linear light. The 0.04045 knee is the
// current WCAG 2.x text; the older 0.03928 gives the same result for every 8-bit value.
func linearize(v float64) float64 {
	c := v / 255
	if c <= 0.04045 {
		return c / 12.92
	}
	return math.Pow((c+0.055)/1.055, 2.4)
}

// RelativeLuminance is the WCAG 2.x relative luminance of the colour's RGB channels,
// 0 for black and 1 for white. Alpha is ignored: composite first with Over.
func RelativeLuminance(c Color) float64 {
	return 0.2126*linearize(c.R) + 0.7152*linearize(c.G) + 0.0722*linearize(c.B)
}

// ContrastRatio is the WCAG 2.x contrast ratio (1..21) of fg drawn on bg, compositing
// a translucent fg over bg first, since that blend is what a reader actually sees.
// The value is exact: callers compare it to a minimum unrounded, so 4.499 fails 4.5,
// and round only for display.
func ContrastRatio(fg, bg Color) float64 {
	bg.A = 1
	l1 := RelativeLuminance(fg.Over(bg))
	l2 := RelativeLuminance(bg)
	if l1 < l2 {
		l1, l2 = l2, l1
	}
	return (l1 + 0.05) / (l2 + 0.05)
}

// round2 rounds a ratio to two decimals for reports.
func round2(f float64) float64 {
	return math.Round(f*100) / 100
}
