package records

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"
)

// A job record as the all-in-one mode stores it (one AC of `tribunal bench`): the faster
// decoder must read it, and what tribunal encodes from it, exactly as encoding/json does,
// and must not keep pointers into the bytes it read (a KV entry's buffer).
func TestUnmarshalAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("testdata/job.json")
	if err != nil {
		t.Fatal(err)
	}
	var want, got Job
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	own := append([]byte(nil), data...)
	if err := Unmarshal(own, &got); err != nil {
		t.Fatal(err)
	}
	for i := range own {
		own[i] = 'x'
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded records differ:\n got %+v\nwant %+v", got, want)
	}
	if len(got.Result) == 0 || len(got.Calls) == 0 || got.Decided == nil || got.SubmittedAt.IsZero() {
		t.Fatalf("the fixture lost its substance: %+v", got)
	}
	gb, _ := json.Marshal(&got)
	wb, _ := json.Marshal(&want)
	if string(gb) != string(wb) {
		t.Fatalf("re-encoded records differ:\n got %s\nwant %s", gb, wb)
	}
	var batch Batch
	for _, bad := range []string{``, `{`, `{"tenant":1}`, `[]`, `{} x`} {
		if errStd, errFast := json.Unmarshal([]byte(bad), &batch), Unmarshal([]byte(bad), &batch); (errStd == nil) != (errFast == nil) {
			t.Errorf("%q: encoding/json says %v, Unmarshal says %v", bad, errStd, errFast)
		}
	}
}
