package bus

import (
	"encoding/hex"
	"reflect"
	"runtime"
	"testing"
	"time"
)

// testClock is a clock the test moves.
type testClock struct{ t time.Time }

func (c *testClock) now() time.Time { return c.t }

// TestLiveIDsExpireInGenerations: an id is held for at least one horizon after it was
// added and dropped within one horizon and a generation's step, a whole generation at
// once; a restored set counts from when it was taken and is never written to.
func TestLiveIDsExpireInGenerations(t *testing.T) {
	clock := &testClock{t: time.Unix(1e9, 0)}
	restored := NewPublished("S", 8*time.Minute)
	restored.add(testID(0), 1)
	l := newLiveIDs(restored, clock.now)
	l.add(testID(1), 2)
	clock.t = clock.t.Add(2 * time.Minute)
	l.add(testID(2), 3)
	l.add(testID(1), 9) // known: its first store counts
	if restored.Len() != 1 {
		t.Fatalf("restored set holds %d ids, want 1: it takes none", restored.Len())
	}
	if seq, ok := l.seq(testID(1)); !ok || seq != 2 {
		t.Fatalf("id 1: seq %d, %v, want 2", seq, ok)
	}
	clock.t = clock.t.Add(6*time.Minute - time.Nanosecond) // 8 min - 1 ns after the first adds
	for i, want := range []uint64{1, 2, 3} {
		if seq, ok := l.seq(testID(i)); !ok || seq != want {
			t.Fatalf("id %d before the horizon: seq %d, %v, want %d", i, seq, ok, want)
		}
	}
	clock.t = clock.t.Add(time.Minute + time.Nanosecond) // one step past the first adds' horizon
	for i := range 2 {
		if _, ok := l.seq(testID(i)); ok {
			t.Fatalf("id %d still held a horizon and a step after it was added", i)
		}
	}
	if _, ok := l.seq(testID(2)); !ok {
		t.Fatal("id 2 dropped before its horizon")
	}
	clock.t = clock.t.Add(2 * time.Minute)
	if l.len() != 0 || len(l.gens) != 0 {
		t.Fatalf("%d ids in %d generations after every horizon, want none", l.len(), len(l.gens))
	}
	// Other ids than event ids are kept and dropped alike.
	l.add("not-an-event-id", 5)
	if seq, ok := l.seq("not-an-event-id"); !ok || seq != 5 {
		t.Fatalf("other id: seq %d, %v", seq, ok)
	}
}

// TestLiveIDsArePointerFree: a million event ids over one horizon cost the index under
// 48 B each of retained heap, in maps whose keys and values hold no pointer, so the
// collector has nothing in them to mark.
func TestLiveIDsArePointerFree(t *testing.T) {
	const n = 1_000_000
	for _, typ := range []reflect.Type{reflect.TypeFor[map[[16]byte]uint64]().Key(), reflect.TypeFor[map[[16]byte]uint64]().Elem()} {
		if hasPointers(typ) {
			t.Fatalf("%s holds pointers", typ)
		}
	}
	if typ := reflect.TypeOf(Published{}.ids); typ != reflect.TypeFor[map[[16]byte]uint64]() {
		t.Fatalf("event ids kept as %s", typ)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = testID(i)
	}
	clock := &testClock{t: time.Unix(1e9, 0)}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	l := newLiveIDs(NewPublished("S", 8*time.Minute), clock.now)
	for i, id := range ids {
		if i%(n/liveGenerations) == 0 {
			clock.t = clock.t.Add(l.step() + time.Nanosecond) // the ids spread over every generation
		}
		l.add(id, uint64(i+1))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if l.len() != n {
		t.Fatalf("%d ids held, want %d", l.len(), n)
	}
	if len(l.gens) != liveGenerations {
		t.Fatalf("%d generations, want %d", len(l.gens), liveGenerations)
	}
	if reflect.TypeOf(l.gens[0].sealed.slots).Elem() != reflect.TypeFor[liveEntry]() || hasPointers(reflect.TypeFor[liveEntry]()) {
		t.Fatal("sealed generations hold pointers")
	}
	for _, g := range l.gens {
		if len(g.set.other) != 0 {
			t.Fatalf("%d event ids kept as strings", len(g.set.other))
		}
	}
	for _, i := range []int{0, n / 2, n - 1} {
		if seq, ok := l.seq(ids[i]); !ok || seq != uint64(i+1) {
			t.Fatalf("id %d: seq %d, %v", i, seq, ok)
		}
	}
	perID := float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / n
	t.Logf("%d ids in %d generations: %.1f B of heap each", n, len(l.gens), perID)
	if perID > 48 {
		t.Errorf("%.1f B of heap per id, want at most 48", perID)
	}
	runtime.KeepAlive(ids)
	runtime.KeepAlive(l)
}

func hasPointers(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Array:
		return hasPointers(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if hasPointers(t.Field(i).Type) {
				return true
			}
		}
		return false
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint8,
		reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr, reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		return false
	}
	return true
}

// testID is the i-th of distinct event ids: 32 lowercase hex digits.
func testID(i int) string {
	var b [16]byte
	for k := range 8 {
		b[k] = byte(i >> (8 * k))
	}
	b[15] = 0xa5
	return hex.EncodeToString(b[:])
}

// BenchmarkLiveIDs: the index's cost per published id (a miss, then an add) with a
// horizon full of a fast batch's ids, seven sealed generations of 400,000 (1,100 ACs/s, 6
// events each), and the seal of one.
func BenchmarkLiveIDs(b *testing.B) {
	const perGen = 400_000
	clock := &testClock{t: time.Unix(1e9, 0)}
	l := newLiveIDs(NewPublished("S", 8*time.Minute), clock.now)
	i := 0
	for range liveGenerations - 1 {
		for range perGen {
			l.add(testID(i), uint64(i+1))
			i++
		}
		clock.t = clock.t.Add(l.step() + time.Nanosecond)
	}
	b.Run("publish", func(b *testing.B) {
		for b.Loop() {
			id := testID(i)
			if _, ok := l.seq(id); ok {
				b.Fatal("a new id known")
			}
			l.add(id, uint64(i+1))
			i++
		}
	})
	b.Run("seal", func(b *testing.B) {
		for b.Loop() {
			b.StopTimer()
			g := liveGeneration{set: NewPublished("S", time.Minute)}
			for k := range perGen {
				g.set.add(testID(k), uint64(k+1))
			}
			b.StartTimer()
			g.seal()
		}
	})
}
