package audit

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/events"
)

// chainedTypes are the events the pipeline's stages publish: each carries the chain of
// the events it was derived from (events.Envelope.Chain).
var chainedTypes = map[events.Type]bool{
	events.TypeRenderDone: true, events.TypeGatesDone: true, events.TypeGatesFailed: true,
	events.TypeRenderUnchanged: true, events.TypeVerdictEmitted: true,
}

// chainRef is one link of a recorded event's chain: where it is and what it says.
type chainRef struct {
	at    Mismatch
	index int
	link  string
	sha   [32]byte
	// typ is the type of the event the link names, when its id is a step of the job.
	typ events.Type
}

// chain checks every link of an event's digest chain against the recorded events: the
// event each link names must be on the stream with exactly the bytes the chain hashed.
// A link naming an event the replay has not reached yet waits for it (resolve); one
// never reached is reported at the end (unresolved).
func (a *auditor) chain(r *Recorded) {
	ev := r.Event
	if len(ev.Chain) == 0 {
		if chainedTypes[ev.Type] {
			a.note(batchKey{ev.Tenant, ev.BatchID}, "the stages each "+string(ev.Type)+" was derived from", "it carries no digest chain: it was written before chains existed")
		}
		return
	}
	if id, _, _ := events.ParseLink(ev.Chain[len(ev.Chain)-1]); ev.CausationID != "" && id != ev.CausationID {
		a.add(a.at(r, Mismatch{Kind: KindMismatch, Field: "envelope.chain", Recorded: id, Derived: ev.CausationID,
			Detail: "the chain does not end with the event this one was derived from (its cause)"}))
	}
	for i, l := range ev.Chain {
		id, hexSum, _ := events.ParseLink(l)
		sum, _ := hexSHA(hexSum)
		ref := chainRef{at: a.at(r, Mismatch{}), index: i, link: l, sha: sum, typ: linkType(id, ev)}
		if got, seq, ok := a.lookup(id); ok {
			a.compareLink(ref, id, got, seq)
			continue
		}
		a.dangling[id] = append(a.dangling[id], ref)
	}
}

// recordedHash is what the audit kept of a recorded event's hash: all of it, or (for an
// event of a type no chain names) its first 8 bytes.
type recordedHash struct {
	sum  [32]byte
	part bool
}

func (h recordedHash) matches(sum [32]byte) bool {
	if h.part {
		return prefix(h.sum) == prefix(sum)
	}
	return h.sum == sum
}

func (h recordedHash) String() string {
	if h.part {
		return fmt.Sprintf("%x...", h.sum[:8])
	}
	return fmt.Sprintf("%x", h.sum)
}

// lookup finds a recorded event by id: its bytes' hash and where it is.
func (a *auditor) lookup(id string) (recordedHash, uint64, bool) {
	if f, ok := a.forged[id]; ok {
		return recordedHash{sum: f.sha}, f.seq, true
	}
	k := keyOf(id)
	s, ok := a.steps.get(k)
	if !ok {
		return recordedHash{}, 0, false
	}
	if sum, ok := a.linked.get(k); ok {
		return recordedHash{sum: sum}, s.seq(), true
	}
	var h recordedHash
	binary.BigEndian.PutUint64(h.sum[:8], s.sum)
	h.part = true
	return h, s.seq(), true
}

// compareLink reports a link whose event's bytes differ from those it was derived from,
// once per link.
func (a *auditor) compareLink(ref chainRef, id string, got recordedHash, seq uint64) {
	a.decided(batchKey{ref.at.Tenant, ref.at.Batch})
	if got.matches(ref.sha) || a.chained[ref.link] {
		return
	}
	a.chained[ref.link] = true
	m := ref.at
	m.Kind, m.Field = KindMismatch, fmt.Sprintf("envelope.chain[%d]", ref.index)
	m.FromID, m.FromType, m.FromSeq = id, ref.typ, seq
	m.Recorded, m.Derived = got.String(), fmt.Sprintf("%x", ref.sha)
	m.Detail = "the " + describeLink(ref.typ) + " this event was derived from is not the one on the stream: its bytes changed after"
	a.add(m)
}

// resolve checks the links that named the event id before it was recorded.
func (a *auditor) resolve(id string, r *Recorded) {
	refs := a.dangling[id]
	if len(refs) == 0 {
		return
	}
	delete(a.dangling, id)
	sum, _ := hexSHA(r.SHA256)
	for _, ref := range refs {
		a.compareLink(ref, id, recordedHash{sum: sum}, r.Seq)
		m := ref.at
		m.Kind, m.FromID, m.FromType, m.FromSeq = KindOrder, id, r.Event.Type, r.Seq
		m.Detail = fmt.Sprintf("derived from %s %s, which is recorded after it (seq %d)", r.Event.Type, id, r.Seq)
		a.add(m)
	}
}

// unresolved reports the chain links naming an event the stream does not hold: the
// record of what was rendered or gated (render.done, gates.done) was deleted.
func (a *auditor) unresolved() {
	var ids []string
	for id := range a.dangling {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return a.dangling[ids[i]][0].at.Seq < a.dangling[ids[j]][0].at.Seq })
	for _, id := range ids {
		ref := a.dangling[id][0]
		m := ref.at
		m.Kind, m.Field, m.Recorded = KindMissing, fmt.Sprintf("envelope.chain[%d]", ref.index), ref.link
		m.FromID, m.FromType = id, ref.typ
		m.Detail = fmt.Sprintf("the %s this event was derived from (%s) is not on the stream", describeLink(ref.typ), id)
		if n := len(a.dangling[id]); n > 1 {
			m.Detail += fmt.Sprintf(" (named by %d events)", n)
		}
		a.add(m)
	}
}

// linkType names the event a link of ev's chain points at when its id is the
// deterministic id of one of the job's steps.
func linkType(id string, ev events.Event) events.Type {
	for _, t := range []events.Type{events.TypeRenderRequested, events.TypeRenderDone, events.TypeGatesDone, events.TypeJobSubmitted} {
		if events.NewID(t, ev.Tenant, ev.BatchID, ev.JobID, ev.Iteration, events.AttemptStep("", ev.Attempt)) == id {
			return t
		}
	}
	return ""
}

func describeLink(t events.Type) string {
	if t == "" {
		return "event"
	}
	return string(t)
}

// blobRef is one blob an event names: where (its wire path) and what the event says of
// it.
type blobRef struct {
	path string
	blob events.Blob
}

// blobRefs lists every blob a payload names, whatever its kind, by walking its wire form:
// a blob is an object with a sha256, a media type and a size.
func blobRefs(p any) []blobRef {
	tree, err := msgpackTree(p)
	if err != nil {
		return nil
	}
	var out []blobRef
	walkBlobs("", tree, &out)
	return out
}

// walkBlobs finds the blobs in a decoded msgpack tree. It reads the decoder's own types
// (maps keyed by any, integers of every width) rather than a normalized copy: blobRefs
// runs for every render and gates event, and the copy was most of its garbage.
func walkBlobs(path string, v any, out *[]blobRef) {
	switch x := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = e
		}
		walkBlobs(path, m, out)
	case map[string]any:
		sha, okSHA := x["sha256"].(string)
		mt, okMT := x["media_type"].(string)
		if okSHA && okMT {
			size, _ := normalize(x["size"]).(int64)
			*out = append(*out, blobRef{path: path, blob: events.Blob{SHA256: sha, MediaType: mt, Size: size}})
			return
		}
		for _, k := range slices.Sorted(maps.Keys(x)) {
			walkBlobs(join(path, k), x[k], out)
		}
	case []any:
		for i, e := range x {
			walkBlobs(fmt.Sprintf("%s[%d]", path, i), e, out)
		}
	}
}

// artifacts reads back every blob a render or its gates recorded: each must exist, hash
// to its address (the store verifies on read), and have the size and media type the
// event records. The blobs of the job's spec are stored by whoever submitted them, with
// the media type the spec records; a rendered artifact that is such a blob records the
// renderer's classification instead, so its media type is checked once, as the spec's.
// Each blob is streamed through its check and never held.
func (a *auditor) artifacts(r *Recorded) {
	ev := r.Event
	key := passKey{jobKey{ev.Tenant, ev.BatchID, ev.JobID}, ev.Iteration, ev.Attempt}
	var spec *events.JobSpec
	switch p := ev.Payload.(type) {
	case *events.RenderDone:
		if p.Blocked != "" {
			return // blocked because an artifact is missing or unreadable: it rests on none
		}
		spec = &p.Spec
	case *events.GatesFailed:
		if p.Blocked != "" {
			return
		}
	case *events.GatesDone, *events.RenderUnchanged:
	default:
		return
	}
	if spec == nil {
		if rd := a.rendered[key]; rd != nil {
			spec = &rd.Event.Payload.(*events.RenderDone).Spec
		} else if j := a.mem.Job(ev.Tenant, ev.BatchID, ev.JobID); j != nil {
			spec = &j.Spec
		}
	}
	refs := blobRefs(ev.Payload)
	if len(refs) == 0 {
		return
	}
	if a.store == nil {
		a.note(batchKey{ev.Tenant, ev.BatchID}, "the artifacts renders and gates recorded", "the audit was given no blob store")
		return
	}
	sourced := map[string]bool{}
	if spec != nil && ev.Type != events.TypeRenderDone {
		for _, s := range blobRefs(spec) {
			sourced[s.blob.SHA256] = true
		}
	}
	for _, ref := range refs {
		if strings.HasPrefix(ref.path, "spec.") {
			sourced[ref.blob.SHA256] = true
		}
	}
	reported := map[string]bool{}
	for _, ref := range refs {
		b := ref.blob
		res := a.readBack(ev.Tenant, b.SHA256)
		if res.err != nil {
			if reported[b.SHA256] {
				continue
			}
			reported[b.SHA256] = true
			switch {
			case errors.Is(res.err, blob.ErrNotFound), errors.Is(res.err, blob.ErrDigestMismatch), errors.Is(res.err, blob.ErrInvalidRef):
				a.add(a.at(r, Mismatch{Kind: KindUnreadable, Field: ref.path, Recorded: b.SHA256,
					Detail: "the artifact cannot be read back intact: " + res.err.Error()}))
			default:
				a.unverified(r, "artifacts in blob storage", res.err.Error())
			}
			continue
		}
		a.decided(batchKey{ev.Tenant, ev.BatchID})
		if b.Size != res.attrs.Size {
			a.add(a.at(r, with(Mismatch{}, KindMismatch, ref.path+".size", fmt.Sprint(res.attrs.Size), fmt.Sprint(b.Size)).
				withDetail("the blob store holds the artifact with another size than the event records")))
		}
		checkType := strings.HasPrefix(ref.path, "spec.") || !sourced[b.SHA256]
		if checkType && b.MediaType != res.attrs.MediaType && !reported[b.SHA256+" "+b.MediaType] {
			reported[b.SHA256+" "+b.MediaType] = true
			a.add(a.at(r, with(Mismatch{}, KindMismatch, ref.path+".media_type", res.attrs.MediaType, b.MediaType).
				withDetail("the blob store keeps the artifact under another media type than the event records")))
		}
	}
}

// blobCache remembers what reading a blob back showed, so a blob named by a render and
// again by its gates is read once. It is bounded: when full it starts over.
type blobCache struct {
	entries map[blob.Ref]blobResult
}

type blobResult struct {
	attrs blob.Attrs
	err   error
}

// maxCachedBlobs bounds the blob cache (about 250 bytes an entry): it only spares the
// second read of a blob a render and its gates both name.
const maxCachedBlobs = 1 << 14

// readBack streams a blob through the store's digest check once and remembers the
// outcome.
func (a *auditor) readBack(tenant, sha string) blobResult {
	ref := blob.Ref{Tenant: tenant, SHA256: sha}
	if res, ok := a.blobs.entries[ref]; ok {
		return res
	}
	ctx, cancel := a.blobContext()
	defer cancel()
	attrs, err := readThrough(ctx, a.store, ref)
	if len(a.blobs.entries) >= maxCachedBlobs {
		clear(a.blobs.entries)
	}
	res := blobResult{attrs: attrs, err: err}
	a.blobs.entries[ref] = res
	return res
}

// readThrough reads a blob to its end through the store's verifying reader, keeping
// nothing: an error says it is missing or no longer the bytes its address names.
func readThrough(ctx context.Context, store blob.Store, ref blob.Ref) (blob.Attrs, error) {
	if store == nil {
		return blob.Attrs{}, errNoStore
	}
	rc, attrs, err := store.Open(ctx, ref)
	if err != nil {
		return blob.Attrs{}, err
	}
	defer rc.Close()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return blob.Attrs{}, fmt.Errorf("read %s: %w", ref, err)
	}
	return attrs, nil
}
