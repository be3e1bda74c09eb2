// Package grafana holds the Grafana dashboard of Setpoint (setpoint.json).
// Its test keeps the dashboard, docs/metrics.md and the metrics the server
// and the agent register in step.
package grafana

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/setpointhq/setpoint/agent"
	"github.com/setpointhq/setpoint/server"
	"github.com/setpointhq/setpoint/store/boltstore"
)

// registered returns the names of every metric the server and the agent
// register (histograms by their base name).
func registered(t *testing.T) map[string]bool {
	t.Helper()
	st, err := boltstore.Open(filepath.Join(t.TempDir(), "setpoint.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv, err := server.New(st, server.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	agent.NewMetrics(reg)
	names := map[string]bool{}
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{srv.Collector(), reg} {
		ch := make(chan *prometheus.Desc)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			if m := fqName.FindStringSubmatch(d.String()); m != nil {
				names[m[1]] = true
			}
		}
	}
	if !names["setpoint_server_reconciliations_total"] || !names["setpoint_agent_desired_replicas"] || !names["grpc_server_handled_total"] {
		t.Fatalf("registered metrics incomplete: %v", names)
	}
	return names
}

// exprs returns every PromQL expression of the dashboard: panel targets'
// expr and template variables' queries.
func exprs(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("setpoint.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("setpoint.json: %v", err)
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(x, k)
			}
		case []any:
			for _, x := range v {
				walk(x, key)
			}
		case string:
			if key == "expr" || (key == "query" && strings.HasPrefix(v, "label_values(")) {
				out = append(out, v)
			}
		}
	}
	walk(dash, "")
	return out
}

var (
	quoted   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	matchers = regexp.MustCompile(`\{[^}]*\}`)
	ranges   = regexp.MustCompile(`\[[^\]]*\]`)
	grouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	labelArg = regexp.MustCompile(`,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)`) // label_values(metric, label)
	ident    = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
)

// metricNames returns the metric names an expression references: the
// identifiers left once strings, matchers, ranges, grouping clauses and
// function calls are removed.
func metricNames(expr string) []string {
	e := quoted.ReplaceAllString(expr, `""`)
	e = matchers.ReplaceAllString(e, " ")
	e = ranges.ReplaceAllString(e, " ")
	e = grouping.ReplaceAllString(e, " ")
	e = labelArg.ReplaceAllString(e, ")")
	var out []string
	for _, m := range ident.FindAllStringSubmatch(e, -1) {
		if m[1] != "" { // a function call
			continue
		}
		out = append(out, m[0])
	}
	return out
}

func TestMetricNames(t *testing.T) {
	got := metricNames(`histogram_quantile(0.99, sum by (le, code) (rate(x_bucket{a=~"$b", c!="d{e}"}[$__rate_interval]))) / on (j) y + label_values(z{n="1"}, hpa_name)`)
	if want := []string{"x_bucket", "y", "z"}; !slices.Equal(got, want) {
		t.Errorf("metricNames = %v, want %v", got, want)
	}
}

// TestDashboardUsesRegisteredMetrics: every expression of the dashboard
// references only metrics the server or the agent registers, or the
// stores' metrics, which cmd/setpoint-server's TestDashboardStoreMetrics
// checks.
func TestDashboardUsesRegisteredMetrics(t *testing.T) {
	names := registered(t)
	es := exprs(t)
	if len(es) < 20 {
		t.Fatalf("only %d expressions found", len(es))
	}
	for _, e := range es {
		ns := metricNames(e)
		if len(ns) == 0 {
			t.Errorf("no metric in %q", e)
		}
		for _, n := range ns {
			base := n
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(n, suffix); ok && names[b] {
					base = b
				}
			}
			if storeMetric(base) {
				continue // registered by setpoint-server itself: its TestDashboardStoreMetrics
			}
			if !names[base] {
				t.Errorf("%q references %s, which neither the server nor the agent registers", e, n)
			}
		}
	}
}

// storeMetric says whether name is one of the stores' metrics, which
// setpoint-server registers itself (package main, which this test cannot
// import).
func storeMetric(name string) bool {
	return strings.HasPrefix(name, "setpoint_bolt_") || strings.HasPrefix(name, "setpoint_etcd_")
}

// TestDocsListEveryMetric: docs/metrics.md names every metric of the
// service and the agent.
func TestDocsListEveryMetric(t *testing.T) {
	b, err := os.ReadFile("../../docs/metrics.md")
	if err != nil {
		t.Fatal(err)
	}
	for n := range registered(t) {
		if strings.HasPrefix(n, "setpoint_") && !strings.Contains(string(b), "`"+n+"`") {
			t.Errorf("docs/metrics.md does not list %s", n)
		}
	}
}
