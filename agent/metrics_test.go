package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/setpointhq/setpoint/agent/api/v1alpha1"
)

// samples gathers reg into "name{label="value",...}" → value, labels
// sorted by name; histograms give their _count.
func samples(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			name := f.GetName()
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				name, v = name+"_count", float64(m.GetHistogram().GetSampleCount())
			}
			out[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// TestMetricsAfterReconciles reconciles an Autoscaler (a scale-up held
// back by a policy, with one metric failing), then its deletion, and reads
// the registry.
func TestMetricsAfterReconciles(t *testing.T) {
	rec := scaleUp()
	rec.Metrics = []MetricProposal{{Proposal: 5}, {Failed: true}}
	rec.Explanation.Proposal = 5
	rec.Explanation.Steps = []v1alpha1.ExplanationStep{{Kind: "Limited", From: 5, To: 4, Reason: "ScaleUpLimit"}}
	h := newHarness(t, testAutoscaler(), rec)
	reg := prometheus.NewRegistry()
	h.c.opts.Prometheus = NewMetrics(reg)
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	got := samples(t, reg)
	for name, want := range map[string]float64{
		`setpoint_agent_reconciliations_total{action="scale_up",error="none"}`:                                                        1,
		`setpoint_agent_reconciliation_duration_seconds_count{action="scale_up",error="none"}`:                                        1,
		`setpoint_agent_metric_computation_total{action="scale_up",error="none",metric_type="Resource"}`:                              1,
		`setpoint_agent_metric_computation_total{action="none",error="internal",metric_type="External"}`:                              1,
		`setpoint_agent_metric_computation_duration_seconds_count{action="none",error="internal",metric_type="External"}`:             1,
		`setpoint_agent_num_horizontal_pod_autoscalers{}`:                                                                             1,
		`setpoint_agent_desired_replicas{hpa_name="web",namespace="ns"}`:                                                              4,
		`setpoint_agent_metric_proposed_replicas{hpa_name="web",metric="cpu",metric_index="0",metric_type="Resource",namespace="ns"}`: 5,
		`setpoint_agent_decision_limited{hpa_name="web",kind="Limited",namespace="ns",reason="ScaleUpLimit"}`:                         1,
		`setpoint_agent_rescales_total{result="applied"}`:                                                                             1,
	} {
		if got[name] != want {
			t.Errorf("%s = %v, want %v\nhave: %v", name, got[name], want, slices.Sorted(maps.Keys(got)))
		}
	}
	if _, ok := got[`setpoint_agent_metric_proposed_replicas{hpa_name="web",metric="queue",metric_index="1",metric_type="External",namespace="ns"}`]; ok {
		t.Error("a failed metric has a proposal series")
	}

	// Deleted: the per-target series go, the count drops.
	if err := h.c.autoscalers.GetIndexer().Delete(h.c.autoscalers.GetIndexer().List()[0]); err != nil {
		t.Fatal(err)
	}
	if err := h.c.reconcile(context.Background(), "ns/web"); err != nil {
		t.Fatal(err)
	}
	got = samples(t, reg)
	for name := range got {
		if strings.Contains(name, `hpa_name="web"`) {
			t.Errorf("series left after deletion: %s", name)
		}
	}
	if v := got[`setpoint_agent_num_horizontal_pod_autoscalers{}`]; v != 0 {
		t.Errorf("num_horizontal_pod_autoscalers = %v after deletion, want 0", v)
	}
}
