package argus

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// DefaultMinContrast is the minimum ratio a pair must meet when contrast-pairs.json
// does not say: WCAG 2.x level AA for body text.
const DefaultMinContrast = 4.5

// DefaultAppearance names the single appearance checked when no token is split by
// appearance and none was asked for, so a flat palette is still checked once.
const DefaultAppearance = "default"

// Contrast statuses of one checked pair.
const (
	ContrastPass        = "pass"
	ContrastFail        = "fail"
	ContrastWhitelisted = "whitelisted"
)

// ColorToken is one named colour of tokens.json. It either has one value for every
// appearance (flat) or one value per appearance.
type ColorToken struct {
	// Name is the token's key in tokens.json's colors map.
	Name string
	// Flat is the value for every appearance, set when PerAppearance is empty.
	Flat Color
	// PerAppearance maps appearance name to value when the token is split.
	PerAppearance map[string]Color
	// appearances keeps the split keys in document order.
	appearances []string
}

// Tokens is the colour half of tokens.json (the design-system mirror). Spacing and type
// scales are not read: only the judge looks at them, as text.
type Tokens struct {
	colors map[string]*ColorToken
	order  []string
}

// ParseTokens reads tokens.json. Only "colors" is interpreted; it must be a non-empty
// object whose entries are a colour (hex or {r,g,b,a}) or an object of appearance to
// colour. Keys starting with "_" are comments at any level. Any malformed colour is an
// error rather than a skipped token, because a gate that silently checks fewer pairs
// than declared is not a floor.
func ParseTokens(data []byte) (*Tokens, error) {
	root, err := decodeJSON(data, true)
	if err != nil {
		return nil, fmt.Errorf("tokens: %w", err)
	}
	obj, ok := root.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("tokens: top level is %s, want an object", kindOf(root))
	}
	raw, ok := obj.Get("colors")
	if !ok {
		return nil, errors.New("tokens: no \"colors\" map")
	}
	colors, ok := raw.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("tokens: colors is %s, want an object", kindOf(raw))
	}
	t := &Tokens{colors: map[string]*ColorToken{}}
	for _, m := range colors {
		if isComment(m.Key) {
			continue
		}
		tok := &ColorToken{Name: m.Key}
		if split, ok := m.Val.(jsonObject); ok && !isColorObject(split) {
			tok.PerAppearance = map[string]Color{}
			for _, am := range split {
				if isComment(am.Key) {
					continue
				}
				c, err := colorValue(am.Val)
				if err != nil {
					return nil, fmt.Errorf("tokens: colors.%s.%s: %w", m.Key, am.Key, err)
				}
				tok.PerAppearance[am.Key] = c
				tok.appearances = append(tok.appearances, am.Key)
			}
			if len(tok.appearances) == 0 {
				return nil, fmt.Errorf("tokens: colors.%s: empty appearance map", m.Key)
			}
		} else {
			c, err := colorValue(m.Val)
			if err != nil {
				return nil, fmt.Errorf("tokens: colors.%s: %w", m.Key, err)
			}
			tok.Flat = c
		}
		t.colors[m.Key] = tok
		t.order = append(t.order, m.Key)
	}
	if len(t.order) == 0 {
		return nil, errors.New("tokens: colors is empty")
	}
	return t, nil
}

// Names lists the colour tokens in document order.
func (t *Tokens) Names() []string {
	return append([]string(nil), t.order...)
}

// Appearances lists every appearance some split token defines, in the order they are
// first written, so reports follow the design system's own ordering ("light" before
// "dark" when written that way). It is empty when every token is flat.
func (t *Tokens) Appearances() []string {
	var out []string
	seen := map[string]bool{}
	for _, name := range t.order {
		for _, a := range t.colors[name].appearances {
			if !seen[a] {
				seen[a] = true
				out = append(out, a)
			}
		}
	}
	return out
}

// Resolve returns the colour of a token in an appearance. A flat token answers for
// every appearance. A split token that lacks the appearance is an error, not a
// fallback to its other value: using the dark value to check light mode would report a
// ratio nobody sees.
func (t *Tokens) Resolve(name, appearance string) (Color, error) {
	tok, ok := t.colors[name]
	if !ok {
		return Color{}, fmt.Errorf("token colour %q is not in tokens.json", name)
	}
	if tok.PerAppearance == nil {
		return tok.Flat, nil
	}
	c, ok := tok.PerAppearance[appearance]
	if !ok {
		return Color{}, fmt.Errorf("token colour %q has no value for appearance %q", name, appearance)
	}
	return c, nil
}

// Whitelist exempts a pair from failing in some appearances (a documented WCAG reason,
// such as placeholder text held to the large-text minimum). The pair is still measured
// and reported.
type Whitelist struct {
	// All is set by "whitelist": true.
	All bool
	// Appearances lists the exempt appearances.
	Appearances []string
}

// Covers reports whether the whitelist exempts an appearance.
func (w Whitelist) Covers(appearance string) bool {
	return w.All || slices.Contains(w.Appearances, appearance)
}

// ContrastPair is one declared pair of contrast-pairs.json.
type ContrastPair struct {
	// FG and BG are token names.
	FG, BG string
	// Min is the minimum ratio, DefaultMinContrast when not given.
	Min float64
	// Note is the author's justification, carried into reports.
	Note string
	// Whitelist lists exempt appearances.
	Whitelist Whitelist
}

// ParseContrastPairs reads contrast-pairs.json: {"pairs": [{fg, bg, min?, note?,
// whitelist?}]}. Unknown keys are errors (a misspelt "minimum" would otherwise leave
// the pair at the default without anyone noticing); "_"-prefixed keys are comments.
// min must lie in [1,21], the range a ratio can take.
func ParseContrastPairs(data []byte) ([]ContrastPair, error) {
	root, err := decodeJSON(data, true)
	if err != nil {
		return nil, fmt.Errorf("contrast pairs: %w", err)
	}
	obj, ok := root.(jsonObject)
	if !ok {
		return nil, fmt.Errorf("contrast pairs: top level is %s, want an object", kindOf(root))
	}
	var list []any
	found := false
	for _, m := range obj {
		switch {
		case m.Key == "pairs":
			if list, ok = m.Val.([]any); !ok {
				return nil, fmt.Errorf("contrast pairs: pairs is %s, want an array", kindOf(m.Val))
			}
			found = true
		case isComment(m.Key):
		default:
			return nil, fmt.Errorf("contrast pairs: unknown key %q", m.Key)
		}
	}
	if !found {
		return nil, errors.New("contrast pairs: no \"pairs\" array")
	}
	pairs := make([]ContrastPair, 0, len(list))
	for i, e := range list {
		p, err := contrastPair(e)
		if err != nil {
			return nil, fmt.Errorf("contrast pairs: pairs[%d]: %w", i, err)
		}
		pairs = append(pairs, p)
	}
	return pairs, nil
}

func contrastPair(v any) (ContrastPair, error) {
	obj, ok := v.(jsonObject)
	if !ok {
		return ContrastPair{}, fmt.Errorf("is %s, want an object", kindOf(v))
	}
	p := ContrastPair{Min: DefaultMinContrast}
	for _, m := range obj {
		switch m.Key {
		case "fg", "bg":
			s, ok := m.Val.(string)
			if !ok || s == "" {
				return p, fmt.Errorf("%s must be a token name, got %s", m.Key, describe(m.Val))
			}
			if m.Key == "fg" {
				p.FG = s
			} else {
				p.BG = s
			}
		case "min":
			f, ok := numberValue(m.Val)
			if !ok || f < 1 || f > 21 {
				return p, fmt.Errorf("min must be a number in [1,21], got %s", describe(m.Val))
			}
			p.Min = f
		case "note":
			s, ok := m.Val.(string)
			if !ok {
				return p, fmt.Errorf("note must be a string, got %s", kindOf(m.Val))
			}
			p.Note = s
		case "whitelist":
			switch w := m.Val.(type) {
			case bool:
				p.Whitelist.All = w
			case []any:
				list, ok := stringList(w)
				if !ok {
					return p, errors.New("whitelist must be true, false or an array of appearance names")
				}
				p.Whitelist.Appearances = list
			default:
				return p, fmt.Errorf("whitelist must be true, false or an array of appearance names, got %s", kindOf(m.Val))
			}
		default:
			if !isComment(m.Key) {
				return p, fmt.Errorf("unknown key %q", m.Key)
			}
		}
	}
	if p.FG == "" || p.BG == "" {
		return p, errors.New("fg and bg are required")
	}
	return p, nil
}

// ContrastResult is one pair measured in one appearance.
type ContrastResult struct {
	// FG and BG are the token names of the pair.
	FG string `json:"fg"`
	BG string `json:"bg"`
	// Appearance is the appearance the colours were resolved in.
	Appearance string `json:"appearance"`
	// Min is the pair's minimum ratio.
	Min float64 `json:"min"`
	// Ratio is rounded to two decimals for display; Status was decided on Exact.
	Ratio float64 `json:"ratio"`
	// Status is pass, fail or whitelisted.
	Status string `json:"status"`
	// Note is the pair's justification from contrast-pairs.json, if any.
	Note string `json:"note,omitempty"`
	// Exact is the unrounded ratio the status was decided on.
	Exact float64 `json:"-"`
}

// ContrastReport is the token_contrast gate's full answer.
type ContrastReport struct {
	// Pairs has one entry per pair and appearance, pair-major, in declaration order.
	Pairs []ContrastResult `json:"pairs"`
	// Failures repeats the failing entries of Pairs.
	Failures []ContrastResult `json:"failures"`
	// Pass is true when nothing failed (whitelisted entries never fail).
	Pass bool `json:"pass"`
}

// GateStatus maps the report onto the gate-result's token_contrast value.
func (r *ContrastReport) GateStatus() GateStatus {
	if r.Pass {
		return GatePass
	}
	return GateFail
}

// CheckContrast measures every declared pair in every appearance. With appearances
// empty it checks the ones the tokens define, or DefaultAppearance when every token is
// flat. A pair fails when its exact ratio is below its minimum; a whitelisted
// appearance is measured but never fails. The error covers input that cannot be
// measured at all: an unknown token, a split token without the appearance, or a
// translucent background (its colour on screen depends on what lies beneath).
func CheckContrast(tokens *Tokens, pairs []ContrastPair, appearances []string) (*ContrastReport, error) {
	if len(appearances) == 0 {
		appearances = tokens.Appearances()
	}
	if len(appearances) == 0 {
		appearances = []string{DefaultAppearance}
	}
	rep := &ContrastReport{Pairs: []ContrastResult{}, Failures: []ContrastResult{}, Pass: true}
	for i, p := range pairs {
		for _, app := range appearances {
			fg, err := tokens.Resolve(p.FG, app)
			if err != nil {
				return nil, fmt.Errorf("pair %d (%s on %s): %w", i, p.FG, p.BG, err)
			}
			bg, err := tokens.Resolve(p.BG, app)
			if err != nil {
				return nil, fmt.Errorf("pair %d (%s on %s): %w", i, p.FG, p.BG, err)
			}
			if bg.A < 1 {
				return nil, fmt.Errorf("pair %d (%s on %s), %s: background alpha %s: contrast needs an opaque background",
					i, p.FG, p.BG, app, strconv.FormatFloat(bg.A, 'g', 4, 64))
			}
			ratio := ContrastRatio(fg, bg)
			res := ContrastResult{FG: p.FG, BG: p.BG, Appearance: app, Min: p.Min, Ratio: round2(ratio), Exact: ratio, Note: p.Note}
			switch {
			case p.Whitelist.Covers(app):
				res.Status = ContrastWhitelisted
			case ratio >= p.Min:
				res.Status = ContrastPass
			default:
				res.Status = ContrastFail
				rep.Failures = append(rep.Failures, res)
				rep.Pass = false
			}
			rep.Pairs = append(rep.Pairs, res)
		}
	}
	return rep, nil
}
