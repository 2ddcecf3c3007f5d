package stages

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/rubricwire"

	"github.com/tribunal-dev/tribunal/pkg/batch"
	"github.com/tribunal-dev/tribunal/pkg/blob"
	"github.com/tribunal-dev/tribunal/pkg/blob/fileblob"
	"github.com/tribunal-dev/tribunal/pkg/events"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/kind/stage"
	"github.com/tribunal-dev/tribunal/pkg/sensor/command"
)

// gateProject lays examples/rubric-feature out as seed 004 does (argus/specs/tasks/ in a
// project root), with the web adapter's gates.sh printing gatesJSON when it is not "",
// plans its view with a real blob store and returns the render.done the renderer would
// publish for the reference itself as the render, with the store.
func gateProject(t *testing.T, gatesJSON string) (events.Event, *events.RenderDone, blob.Store) {
	t.Helper()
	root := t.TempDir()
	feature := filepath.Join(root, "argus", "specs", "tasks")
	if err := os.CopyFS(feature, os.DirFS(filepath.Join("..", "..", "..", "..", "examples", "rubric-feature"))); err != nil {
		t.Fatal(err)
	}
	if gatesJSON != "" {
		dir := filepath.Join(root, "argus", "adapters", "web")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "gates.sh"), []byte("#!/bin/sh\necho '"+gatesJSON+"'\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b, err := batch.Load(filepath.Join(feature, "batch.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	store, err := fileblob.New(t.TempDir(), fileblob.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	env := &stage.PlanEnv{Batch: b, Tenant: "team-a", Store: store, ServeFeature: func(string) (string, error) { return "http://127.0.0.1:1", nil }}
	plans, err := Kind{}.Plan(context.Background(), env, b.ACs[0])
	if err != nil || len(plans) != 1 {
		t.Fatalf("plan: %d %v", len(plans), err)
	}
	spec := plans[0].Build(nil)
	if rubricwire.SpecOf(spec.KindPart).Blocked != "" || rubricwire.SpecOf(spec.KindPart).Project == nil || rubricwire.SpecOf(spec.KindPart).Project.Root != root {
		t.Fatalf("planned %+v", rubricwire.SpecOf(spec.KindPart))
	}
	ref, _ := os.ReadFile(filepath.Join(feature, "references", "list-populated-light.png"))
	put := func(data []byte, mt string) events.Blob {
		a, err := blob.PutBytes(context.Background(), store, "team-a", data, mt)
		if err != nil {
			t.Fatal(err)
		}
		return events.Blob{SHA256: a.Ref.SHA256, MediaType: mt, Size: a.Size}
	}
	probe := `{"tree":[{"id":"screen.list"},{"id":"button.createItem"},{"id":"list.items"},{"id":"row.item.1"}]}`
	rd := &events.RenderDone{Spec: spec, Artifacts: map[string]events.Artifact{
		"render": {Blob: put(ref, "image/png"), Class: "image"},
		"probe":  {Blob: put([]byte(probe), "application/json"), Class: "text"},
	}}
	ev := events.New(rd, "team-a", "b1", spec.ACID, 1, "", nil)
	return ev, rd, store
}

// gateResultOf reads the gate-result.json a gates event points at.
func gateResultOf(t *testing.T, store blob.Store, b *events.Blob) *argus.GateResult {
	t.Helper()
	if b == nil {
		t.Fatal("no gate result")
	}
	data, _, err := blob.ReadAll(context.Background(), store, blob.Ref{Tenant: "team-a", SHA256: b.SHA256})
	if err != nil {
		t.Fatal(err)
	}
	r, err := argus.ParseGateResult(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	return r
}

// TestGateSaysWhySkipped: with no gates adapter anywhere the platform gates read skip,
// and both the gate result (under its tribunal key) and the job's gates say why; with
// the project's gates.sh run (the all-in-one mode) the gates it leaves out read skip as
// not reported by it, and the token_contrast and a11y_ids it prints are ignored with a
// note, as the seed's gates.sh overwrites them, not a failed build.
func TestGateSaysWhySkipped(t *testing.T) {
	t.Parallel()
	ev, rd, store := gateProject(t, "")
	out, err := Kind{}.Gate(context.Background(), &stage.GateEnv{Store: store, Gates: &command.Gates{Local: true}}, ev, rd)
	if err != nil {
		t.Fatal(err)
	}
	gd, ok := out.(*events.GatesDone)
	if !ok {
		t.Fatalf("gated %T %+v", out, out)
	}
	details := map[string]string{}
	for _, g := range gd.Gates {
		details[g.Name] = string(g.Status) + ": " + g.Detail
	}
	none := "no gates adapter: the project ships no argus/adapters/web/gates.sh and no gates command is registered for adapter \"web\""
	for _, name := range []string{"build", "lint", "type_check", "token_compliance", "flows"} {
		if details[name] != "skip: "+none {
			t.Errorf("%s: %s", name, details[name])
		}
	}
	if !strings.HasPrefix(details["snapshot"], "skip: "+none+"; no signed-off baseline") {
		t.Errorf("snapshot: %s", details["snapshot"])
	}
	var gr *argus.GateResult
	for _, s := range gd.Slots {
		if s.Name == "gate_result" {
			gr = gateResultOf(t, store, &s.Artifact.Blob)
		}
	}
	if gr == nil || gr.Tribunal == nil || gr.Tribunal.GatesAdapter != "" || gr.Tribunal.Skipped["build"] != none || len(gr.Tribunal.Skipped) != 6 {
		t.Fatalf("gate result's notes: %+v", gr)
	}

	ev, rd, store = gateProject(t, `{"build":"pass","lint":"skip","token_contrast":"fail","a11y_ids":"yes"}`)
	out, err = Kind{}.Gate(context.Background(), &stage.GateEnv{Store: store, Gates: &command.Gates{Local: true}}, ev, rd)
	if err != nil {
		t.Fatal(err)
	}
	gd, ok = out.(*events.GatesDone)
	if !ok {
		t.Fatalf("an adapter printing token_contrast and a11y_ids: %T %+v", out, out)
	}
	gr = gateResultOf(t, store, findSlot(gd.Slots, "gate_result"))
	n := gr.Tribunal
	if gr.Gates.Build != argus.GatePass || gr.Gates.TokenContrast != argus.GatePass || n.GatesAdapter != "argus/adapters/web/gates.sh" ||
		n.Skipped["lint"] != "reported skip by argus/adapters/web/gates.sh" || n.Skipped["flows"] != "not reported by argus/adapters/web/gates.sh" ||
		!strings.Contains(n.Ignored["token_contrast"], `printed "fail"`) || !strings.Contains(n.Ignored["a11y_ids"], `printed "yes"`) {
		data, _ := json.Marshal(gr)
		t.Fatalf("gate result %s", data)
	}
}

func findSlot(slots []events.Slot, name string) *events.Blob {
	for _, s := range slots {
		if s.Name == name {
			return &s.Artifact.Blob
		}
	}
	return nil
}

// TestGateBlocksWhatItWillNotRun: a shared gater (not Local) blocks a view whose project
// ships gates.sh it has not registered, and a view whose job says nothing of its project,
// rather than gate it on platform gates read as skipped; a red build from the project's
// gates.sh keeps the judge away, naming the script.
func TestGateBlocksWhatItWillNotRun(t *testing.T) {
	t.Parallel()
	ev, rd, store := gateProject(t, `{"build":"fail"}`)
	out, err := Kind{}.Gate(context.Background(), &stage.GateEnv{Store: store, Gates: &command.Gates{}}, ev, rd)
	if err != nil {
		t.Fatal(err)
	}
	if gf, ok := out.(*events.GatesFailed); !ok || !strings.Contains(gf.Blocked, "the project ships argus/adapters/web/gates.sh") {
		t.Fatalf("shared gater: %T %+v", out, out)
	}
	silent := *rubricwire.SpecOf(rd.Spec.KindPart)
	silent.Project = nil
	rd2 := *rd
	rd2.Spec.KindPart = &silent
	out, err = Kind{}.Gate(context.Background(), &stage.GateEnv{Store: store}, ev, &rd2)
	if err != nil {
		t.Fatal(err)
	}
	if gf, ok := out.(*events.GatesFailed); !ok || !strings.Contains(gf.Blocked, "does not say whether its project ships argus/adapters/web/gates.sh") {
		t.Fatalf("a job that does not say: %T %+v", out, out)
	}
	out, err = Kind{}.Gate(context.Background(), &stage.GateEnv{Store: store, Gates: &command.Gates{Local: true}}, ev, rd)
	if err != nil {
		t.Fatal(err)
	}
	gf, ok := out.(*events.GatesFailed)
	if !ok || gf.Blocked != "" {
		t.Fatalf("red build: %T %+v", out, out)
	}
	for _, g := range gf.Gates {
		if g.Name == "build" && (g.Status != events.GateFail || g.Detail != "reported by argus/adapters/web/gates.sh") {
			t.Errorf("build gate %+v", g)
		}
	}
	if r := gateResultOf(t, store, gf.GateResult); r.AllGreen || r.Gates.Build != argus.GateFail {
		t.Errorf("gate result %+v", r)
	}
}
