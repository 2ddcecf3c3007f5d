package deploy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/tribunal-dev/tribunal/pkg/telemetry"
)

// dashboardQueries collects every PromQL query of a Grafana dashboard: panel targets'
// expr (rows' nested panels included) and templating queries.
func dashboardQueries(v any, path string, out map[string]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, child := range x {
			p := path + "." + k
			// A templating variable's PromQL is its query.query (a datasource variable's
			// query is the datasource type).
			if s, ok := child.(string); ok && (k == "expr" || (k == "query" && strings.Contains(path, "templating") && strings.HasSuffix(path, ".query"))) {
				out[p] = s
				continue
			}
			dashboardQueries(child, p, out)
		}
	case []any:
		for i, child := range x {
			dashboardQueries(child, fmt.Sprintf("%s[%d]", path, i), out)
		}
	}
}

var (
	metricRef   = regexp.MustCompile(`\btribunal_[a-z0-9_]+\b`)
	groupLabels = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	matchers    = regexp.MustCompile(`\{([^}]*)\}`)
	matcherKey  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	labelValues = regexp.MustCompile(`label_values\(\s*[a-z0-9_]+\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)`)
)

// CheckDashboard holds a Grafana dashboard to the metrics tribunal exports (labels, from
// pkg/telemetry): every query names at least one tribunal metric and only existing
// ones (a histogram by its _bucket, _sum or _count series), and groups or matches only
// by labels those metrics have ("le" for a histogram's buckets). It returns the problems
// and the metric families the dashboard uses.
func CheckDashboard(file string, data []byte, metrics map[string][]string) ([]Problem, map[string]bool) {
	ps := problems{file: file}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		ps.add("", "", "not JSON: %v", err)
		return ps.list, nil
	}
	queries := map[string]string{}
	dashboardQueries(dash, "", queries)
	if len(queries) == 0 {
		ps.add("", "", "no queries")
	}
	used := map[string]bool{}
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range queries {
			if !yield(k) {
				return
			}
		}
	})
	for _, at := range keys {
		q := queries[at]
		field := strings.TrimPrefix(at, ".")
		allowed := map[string]bool{}
		known := true
		refs := metricRef.FindAllString(q, -1)
		if len(refs) == 0 {
			ps.add("", field, "%q names no tribunal metric", q)
		}
		for _, m := range refs {
			family, histo := m, false
			if _, ok := metrics[family]; !ok {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if base, cut := strings.CutSuffix(m, suffix); cut {
						if _, ok := metrics[base]; ok {
							family, histo = base, suffix == "_bucket"
						}
					}
				}
			}
			labels, ok := metrics[family]
			if !ok {
				ps.add("", field, "%s is not a metric tribunal exports", m)
				known = false
				continue
			}
			used[family] = true
			for _, l := range labels {
				allowed[l] = true
			}
			if histo {
				allowed["le"] = true
			}
		}
		var names []string
		for _, g := range groupLabels.FindAllStringSubmatch(q, -1) {
			for _, l := range strings.Split(g[1], ",") {
				names = append(names, strings.TrimSpace(l))
			}
		}
		for _, m := range matchers.FindAllStringSubmatch(q, -1) {
			for _, k := range matcherKey.FindAllStringSubmatch(m[1], -1) {
				names = append(names, k[1])
			}
		}
		for _, lv := range labelValues.FindAllStringSubmatch(q, -1) {
			names = append(names, lv[1])
		}
		for _, l := range names {
			if l != "" && !allowed[l] && len(refs) > 0 && known {
				ps.add("", field, "%q uses label %q, which %v do not have", q, l, refs)
			}
		}
	}
	return ps.list, used
}

// TestGrafanaDashboard: the dashboard in deploy/grafana queries only metrics and labels
// the services export, and shows every one of them.
func TestGrafanaDashboard(t *testing.T) {
	const file = "deploy/grafana/tribunal.json"
	ps, used := CheckDashboard(file, read(t, file), telemetry.MetricLabels())
	if len(ps) > 0 {
		t.Fatalf("%s:\n%s", file, Report(ps))
	}
	for name := range telemetry.MetricLabels() {
		if !used[name] {
			t.Errorf("%s: %s is exported but on no panel", file, name)
		}
	}
}

// A query of a metric or label that does not exist is a Problem naming the query.
func TestDashboardUnknownMetricFails(t *testing.T) {
	const file = "inline.json"
	ps, _ := CheckDashboard(file, []byte(`{"panels": [{"type": "row", "panels": [{"targets": [
		{"expr": "sum by (service) (rate(tribunal_events_handeld_total[5m]))"},
		{"expr": "histogram_quantile(0.9, sum by (le, tenant) (rate(tribunal_handler_seconds_bucket[5m])))"},
		{"expr": "sum(rate(tribunal_provider_calls_total{outcome=\"ok\", team=\"a\"}[5m]))"},
		{"expr": "up"}]}]}],
		"templating": {"list": [{"query": {"query": "label_values(tribunal_build_info, version)"}}]}}`), telemetry.MetricLabels())
	wantProblem(t, ps, file, "", "panels[0].panels[0].targets[0].expr", "tribunal_events_handeld_total is not a metric")
	wantProblem(t, ps, file, "", "panels[0].panels[0].targets[1].expr", `label "tenant"`)
	wantProblem(t, ps, file, "", "panels[0].panels[0].targets[2].expr", `label "team"`)
	wantProblem(t, ps, file, "", "panels[0].panels[0].targets[3].expr", "names no tribunal metric")
	if len(ps) != 4 {
		t.Errorf("want 4 problems, got:\n%s", Report(ps))
	}
}
