package registry

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/batch"
)

var updateSchema = flag.Bool("update-batch-schema", false, "write schemas/batch.schema.json from the registered kinds")

// TestBatchSchemaIsTheKinds: schemas/batch.schema.json, the batch schema teams' editors
// read, is the batch format's common keys with the keys of the kinds in the table, each
// supplied by its kind (stage.Keyed): `go test ./pkg/registry -update-batch-schema`
// writes it again after a kind's keys change.
func TestBatchSchemaIsTheKinds(t *testing.T) {
	path := filepath.Join("..", "..", "schemas", "batch.schema.json")
	want := batch.Schema()
	if *updateSchema {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not the schema of the registered kinds' keys: run go test ./pkg/registry -update-batch-schema", path)
	}
}
