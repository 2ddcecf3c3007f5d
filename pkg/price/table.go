package price

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed prices.yaml
var defaultTable []byte

// AnyProvider, as a price's provider, prices the model whichever provider serves it (a
// `--price model=...` that names no provider).
const AnyProvider = "*"

// Table is an effective price table: the shipped default or an operator's file, with the
// command line's per-model prices over it. Its Version names exactly these prices, so
// every verdict says which prices its cost was computed with.
type Table struct {
	// Date and Source say where the prices come from ("2025-08-07", the pricing page),
	// "" for a file that says nothing; an override notes itself in Source.
	Date   string
	Source string
	prices map[key]Price
}

type key struct{ provider, model string }

// fileTable is a price table's YAML (or JSON) form.
type fileTable struct {
	Date      string                   `yaml:"date"`
	Source    string                   `yaml:"source"`
	Currency  string                   `yaml:"currency"`
	Providers map[string]*fileProvider `yaml:"providers"`
}

type fileProvider struct {
	BatchDiscountPercent int                   `yaml:"batch_discount_percent"`
	Models               map[string]*fileModel `yaml:"models"`
}

type fileModel struct {
	Input       yaml.Node `yaml:"input"`
	CachedInput yaml.Node `yaml:"cached_input"`
	Output      yaml.Node `yaml:"output"`
	// BatchDiscountPercent overrides the provider's for one model.
	BatchDiscountPercent *int `yaml:"batch_discount_percent"`
}

// Default is the shipped table (prices.yaml: public list prices, with their date and
// source).
func Default() *Table {
	t, err := Parse(defaultTable, "the default price table")
	if err != nil {
		panic("price: the shipped table does not parse: " + err.Error())
	}
	return t
}

// Load reads an operator's price table file (YAML or JSON, the shape of the shipped
// prices.yaml). It replaces the default whole: a model the file does not price is
// unpriced, so what a bill was computed with is the file, not a merge of two tables.
func Load(path string) (*Table, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("price table: %w", err)
	}
	t, err := Parse(data, path)
	if err != nil {
		return nil, err
	}
	if t.Source == "" {
		t.Source = path
	}
	return t, nil
}

// Parse reads a price table; name names it in errors.
func Parse(data []byte, name string) (*Table, error) {
	var f fileTable
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("price table %s: %w", name, err)
	}
	if f.Currency != "" && !strings.EqualFold(f.Currency, "USD") {
		return nil, fmt.Errorf("price table %s: currency %q: only USD is priced", name, f.Currency)
	}
	t := &Table{Date: f.Date, Source: f.Source, prices: map[key]Price{}}
	for _, pname := range slices.Sorted(maps.Keys(f.Providers)) {
		fp := f.Providers[pname]
		if fp == nil {
			continue
		}
		if err := checkDiscount(fp.BatchDiscountPercent); err != nil {
			return nil, fmt.Errorf("price table %s: providers.%s.batch_discount_percent: %w", name, pname, err)
		}
		for _, mname := range slices.Sorted(maps.Keys(fp.Models)) {
			fm := fp.Models[mname]
			where := fmt.Sprintf("price table %s: providers.%s.models.%s", name, pname, mname)
			if fm == nil {
				return nil, fmt.Errorf("%s: want input, cached_input and output", where)
			}
			var p Price
			for _, f := range []struct {
				field string
				node  *yaml.Node
				dst   *Rate
			}{{"input", &fm.Input, &p.Input}, {"cached_input", &fm.CachedInput, &p.CachedInput}, {"output", &fm.Output, &p.Output}} {
				if f.node == nil || f.node.Kind != yaml.ScalarNode {
					return nil, fmt.Errorf("%s.%s: missing (USD per million tokens)", where, f.field)
				}
				r, err := ParseRate(f.node.Value)
				if err != nil {
					return nil, fmt.Errorf("%s.%s: %w", where, f.field, err)
				}
				*f.dst = r
			}
			p.BatchDiscountPercent = fp.BatchDiscountPercent
			if fm.BatchDiscountPercent != nil {
				if err := checkDiscount(*fm.BatchDiscountPercent); err != nil {
					return nil, fmt.Errorf("%s.batch_discount_percent: %w", where, err)
				}
				p.BatchDiscountPercent = *fm.BatchDiscountPercent
			}
			t.prices[key{pname, mname}] = p
		}
	}
	return t, nil
}

func checkDiscount(p int) error {
	if p < 0 || p > 100 {
		return fmt.Errorf("want 0 to 100, got %d", p)
	}
	return nil
}

// With is t with the command line's prices over it, each "[provider/]model=in/cached/out"
// in USD per million tokens, optionally "/batch%" ("gpt-4o=2.50/1.25/10.00/50"). A price
// naming no provider prices the model for every provider. t is left as it was.
func (t *Table) With(overrides []string) (*Table, error) {
	out := &Table{Date: t.Date, Source: t.Source, prices: maps.Clone(t.prices)}
	if out.prices == nil {
		out.prices = map[key]Price{}
	}
	for _, o := range overrides {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		name, spec, ok := strings.Cut(o, "=")
		if !ok || strings.TrimSpace(name) == "" {
			return nil, fmt.Errorf("--price %q: want [provider/]model=input/cached/output (USD per million tokens)", o)
		}
		k := key{AnyProvider, strings.TrimSpace(name)}
		if pr, m, ok := strings.Cut(k.model, "/"); ok {
			k = key{pr, m}
		}
		parts := strings.Split(spec, "/")
		if len(parts) != 3 && len(parts) != 4 {
			return nil, fmt.Errorf("--price %q: want input/cached/output[/batch discount %%], got %d numbers", o, len(parts))
		}
		var p Price
		for i, dst := range []*Rate{&p.Input, &p.CachedInput, &p.Output} {
			r, err := ParseRate(parts[i])
			if err != nil {
				return nil, fmt.Errorf("--price %q: %w", o, err)
			}
			*dst = r
		}
		if len(parts) == 4 {
			var d int
			if _, err := fmt.Sscanf(strings.TrimSuffix(strings.TrimSpace(parts[3]), "%"), "%d", &d); err != nil || checkDiscount(d) != nil {
				return nil, fmt.Errorf("--price %q: batch discount %q: want a whole percentage 0 to 100", o, parts[3])
			}
			p.BatchDiscountPercent = d
		} else if have, ok := out.prices[key{k.provider, k.model}]; ok {
			p.BatchDiscountPercent = have.BatchDiscountPercent
		}
		out.prices[k] = p
		out.Source = strings.TrimSpace(out.Source + " + --price " + name)
	}
	return out, nil
}

// snapshot is a dated model snapshot's suffix: "gpt-4o-2024-08-06" is priced as "gpt-4o".
var snapshot = regexp.MustCompile(`-\d{4}-\d{2}-\d{2}$`)

// ScriptedProvider is the scripted judge's provider name (pkg/judge/scripted).
const ScriptedProvider = "scripted"

// RecordedReason is why the scripted judge's calls cost nothing: it answers from recorded
// answers and asks no provider. Costs say so (Sum.Recorded) rather than showing them
// unpriced, or free with no reason.
const RecordedReason = "recorded answers"

// Recorded reports whether provider's calls are answered from recorded answers, priced
// at zero whatever the table (RecordedReason).
func Recorded(provider string) bool { return provider == ScriptedProvider }

// Lookup is the price of provider's model: the provider's own entry, else one for any
// provider, each tried for the model and then for its undated family. false: unpriced.
// A provider answering from recorded answers (Recorded) is priced at zero.
func (t *Table) Lookup(provider, model string) (Price, bool) {
	if Recorded(provider) {
		return Price{}, true
	}
	if t == nil {
		return Price{}, false
	}
	for _, m := range []string{model, snapshot.ReplaceAllString(model, "")} {
		for _, pr := range []string{provider, AnyProvider} {
			if p, ok := t.prices[key{pr, m}]; ok {
				return p, true
			}
		}
	}
	return Price{}, false
}

// Version names the table's prices: "prices-" and 12 hex characters of the SHA-256 of
// every entry. Two tables with the same prices have the same version, whatever their
// files looked like; a changed price changes it.
func (t *Table) Version() string {
	if t == nil {
		return ""
	}
	h := sha256.New()
	for _, k := range t.keys() {
		p := t.prices[k]
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%d\x00%d\x00%d\n", k.provider, k.model, p.Input, p.CachedInput, p.Output, p.BatchDiscountPercent)
	}
	return "prices-" + hex.EncodeToString(h.Sum(nil))[:12]
}

func (t *Table) keys() []key {
	ks := slices.Collect(maps.Keys(t.prices))
	slices.SortFunc(ks, func(a, b key) int {
		if c := strings.Compare(a.provider, b.provider); c != 0 {
			return c
		}
		return strings.Compare(a.model, b.model)
	})
	return ks
}

// Entry is one priced model, for listings.
type Entry struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Price
}

// Entries lists the table's prices by provider and model.
func (t *Table) Entries() []Entry {
	var out []Entry
	for _, k := range t.keys() {
		out = append(out, Entry{Provider: k.provider, Model: k.model, Price: t.prices[k]})
	}
	return out
}
