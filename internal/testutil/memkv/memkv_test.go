package memkv_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/tribunal-dev/tribunal/internal/testutil/memkv"
	"github.com/tribunal-dev/tribunal/internal/testutil/natstest"
	"github.com/tribunal-dev/tribunal/pkg/kv"
)

// TestConformance runs the same behaviour against the in-memory bucket and a JetStream
// bucket, so handler tests on memkv mean what they would mean on the broker.
func TestConformance(t *testing.T) {
	t.Run("memkv", func(t *testing.T) { conformance(t, memkv.New("t")) })
	t.Run("jetstream", func(t *testing.T) {
		_, js := natstest.Start(t).Connect(t)
		kv, err := js.CreateKeyValue(context.Background(), jetstream.KeyValueConfig{Bucket: "t"})
		if err != nil {
			t.Fatal(err)
		}
		conformance(t, kv)
	})
}

func conformance(t *testing.T, bucket kv.KV) {
	ctx := context.Background()
	if _, err := bucket.Get(ctx, "a.b.c"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("get missing: %v", err)
	}
	r1, err := bucket.Create(ctx, "a.b.c", []byte("1"))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	if _, err := bucket.Create(ctx, "a.b.c", []byte("2")); !errors.Is(err, jetstream.ErrKeyExists) {
		t.Fatalf("create over a live key: %v", err)
	}
	r2, err := bucket.Update(ctx, "a.b.c", []byte("2"), r1)
	if err != nil || r2 <= r1 {
		t.Fatalf("update at its revision: %d %v", r2, err)
	}
	if _, err := bucket.Update(ctx, "a.b.c", []byte("3"), r1); !kv.IsConflict(err) {
		t.Fatalf("stale update must be a conflict, got %v", err)
	}
	e, err := bucket.Get(ctx, "a.b.c")
	if err != nil || string(e.Value()) != "2" || e.Revision() != r2 || e.Key() != "a.b.c" {
		t.Fatalf("get: %v", err)
	}
	if _, err := bucket.Put(ctx, "a.x.c", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Put(ctx, "a.b.d", []byte("d")); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Put(ctx, "a.b.gone", []byte("g")); err != nil {
		t.Fatal(err)
	}
	if err := bucket.Delete(ctx, "a.b.gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := bucket.Get(ctx, "a.b.gone"); !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatalf("get deleted: %v", err)
	}
	if _, err := bucket.Create(ctx, "a.b.gone", []byte("again")); err != nil {
		t.Fatalf("create over a deleted key: %v", err)
	}
	if err := bucket.Delete(ctx, "a.b.gone"); err != nil {
		t.Fatal(err)
	}
	l, err := bucket.ListKeysFiltered(ctx, "a.b.*", "z.>")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range l.Keys() {
		keys = append(keys, k)
	}
	_ = l.Stop()
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"a.b.c", "a.b.d"}) {
		t.Fatalf("list keys: %v", keys)
	}
	for filter, want := range map[string][]string{
		"a.b.*": {"a.b.c", "a.b.d"},
		"a.*.c": {"a.b.c", "a.x.c"},
		"a.>":   {"a.b.c", "a.x.c", "a.b.d"},
		"z.*":   nil,
	} {
		w, err := bucket.Watch(ctx, filter, jetstream.IgnoreDeletes())
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for e := range w.Updates() {
			if e == nil {
				break
			}
			got = append(got, e.Key())
		}
		_ = w.Stop()
		if len(got) != len(want) {
			t.Fatalf("watch %s: got %v, want %v", filter, got, want)
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("watch %s: got %v, want %v (in revision order)", filter, got, want)
			}
		}
	}
}
