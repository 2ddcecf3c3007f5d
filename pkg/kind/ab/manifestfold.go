package ab

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/kind"
	"github.com/tribunal-dev/tribunal/pkg/records"
	"github.com/tribunal-dev/tribunal/pkg/spillsort"
)

// Manifest implements kind.Kind: the seed's vote manifest over the batch's comparisons.
func (Kind) Manifest(tenant, batch string) kind.Manifest {
	return &manifestFold{id: "ab-" + tenant + "-" + batch, threshold: DefaultThreshold,
		rows: spillsort.New(func(a, b []byte) bool { return naturalLess(string(a), string(b)) })}
}

// manifestFold is BuildManifest a comparison at a time: each job's comparison is checked
// (checked depends on it alone) and encoded as it is added, and written out in AC order
// (pkg/spillsort), so the fold holds a bounded buffer of rows, not the batch's. The
// suggestions depend on the threshold, which is the last folded job's, and are numbered
// in AC order: they are derived when the manifest is written, from what each row keeps
// of its comparison for them (routeOf), a second read of the rows.
type manifestFold struct {
	id        string
	threshold float64
	rows      *spillsort.Sorter
	val       []byte
	route     []byte
	// err is the first comparison that did not encode, reported when the manifest is.
	err error
}

func (m *manifestFold) Add(j *records.Job) {
	if SpecOf(j.Spec.KindPart) != nil {
		m.threshold = SpecOf(j.Spec.KindPart).Threshold
	}
	r, err := ResultOf(j)
	if err != nil || r == nil {
		return
	}
	c := checked(r.Comparison)
	data, err := json.Marshal(c)
	if err != nil {
		if m.err == nil {
			m.err = err
		}
		return
	}
	// A row is its route's length, its route, then the comparison's JSON.
	route := appendRoute(m.route[:0], &c)
	m.route = route
	m.val = binary.AppendUvarint(m.val[:0], uint64(len(route)))
	m.val = append(append(m.val, route...), data...)
	m.rows.Add([]byte(c.ACID), m.val)
}

// Build implements kind.Manifest: the Manifest's JSON, its comparisons and suggestions
// read from where Add wrote them; nil when no comparison was added.
func (m *manifestFold) Build(at time.Time) any {
	if m.rows.Len() == 0 && m.err == nil {
		return nil
	}
	threshold := m.threshold
	each := func(fn func(route, comparison []byte) error) error {
		if m.err != nil {
			return m.err
		}
		return m.rows.Each(func(_, val []byte) error {
			n, k := binary.Uvarint(val)
			if k <= 0 || uint64(len(val)-k) < n {
				return errors.New("ab manifest: a spilled row does not read back")
			}
			return fn(val[k:k+int(n)], val[k+int(n):])
		})
	}
	return &manifestDoc{
		ReviewID:    m.id,
		Source:      "tribunal",
		GeneratedAt: at.UTC(),
		Status:      ManifestStatus,
		Comparisons: kind.NewRows(func(fn func([]byte) error) error {
			return each(func(_, c []byte) error { return fn(c) })
		}),
		Suggestions: kind.NewRows(func(fn func([]byte) error) error {
			n := 0
			return each(func(route, _ []byte) error {
				c, ok := routeOf(route)
				if !ok {
					return nil
				}
				s, ok := suggestion(c, threshold, n+1)
				if !ok {
					return nil
				}
				n++
				data, err := json.Marshal(s)
				if err != nil {
					return err
				}
				return fn(data)
			})
		}),
		Tribunal: &ManifestExtras{Threshold: threshold},
	}
}

// Close lets go of the fold's rows.
func (m *manifestFold) Close() error { return m.rows.Close() }

// manifestDoc is a Manifest as the fold writes it, field for field in its order
// (TestFoldIsItsGolden in pkg/rulebook holds the two to one encoding).
type manifestDoc struct {
	ReviewID    string          `json:"review_id"`
	Source      string          `json:"source"`
	GeneratedAt time.Time       `json:"generated_at"`
	Status      string          `json:"status"`
	Comparisons kind.Rows       `json:"comparisons"`
	Suggestions kind.Rows       `json:"suggestions"`
	Tribunal    *ManifestExtras `json:"tribunal,omitempty"`
}

// appendRoute keeps what a suggestion is written from of a checked comparison (nothing
// of one that is not compared), exactly: strings as they are, the confidence's bits. A
// decoded JSON copy would not do: a string that is not UTF-8 decodes to another.
func appendRoute(dst []byte, c *Comparison) []byte {
	if c.Status != StatusCompared {
		return dst
	}
	for _, s := range []string{c.ACID, string(c.Winner), c.BiggestGap, c.OursArtifact, c.ReferenceArtifact, string(c.LabelAssignment.A), string(c.LabelAssignment.B)} {
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return binary.LittleEndian.AppendUint64(dst, math.Float64bits(*c.Confidence))
}

// routeOf reads what appendRoute kept back as a compared comparison; false for none.
func routeOf(b []byte) (Comparison, bool) {
	if len(b) == 0 {
		return Comparison{}, false
	}
	var s [7]string
	for i := range s {
		n, k := binary.Uvarint(b)
		s[i] = string(b[k : k+int(n)])
		b = b[k+int(n):]
	}
	conf := math.Float64frombits(binary.LittleEndian.Uint64(b))
	return Comparison{ACID: s[0], Winner: Winner(s[1]), BiggestGap: s[2], OursArtifact: s[3], ReferenceArtifact: s[4],
		LabelAssignment: Assignment{A: Role(s[5]), B: Role(s[6])}, Confidence: &conf, Status: StatusCompared}, true
}
