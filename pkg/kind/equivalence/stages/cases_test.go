package stages

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/batch"
)

// TestLoadCasesFile: a cases file is read strictly; every problem names the file or the
// case and the field.
func TestLoadCasesFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		// wantErr is a substring of the error; "" wants the cases loaded.
		wantErr string
	}{
		{"good", "- id: c1\n  input: hello\n  tag: happy\n- id: c2\n  input: \"\"\n  tag: edge\n", ""},
		{"misspelled key", "- id: c1\n  inptu: hello\n  tag: happy\n", "cases_file cases.yaml: line 2: field inptu not found"},
		{"bad tag", "- id: c1\n  input: x\n  tag: sad\n", "cases[0].tag"},
		{"bad id", "- id: \"c 1\"\n  input: x\n  tag: happy\n", "cases[0].id"},
		{"empty file", "", "no cases"},
		{"not a list", "id: c1\n", "cases.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "cases.yaml"), []byte(tt.body), 0o644); err != nil {
				t.Fatal(err)
			}
			b := &batch.Batch{Path: filepath.Join(dir, "batch.yaml"), Dir: dir}
			got, err := loadCases(context.Background(), b, batch.AC{ID: "EQ-1", Part: &Entry{CasesFile: "cases.yaml"}})
			if tt.wantErr == "" {
				if err != nil || len(got) != 2 || got[1].Tag != "edge" {
					t.Fatalf("loadCases = %+v, %v; want two cases", got, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("loadCases err = %v; want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
