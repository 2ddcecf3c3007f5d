package batch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// parted stands for the registry's answer (stage.Selecting): rubric's entries have parts.
func parted(b *Batch) func(AC) bool {
	return func(ac AC) bool { return b.KindOf(ac) == "rubric" }
}

func rubricBatch() *Batch {
	return &Batch{Path: "batch.yaml", File: File{ACs: []AC{{ID: "tasks", Kind: "rubric"}, {ID: "tasks--x", Kind: "rubric"},
		{ID: "AC-1"}, {ID: "other", Kind: "rubric"}}}}
}

// TestSelectAcceptsViewIDs: --ac takes a rubric view's job id as well as an AC id: the
// AC is kept with that view alone (the longest AC id that prefixes it owns it); an id
// that names neither is still an error.
func TestSelectAcceptsViewIDs(t *testing.T) {
	b := rubricBatch()
	if err := b.Select([]string{"tasks--list--populated--dark", "tasks--x--list--empty--light", "AC-1"}, parted(b)); err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for _, ac := range b.ACs {
		got[ac.ID] = ac.Views()
	}
	want := map[string][]string{"tasks": {"tasks--list--populated--dark"}, "tasks--x": {"tasks--x--list--empty--light"}, "AC-1": nil}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("selected %v", got)
	}
	b = rubricBatch()
	if err := b.Select([]string{"AC-1--list--a--b"}, parted(b)); err == nil || !strings.Contains(err.Error(), "no such AC") {
		t.Fatalf("a view id of an AC that is not rubric: %v", err)
	}
}

// TestSelectTargets: --target keeps the rubric ACs whose feature has the target, narrowed
// to it, and leaves every other AC out; a target no feature has names the targets there
// are; an AC whose spec cannot be read is kept, to be reported blocked.
func TestSelectTargets(t *testing.T) {
	targets := map[string][]string{"tasks": {"list", "detail"}, "tasks--x": {"list"}, "other": {"home"}}
	of := func(ac AC) ([]string, bool, error) {
		if ac.Kind != "rubric" {
			return nil, false, nil
		}
		if ts, ok := targets[ac.ID]; ok {
			return ts, true, nil
		}
		return nil, true, errors.New("unreadable")
	}
	b := rubricBatch()
	if err := b.SelectTargets([]string{"list"}, of); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ac := range b.ACs {
		got = append(got, ac.ID+":"+strings.Join(ac.Targets(), "+"))
	}
	if !reflect.DeepEqual(got, []string{"tasks:list", "tasks--x:list"}) {
		t.Fatalf("selected %v", got)
	}
	err := rubricBatch().SelectTargets([]string{"nope"}, of)
	if err == nil || !strings.Contains(err.Error(), "--target nope") || !strings.Contains(err.Error(), "tasks:detail") {
		t.Fatalf("unknown target: %v", err)
	}
	delete(targets, "other")
	b = rubricBatch()
	if err := b.SelectTargets([]string{"home"}, of); err != nil || len(b.ACs) != 1 || b.ACs[0].ID != "other" {
		t.Fatalf("an unreadable spec: %v %+v", err, b.ACs)
	}
}
