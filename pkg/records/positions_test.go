package records_test

import (
	"fmt"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/records"
)

// TestAddInputKeepsPositionsParallel: positions stay one per input from a record's first
// input on, and a record that began without them (written before them) gains none.
func TestAddInputKeepsPositionsParallel(t *testing.T) {
	var j records.Job
	j.AddInput("a:1", 4)
	j.AddInput("b:2", 0)
	j.AddInput("c:3", 9)
	if got := fmt.Sprint(j.Inputs, j.Positions); got != "[a:1 b:2 c:3] [4 0 9]" {
		t.Errorf("got %s", got)
	}
	old := records.Job{Inputs: []string{"a:1"}}
	old.AddInput("b:2", 7)
	if len(old.Positions) != 0 || len(old.Inputs) != 2 {
		t.Errorf("a record written before positions: got %v %v", old.Inputs, old.Positions)
	}
	var unknown records.Job
	unknown.AddInput("a:1", 0)
	unknown.AddInput("b:2", 7)
	if len(unknown.Positions) != 0 {
		t.Errorf("a record whose first input's position is not known: got %v", unknown.Positions)
	}
}
