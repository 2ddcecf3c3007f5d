// Package handlertest is the handler tier of the services' tests: in-memory buckets
// (memkv), a file blob store, batches submitted through the real client, and a driver
// that hands events to handlers as the router would (encoded, decoded and chained by
// payload digest) without a broker. Anything about delivery itself (redelivery timing,
// dead-letter subjects, consumers) is tested against a real NATS server elsewhere.
package handlertest

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/bus"
	"github.com/tribunal-dev/tribunal/pkg/client"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/judge/scripted"
	"github.com/tribunal-dev/tribunal/pkg/registry"
)

// Env is what the services share: buckets and a blob store.
type Env struct {
	Buckets bus.Buckets
	Store   blob.Store
}

// New returns empty in-memory buckets and a file blob store in a temporary folder.
func New(t testing.TB) *Env {
	t.Helper()
	st, err := fileblob.New(t.TempDir(), fileblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return &Env{Buckets: memkv.Buckets(), Store: st}
}

// Submitted submits the batch file at path through the client, uploading its artifacts
// to the blob store, and returns the events it would have published: batch.opened, then
// one job.submitted per job.
func (e *Env) Submitted(t testing.TB, path, tenant, batchID string) []events.Event {
	t.Helper()
	b, err := batch.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var pub capture
	sub := client.Submitter{Pub: &pub, Store: e.Store}
	if _, err := sub.Submit(context.Background(), b, tenant, batchID); err != nil {
		t.Fatal(err)
	}
	return pub.events
}

type capture struct{ events []events.Event }

func (c *capture) Publish(_ string, msgs ...*message.Message) error {
	for _, m := range msgs {
		ev, err := events.Decode(m.Payload)
		if err != nil {
			return err
		}
		c.events = append(c.events, ev)
	}
	return nil
}

// Handler is a service's event handler (bus.Handler).
type Handler = bus.Handler

// Wire is an event as a stream stores it: the bytes and what they decode to.
type Wire struct {
	Event events.Event
	Data  []byte
}

// Deliver hands ev to h as the router does: through the wire encoding, with the payload
// digest the aggregator chains, and returns what h published, each decoded again.
func Deliver(ctx context.Context, h Handler, ev events.Event) ([]events.Event, error) {
	w, err := Encode(ev)
	if err != nil {
		return nil, err
	}
	out, err := deliver(ctx, h, w)
	return eventsOf(out), err
}

// Encode is ev as the bus would carry it.
func Encode(ev events.Event) (Wire, error) {
	data, err := events.Encode(ev)
	if err != nil {
		return Wire{}, fmt.Errorf("encode %s: %w", ev.Type, err)
	}
	in, err := events.Decode(data)
	if err != nil {
		return Wire{}, fmt.Errorf("decode %s: %w", ev.Type, err)
	}
	return Wire{Event: in, Data: data}, nil
}

func deliver(ctx context.Context, h Handler, w Wire) ([]Wire, error) {
	out, err := h(bus.WithPayloadDigest(ctx, w.Data), w.Event)
	if err != nil {
		return nil, err
	}
	wires := make([]Wire, len(out))
	for i, o := range out {
		if wires[i], err = Encode(o); err != nil {
			return nil, fmt.Errorf("output %d: %w", i, err)
		}
	}
	return wires, nil
}

func eventsOf(ws []Wire) []events.Event {
	out := make([]events.Event, len(ws))
	for i, w := range ws {
		out[i] = w.Event
	}
	return out
}

// Drive delivers evs, and everything the handlers publish in turn, to the handler for
// each event's type until nothing is left, failing the test on a handler error. It
// returns every event published, inputs first; events no handler takes are kept too.
func Drive(t testing.TB, handlers map[events.Type]Handler, evs ...events.Event) []events.Event {
	t.Helper()
	return eventsOf(Record(t, handlers, evs...))
}

// Record is Drive returning the stream as stored: every event's bytes in publishing
// order, what an audit replays.
func Record(t testing.TB, handlers map[events.Type]Handler, evs ...events.Event) []Wire {
	t.Helper()
	var all, queue []Wire
	for _, ev := range evs {
		w, err := Encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		all, queue = append(all, w), append(queue, w)
	}
	for steps := 0; len(queue) > 0; steps++ {
		if steps > 100000 {
			t.Fatal("handlers keep publishing: a loop")
		}
		w := queue[0]
		queue = queue[1:]
		h, ok := handlers[w.Event.Type]
		if !ok {
			continue
		}
		out, err := deliver(context.Background(), h, w)
		if err != nil {
			t.Fatalf("%s %s (%s): %v", w.Event.Type, w.Event.ID, w.Event.JobID, err)
		}
		all = append(all, out...)
		queue = append(queue, out...)
	}
	return all
}

// Of returns the events of type typ, in order.
func Of(evs []events.Event, typ events.Type) []events.Event {
	var out []events.Event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// Job returns the events of job, in order.
func Job(evs []events.Event, job string) []events.Event {
	var out []events.Event
	for _, e := range evs {
		if e.JobID == job {
			out = append(out, e)
		}
	}
	return out
}

// Quickstart is the path of the quickstart batch, every kind but rubric in one file.
func Quickstart() string { return filepath.Join(root(), "examples", "quickstart", "batch.yaml") }

// QuickstartProvider is the scripted judge `tribunal run` uses on the quickstart: its
// recorded answers, and fixed answers for the kinds it has none for.
func QuickstartProvider(t testing.TB) *scripted.Provider {
	t.Helper()
	fixtures, named := registry.Fixtures()
	p, err := scripted.New(scripted.Options{Fixtures: fixtures, Named: named,
		AnswersFile: filepath.Join(root(), "examples", "quickstart", "answers.json")})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// root is the repository's folder.
func root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
