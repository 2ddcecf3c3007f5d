package deploy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/tribunal-dev/tribunal/internal/testutil/fakellm"
	"github.com/tribunal-dev/tribunal/internal/testutil/otlpsink"
	"github.com/tribunal-dev/tribunal/internal/testutil/tribunalbin"
	"github.com/tribunal-dev/tribunal/pkg/kind/rubric/argus"
	"github.com/tribunal-dev/tribunal/pkg/sensor/web"
)

// fakeModelAnswer answers every judge kind's structured-output schema with a valid,
// passing answer, so a stack pointed at the fake server runs every kind to the end.
func fakeModelAnswer(req goopenai.ChatCompletionRequest, _ int) fakellm.Reply {
	name := ""
	if rf := req.ResponseFormat; rf != nil && rf.JSONSchema != nil {
		name = rf.JSONSchema.Name
	}
	var answer any
	switch name {
	case "critic_scores":
		answer = map[string]any{"correctness": 8, "slop": 2, "scope": 8, "verdict": "pass", "quality": 8, "rationale": "fake"}
	case "equivalence_verdict":
		answer = map[string]any{"verdict": "equivalent", "behaviour_delta": "",
			"efficiency_signal": map[string]any{"original_directness": 3, "candidate_directness": 3, "interpretation_notes": "fake"}}
	case "runner_transcript":
		answer = map[string]any{"transcript": "followed the document", "self_report": map[string]any{"steps_followed": []string{"all"},
			"steps_skipped": []string{}, "ambiguities": []any{}, "improvisation": []string{}, "deviation_urges": []string{}, "final_output": "done"}}
	case "rubric_verdict":
		r := argus.DefaultRubric()
		dims := map[string]any{}
		for _, d := range r.DimensionNames() {
			dims[d] = map[string]any{"score": 1.0, "anchor": r.Dimensions[d].Anchor, "evidence": "fake"}
		}
		answer = map[string]any{"dimensions": dims, "closer_to_reference_than_prev": nil, "all_pass": false, "failed_dimensions": []string{"none"}, "notes": "fake"}
	default:
		return fakellm.Reply{}
	}
	data, _ := json.Marshal(answer)
	return fakellm.Reply{Content: string(data)}
}

// rubricBatch copies the example rubric feature into a folder, serves it on loopback (a
// team's preview deployment, as the renderer would reach it) and points the spec's route
// there, since only `tribunal run` serves feature folders itself.
func rubricBatch(t *testing.T) string {
	t.Helper()
	src := filepath.Join(repo, "examples", "rubric-feature")
	dir := t.TempDir()
	for _, f := range []string{"batch.yaml", "spec.json", "spec.md", "tokens.json", "contrast-pairs.json", "page.html", "references/list-populated-light.png"} {
		data, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	spec, _ := os.ReadFile(filepath.Join(dir, "spec.json"))
	spec = []byte(strings.Replace(string(spec), `"route": "page.html"`, `"route": "`+srv.URL+`/page.html"`, 1))
	if err := os.WriteFile(filepath.Join(dir, "spec.json"), spec, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runOnHost runs the tribunal binary bin on the host, in the repository's root, with
// only the variables given (and PATH, HOME) and returns its stdout, exit code and stderr.
func runOnHost(t *testing.T, bin string, vars []string, args ...string) (string, int, string) {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = repoRoot(t)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, vars...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return stdout.String(), code, stderr.String()
}

// TestComposeStackEndToEnd runs docker-compose.yml as shipped, without Docker: the
// processes its services describe, with the environment compose-go resolves from
// .env.example (the judge switched to an OpenAI-compatible model served on loopback,
// traces to an OTLP receiver), then submits and watches batches from the host exactly as
// the compose file's header says. Every kind is judged by the configured model, the
// renderer's equivalence runs included (with the key); each AC is one trace across the
// four service processes; the console shows the batch.
func TestComposeStackEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds tribunal and runs the compose stack")
	}
	bin, remove, err := tribunalbin.Build("../cmd/tribunal")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	model := fakellm.New(fakellm.Options{Respond: fakeModelAnswer})
	t.Cleanup(model.Close)
	sink, otlp := otlpsink.StartHTTP(t)

	env := stackEnv(t)
	env["TRIBUNAL_JUDGE"] = "openai"
	env["TRIBUNAL_JUDGE_MODEL"] = "fake-model"
	env["TRIBUNAL_OPENAI_BASE_URL"] = model.BaseURL()
	env["OPENAI_API_KEY"] = "sk-compose-test"
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp
	// The team's preview app (rubricBatch) is served on the host's loopback, on a port
	// chosen later: the renderer's operator lists the address.
	env["TRIBUNAL_WEB_ALLOW_HOSTS"] = "127.0.0.1"
	project, err := LoadCompose("docker-compose.yml", read(t, "docker-compose.yml"), env, repoRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	stack := newComposeRun(t, project, bin)
	stack.up()

	// The host side: `tribunal submit` and `watch` against the published ports, with the
	// S3 keys from .env, as the compose file's header shows.
	natsURL := "nats://" + stack.addr("nats", 4222)
	blob := fmt.Sprintf("s3://%s?endpoint=%s&secure=false&path_style=true&region=us-east-1", env["TRIBUNAL_BUCKET"], stack.addr("objectstore", 9000))
	onHost := func(vars []string, args ...string) (string, int, string) {
		t.Helper()
		return runOnHost(t, bin, vars, args...)
	}
	// NATS admits no one without a user of its authorization.
	if nc, err := nats.Connect(natsURL, nats.Timeout(10*time.Second)); err == nil {
		nc.Close()
		t.Error("NATS admitted an anonymous client")
	} else if !strings.Contains(strings.ToLower(err.Error()), "authorization") {
		t.Errorf("an anonymous client: %v, want an authorization violation", err)
	}
	// host runs a client command as an operator: NATS's operator user and the S3 keys.
	host := func(args ...string) (string, int, string) {
		t.Helper()
		return onHost(append(operatorEnv(env), "TRIBUNAL_S3_ACCESS_KEY="+env["TRIBUNAL_S3_ACCESS_KEY"], "TRIBUNAL_S3_SECRET_KEY="+env["TRIBUNAL_S3_SECRET_KEY"]),
			append(args, "--nats", natsURL, "--blob", blob)...)
	}
	type row struct {
		ACID    string `json:"ac_id"`
		Kind    string `json:"kind"`
		Status  string `json:"status"`
		Verdict string `json:"verdict"`
		Judge   string `json:"judge"`
	}
	judged := func(dir string, wantExit int, watchSays string) (string, map[string]row) {
		t.Helper()
		out, code, errs := host("submit", dir)
		if code != 0 {
			t.Fatalf("submit %s: exit %d\n%s%s\n%s", dir, code, out, errs, stack.logs())
		}
		id := strings.TrimSpace(out)
		out, code, errs = host("watch", "--batch", id, "--quiet")
		if code != wantExit || !strings.Contains(out, watchSays) {
			t.Fatalf("watch %s: exit %d, want %d and %q\n%s%s\n%s", id, code, wantExit, watchSays, out, errs, stack.logs())
		}
		out, _, errs = host("results", "--batch", id, "--json", "--out", t.TempDir())
		var res struct {
			Results []row `json:"results"`
		}
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("results: %v\n%s\nstderr: %s", err, out, errs)
		}
		rows := map[string]row{}
		for _, r := range res.Results {
			rows[r.ACID] = r
		}
		return id, rows
	}

	id, rows := judged("examples/quickstart", 1, "8 ACs, 6 compared, 2 blocked")
	for ac, want := range map[string]struct{ kind, status string }{
		"AC-1": {"ab", "compared"}, "AC-3": {"ab", "compared"}, "AC-11": {"critic", "compared"}, "AC-12": {"equivalence", "compared"},
	} {
		r := rows[ac]
		if r.Kind != want.kind || r.Status != want.status || r.Judge != "openai/fake-model" {
			t.Errorf("%s: %+v, want kind %s, status %s, judged by openai/fake-model", ac, r, want.kind, want.status)
		}
	}
	if r := rows["AC-12"]; r.Verdict != "pass" {
		t.Errorf("equivalence AC-12: %+v, want a pass from the model's transcripts", r)
	}
	if _, err := web.FindBrowser(); err == nil {
		_, rubric := judged(rubricBatch(t), 0, "1 AC, 1 compared")
		if r := rubric["tasks--list--populated--light"]; r.Kind != "rubric" || r.Status != "signed_off" {
			t.Errorf("rubric: %+v, want signed_off", r)
		}
	} else {
		t.Log("chromium not installed: the rubric batch is not run (.ci/run installs it)")
	}

	// Every kind reached the configured model with the key, the renderer's equivalence
	// runner included: on a renderer without the judge settings it would not.
	kinds := map[string]int{}
	for _, rec := range model.Records() {
		if rec.Header.Get("Authorization") != "Bearer sk-compose-test" {
			t.Errorf("request %d without the API key: %q", rec.N, rec.Header.Get("Authorization"))
		}
		if rf := rec.Request.ResponseFormat; rf != nil && rf.JSONSchema != nil {
			kinds[rf.JSONSchema.Name]++
		}
	}
	for _, schema := range []string{"ab_verdict", "critic_scores", "equivalence_verdict", "runner_transcript"} {
		if kinds[schema] == 0 {
			t.Errorf("the model was never asked for %s (requests by schema: %v)", schema, kinds)
		}
	}

	// One AC, one trace, spans from the four service processes and the model calls. The
	// host's `tribunal submit` exports nothing (no OTEL_* there): the aggregator's span of
	// the submission is the trace's root, recorded, and no span hangs off an unexported one.
	deadline := time.Now().Add(60 * time.Second)
	for {
		services := map[string]bool{}
		var genai []string
		trace := ""
		for _, s := range sink.Spans() {
			if s.Attrs["tribunal.job"] == "AC-12" && s.Attrs["tribunal.batch"] == id {
				trace = s.TraceID
			}
		}
		ids := map[string]bool{}
		for _, s := range sink.Spans() {
			if s.TraceID != trace || trace == "" {
				continue
			}
			ids[s.SpanID] = true
			services[s.Service] = true
			if s.Attrs["gen_ai.operation.name"] == "chat" && s.Attrs["gen_ai.response.id"] != "" && s.Attrs["gen_ai.response.finish_reasons"] != "" {
				genai = append(genai, s.Service+"/"+s.Attrs["tribunal.judge.kind"])
			}
		}
		var orphans []string
		roots := 0
		for _, s := range sink.Spans() {
			switch {
			case s.TraceID != trace:
			case s.ParentSpanID == "":
				roots++
			case !ids[s.ParentSpanID]:
				orphans = append(orphans, s.Service+" "+s.Name)
			}
		}
		complete := len(services) == 4 && slices.Contains(genai, "tribunal-judge/equivalence") && slices.Contains(genai, "tribunal-renderer/runner") &&
			roots == 1 && len(orphans) == 0
		for _, svc := range []string{"tribunal-renderer", "tribunal-gater", "tribunal-judge", "tribunal-aggregator"} {
			complete = complete && services[svc]
		}
		if complete {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("AC-12's trace %q: services %v, gen_ai spans with response id and finish reasons %v, %d roots, spans under no exported parent %v",
				trace, services, genai, roots, orphans)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The console shows the batch to the token from .env; the judges' metrics count the
	// provider calls.
	req, _ := http.NewRequest("GET", "http://"+stack.addr("console", 8090)+"/", nil)
	req.Header.Set("Authorization", "Bearer "+env["TRIBUNAL_CONSOLE_TOKEN"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), id) {
		t.Errorf("console: %s, batch %s not listed", resp.Status, id)
	}
	// A team holds only its token (TRIBUNAL_TEAM_TOKEN from .env) and the ingress's
	// address: no NATS URL, no S3 key in its environment.
	tokenFile := filepath.Join(t.TempDir(), "team.token")
	if err := os.WriteFile(tokenFile, []byte(env["TRIBUNAL_TEAM_TOKEN"]), 0o600); err != nil {
		t.Fatal(err)
	}
	team := func(args ...string) (string, int, string) {
		t.Helper()
		return onHost(nil, append(args, "--ingress", "http://"+stack.addr("ingress", 8095), "--token-file", tokenFile)...)
	}
	out, code, errs := team("submit", "examples/quickstart")
	if code != 0 {
		t.Fatalf("a team's submit through the ingress: exit %d\n%s%s\n%s", code, out, errs, stack.logs())
	}
	if out, code, errs := team("watch", "--batch", strings.TrimSpace(out), "--quiet"); code != 1 || !strings.Contains(out, "8 ACs, 6 compared, 2 blocked") {
		t.Errorf("a team's watch through the ingress: exit %d\n%s%s", code, out, errs)
	}

	resp, err = http.Get("http://" + stack.addr("judge", 8080) + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(metrics), `tribunal_provider_calls_total{model="fake-model",outcome="ok",provider="openai",tenant="default"}`) {
		t.Errorf("judge metrics lack the provider calls:\n%s", metrics)
	}
}
