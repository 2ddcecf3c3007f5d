package kind

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestListFoldBatchOrder: jobs folded in any order are listed in batch order, under the
// header every list manifest has, each row opening with the job's entry; a batch with no
// job of the kind has no manifest.
func TestListFoldBatchOrder(t *testing.T) {
	t.Parallel()
	type row struct {
		ManifestEntry
		Note string `json:"note"`
	}
	f := NewListFold(events.KindCritic, "b1", func(j *records.Job) row {
		return row{ManifestEntry: EntryOf(j), Note: "n-" + j.ACID}
	})
	if f.Build(time.Now()) != nil {
		t.Fatal("an empty fold built a manifest")
	}
	for _, i := range []int{2, 0, 1} {
		f.Add(&records.Job{ACID: []string{"AC-1", "AC-2", "AC-3"}[i], Index: i, Status: events.StatusCompared, BlockReason: "", Judges: []string{"j"}})
	}
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	data, err := json.Marshal(f.Build(at))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"kind":"critic","source":"tribunal","batch_id":"b1","generated_at":"2026-01-02T02:04:05Z","results":[` +
		`{"ac_id":"AC-1","status":"compared","judges":["j"],"note":"n-AC-1"},` +
		`{"ac_id":"AC-2","status":"compared","judges":["j"],"note":"n-AC-2"},` +
		`{"ac_id":"AC-3","status":"compared","judges":["j"],"note":"n-AC-3"}]}`
	if string(data) != want {
		t.Errorf("manifest\n%s\nwant\n%s", data, want)
	}
}

// TestUnmarshalNamesTheJob: a record's part that does not decode is an error naming the
// job and the part; an absent part is no error and no value.
func TestUnmarshalNamesTheJob(t *testing.T) {
	t.Parallel()
	j := &records.Job{Tenant: "team-a", Batch: "b1", ACID: "AC-1"}
	if v, err := Unmarshal[struct{}](j, nil, "critic result"); v != nil || err != nil {
		t.Fatalf("absent part: %v, %v", v, err)
	}
	_, err := Unmarshal[struct{ N int }](j, json.RawMessage(`{"N":"x"}`), "critic result")
	if err == nil || !strings.Contains(err.Error(), j.Key()) || !strings.Contains(err.Error(), "critic result") {
		t.Fatalf("error %v, want one naming %s and the critic result", err, j.Key())
	}
	if err := Marshal(j, &j.Result, "critic result", struct{ N int }{7}); err != nil || string(j.Result) != `{"N":7}` {
		t.Fatalf("Marshal: %s, %v", j.Result, err)
	}
	if err := Marshal(j, &j.Result, "critic result", func() {}); err == nil || string(j.Result) != `{"N":7}` {
		t.Fatalf("a part that does not encode: %v, and the record's part became %s", err, j.Result)
	}
}

// TestUnmarshalMemoized: between a record's Memoize and Forget, its Result and Loop are
// decoded once and every reader gets that value; new bytes in the field are decoded
// anew; outside Memoize, and for bytes that only equal the field's, each read decodes
// its own value, so a rule changing what it read changes nothing another reader sees.
func TestUnmarshalMemoized(t *testing.T) {
	t.Parallel()
	type res struct{ N int }
	j := &records.Job{Tenant: "team-a", Batch: "b1", ACID: "AC-1", Result: json.RawMessage(`{"N":1}`), Loop: json.RawMessage(`{"N":7}`)}
	read := func(data json.RawMessage) *res {
		t.Helper()
		v, err := Unmarshal[res](j, data, "result")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if a, b := read(j.Result), read(j.Result); a == b {
		t.Fatal("outside Memoize two reads share one value")
	}
	if !j.Memoize() || j.Memoize() {
		t.Fatal("Memoize: want true when it begins, false inside an outer one")
	}
	a := read(j.Result)
	if b := read(j.Result); a != b || a.N != 1 {
		t.Fatalf("inside Memoize: %p %+v and %p %+v, want one value N=1", a, a, b, b)
	}
	if l := read(j.Loop); l == a || l.N != 7 || read(j.Loop) != l {
		t.Fatalf("Loop: %+v, want its own value N=7, kept", l)
	}
	if c := read(append(json.RawMessage(nil), j.Result...)); c == a {
		t.Fatal("a copy of the bytes was answered from the memo")
	}
	if err := Marshal(j, &j.Result, "result", res{N: 2}); err != nil {
		t.Fatal(err)
	}
	if b := read(j.Result); b == a || b.N != 2 {
		t.Fatalf("after the result changed: %+v, want N=2 decoded anew", b)
	}
	j.Forget()
	if a, b := read(j.Result), read(j.Result); a == b || !reflect.DeepEqual(j, &records.Job{Tenant: "team-a", Batch: "b1", ACID: "AC-1", Result: j.Result, Loop: j.Loop}) {
		t.Fatal("after Forget the record still remembers")
	}
}
