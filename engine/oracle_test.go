package engine_test

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	custommetrics "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetrics "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/hpa"
	"github.com/setpointhq/setpoint/internal/scenario"
	"github.com/setpointhq/setpoint/server/convert"
)

// This file holds a test-only oracle of the Kubernetes v1.37 HPA
// controller's per-metric arithmetic for Pods, Object and External metrics
// (replica_calculator.go's GetMetricReplicas, GetObjectMetricReplicas,
// GetObjectPerPodMetricReplicas, GetExternalMetricReplicas and
// GetExternalPerPodMetricReplicas, metrics' GetMetricUsageRatio), written
// on resource.Quantity as the controller reads its metrics: nothing of
// Setpoint's own parsing or arithmetic is used. It pins the int64 edges of
// issue 27 — sums that wrap, totals that saturate, negative and 19-digit
// milli-values — against the overflow family of the corpus and, by fuzzing,
// against the engine.

// controllerMilli is the milli-value the controller reads for a quantity a
// metrics API serves, or a spec holds: the quantity as the API sends it
// (its canonical string), parsed, then MilliValue. MilliValue rounds up,
// and for a negative quantity of 19 or more digits it truncates
// (apimachinery's scaledValue fast path); the controller reads it so.
func controllerMilli(q resource.Quantity) int64 {
	served := resource.MustParse(q.String())
	return served.MilliValue()
}

// oracleMetric is the controller's outcome for one metric whose pods are
// all running, ready and (for a Pods metric) have a value.
type oracleMetric struct {
	// reported is the milli-value of status.currentMetrics: the Value or
	// AverageValue the controller writes.
	reported int64
	// proposal is the replica count the controller proposes before its
	// conversion to int32 (a whole number; the count it holds when the
	// ratio is within tolerance).
	proposal float64
}

// controllerPerMetric is the oracle: spec is the metric, values what the
// metrics API answered (one per pod for a Pods metric, one for an Object
// metric, the series of an External metric), specReplicas and
// statusReplicas the scale's, readyPods the ready pods, tolerance both
// ways.
func controllerPerMetric(spec autoscalingv2.MetricSpec, values []resource.Quantity, specReplicas, statusReplicas int32, readyPods int64, tolerance float64) oracleMetric {
	within := func(ratio float64) bool { return 1-tolerance <= ratio && ratio <= 1+tolerance }
	// usageRatioReplicas is getUsageRatioReplicaCount, for specReplicas > 0.
	usageRatioReplicas := func(ratio float64) float64 {
		if within(ratio) {
			return float64(specReplicas)
		}
		f := ratio * float64(readyPods)
		if f > math.MaxInt32 {
			return math.MaxInt32
		}
		return math.Ceil(f)
	}
	milli := make([]int64, len(values))
	for i, q := range values {
		milli[i] = controllerMilli(q)
	}
	switch spec.Type {
	case autoscalingv2.PodsMetricSourceType:
		target := controllerMilli(*spec.Pods.Target.AverageValue)
		var total int64
		for _, v := range milli {
			total += v // wraps, as Go's int64 does
		}
		usage := total / int64(len(milli))
		ratio := float64(usage) / float64(target)
		if within(ratio) {
			return oracleMetric{reported: usage, proposal: float64(specReplicas)}
		}
		return oracleMetric{reported: usage, proposal: math.Ceil(ratio * float64(readyPods))}
	case autoscalingv2.ObjectMetricSourceType:
		usage := milli[0]
		if spec.Object.Target.Type == autoscalingv2.ValueMetricType {
			target := controllerMilli(*spec.Object.Target.Value)
			return oracleMetric{reported: usage, proposal: usageRatioReplicas(float64(usage) / float64(target))}
		}
		target := controllerMilli(*spec.Object.Target.AverageValue)
		out := oracleMetric{proposal: float64(statusReplicas)}
		if !within(float64(usage) / (float64(target) * float64(statusReplicas))) {
			out.proposal = math.Ceil(float64(usage) / float64(target))
		}
		out.reported = int64Amd64(math.Ceil(float64(usage) / float64(statusReplicas)))
		return out
	case autoscalingv2.ExternalMetricSourceType:
		var usage int64
		if spec.External.Target.Type == autoscalingv2.ValueMetricType {
			target := controllerMilli(*spec.External.Target.Value)
			for _, v := range milli {
				if v > 0 && usage > math.MaxInt64-v {
					usage = math.MaxInt64
					break
				}
				usage += v
			}
			return oracleMetric{reported: usage, proposal: usageRatioReplicas(float64(usage) / float64(target))}
		}
		target := controllerMilli(*spec.External.Target.AverageValue)
		for _, v := range milli {
			usage += v
			if usage < 0 {
				usage = math.MaxInt64
				break
			}
		}
		out := oracleMetric{proposal: float64(statusReplicas)}
		if !within(float64(usage) / (float64(target) * float64(statusReplicas))) {
			out.proposal = min(math.Ceil(float64(usage)/float64(target)), math.MaxInt32)
		}
		if float64(usage) >= float64(math.MaxInt64) {
			out.reported = math.MaxInt64
		} else {
			out.reported = int64Amd64(math.Ceil(float64(usage) / float64(statusReplicas)))
		}
		return out
	}
	panic("oracle: not a Pods, Object or External metric: " + string(spec.Type))
}

// int64Amd64 is Go's int64(f) as the controller's amd64 build computes it:
// out of range (and NaN) it is math.MinInt64. (The conversion is
// platform-defined there; the oracle fixes it so the test does not depend
// on the machine it runs on.)
func int64Amd64(f float64) int64 {
	if f != f || f >= 1<<63 || f < -(1<<63) {
		return math.MinInt64
	}
	return int64(f)
}

// wantProposal is the int32 proposal Setpoint must make for the
// controller's proposal p: p itself within the int32 range; beyond it,
// where Go's conversion is platform-defined, Setpoint saturates.
func wantProposal(p float64) int32 {
	switch {
	case p > math.MaxInt32:
		return math.MaxInt32
	case p < math.MinInt32:
		return math.MinInt32
	}
	return int32(p)
}

// reportedValue is the Value or AverageValue of a status.currentMetrics
// entry of a Pods, Object or External metric.
func reportedValue(m autoscalingv2.MetricStatus) *resource.Quantity {
	var cur autoscalingv2.MetricValueStatus
	switch {
	case m.Pods != nil:
		cur = m.Pods.Current
	case m.Object != nil:
		cur = m.Object.Current
	case m.External != nil:
		cur = m.External.Current
	}
	if cur.Value != nil {
		return cur.Value
	}
	return cur.AverageValue
}

// TestOverflowCorpusIsTheControllersArithmetic recomputes every current
// metric of the corpus' overflow family with the oracle from the step's
// inputs: the expected values are the controller's, whoever wrote them.
func TestOverflowCorpusIsTheControllersArithmetic(t *testing.T) {
	loaded, bad, err := scenario.Load("../testdata/scenarios/overflow.json")
	if err != nil || len(bad) > 0 {
		t.Fatal(err, bad)
	}
	if len(loaded) == 0 {
		t.Fatal("no overflow scenarios")
	}
	for _, l := range loaded {
		sc := &l.Scenario
		for i := range sc.Steps {
			st := &sc.Steps[i]
			spec := sc.SpecAt(i).Metrics[0]
			var values []resource.Quantity
			switch spec.Type {
			case autoscalingv2.PodsMetricSourceType, autoscalingv2.ObjectMetricSourceType:
				for _, v := range st.CustomMetrics {
					values = append(values, v.Value)
				}
			case autoscalingv2.ExternalMetricSourceType:
				for _, v := range st.ExternalMetrics {
					values = append(values, v.Value)
				}
			}
			if spec.Type == autoscalingv2.ObjectMetricSourceType && len(values) != 1 {
				t.Fatalf("%s step %d: an Object metric needs exactly one value", sc.Name, i)
			}
			ready := int64(len(st.Pods))
			want := controllerPerMetric(spec, values, st.Scale.Replicas, st.Scale.StatusReplicas, ready, sc.Controller.Tolerance)
			if len(st.Expect.CurrentMetrics) != 1 {
				t.Fatalf("%s step %d: want one current metric", sc.Name, i)
			}
			got := reportedValue(st.Expect.CurrentMetrics[0])
			if got == nil || got.Cmp(*resource.NewMilliQuantity(want.reported, resource.DecimalSI)) != 0 {
				t.Errorf("%s step %d: corpus reports %v; the controller's arithmetic gives %dm", sc.Name, i, got, want.reported)
			}
		}
	}
}

// Spellings of FuzzMetricArithmetic's values: how each int64 becomes the
// quantity a metrics API serves.
const (
	spellMilli    = iota // v thousandths, decimal (canonical "…m", up to 19 digits)
	spellBinary          // v thousandths, binary SI when exact
	spellUnits           // v mod 10^16 units, decimal SI ("5P", "12k")
	spellBinUnits        // v mod 10^16 units, binary SI ("8Ki")
	spell19Digits        // a 19-digit milli-value of v's sign, as written
	spellings
)

// fuzzQuantity spells v as the spelling s%spellings says.
func fuzzQuantity(v int64, s uint8) resource.Quantity {
	switch s % spellings {
	case spellBinary:
		return *resource.NewMilliQuantity(v, resource.BinarySI)
	case spellUnits:
		return *resource.NewQuantity(v%1e16, resource.DecimalSI)
	case spellBinUnits:
		return *resource.NewQuantity(v%1e16, resource.BinarySI)
	case spell19Digits:
		m := uint64(v)%(math.MaxInt64-1e18+1) + 1e18 // in [1e18, MaxInt64]
		sign := ""
		if v < 0 {
			sign = "-"
		}
		return resource.MustParse(fmt.Sprintf("%s%dm", sign, m))
	}
	return *resource.NewMilliQuantity(v, resource.DecimalSI)
}

// FuzzMetricArithmetic compares Setpoint's per-metric arithmetic with the
// controller's (the oracle) on random quantities, 19-digit milli-values
// among them, for each of Pods AverageValue, Object Value and AverageValue,
// External Value and AverageValue: the request is built from Kubernetes
// objects by the agent's conversion (package hpa), resolved by the
// server's (convert.Input, with its shortcut for plain quantities) and
// decided by the engine; the reported value, as the server formats it,
// and the metric's proposal must be the controller's.
func FuzzMetricArithmetic(f *testing.F) {
	// Issue 27's example: four pods whose sum wraps once.
	f.Add(uint8(0), uint8(3), uint8(3), int64(4200e15), uint8(2), int64(2786032325003348895), int64(3406138300591494486), int64(4252064379289823528), int64(3747601917265997613), int64(0), uint8(0))
	// Sums that wrap twice, negatives that wrap to a positive total.
	f.Add(uint8(0), uint8(4), uint8(4), int64(1e18), uint8(0), int64(8512366390021876543), int64(9003217745561238890), int64(8794120035577111209), int64(8321990456012873301), int64(8675309112233445566), uint8(0))
	f.Add(uint8(3), uint8(1), uint8(1), int64(1e18), uint8(0), int64(-5e18), int64(-5e18), int64(0), int64(0), int64(0), uint8(0))
	// Negative 19-digit milli-values (MilliValue's fast path), as values and
	// in other spellings.
	f.Add(uint8(1), uint8(0), uint8(1), int64(1e5), uint8(0), int64(-1063726787889721773), int64(0), int64(0), int64(0), int64(0), uint8(4))
	f.Add(uint8(4), uint8(2), uint8(2), int64(2e18), uint8(0), int64(math.MaxInt64), int64(-7), int64(5e18), int64(0), int64(0), uint8(0b01_10_11))
	f.Add(uint8(2), uint8(0), uint8(0), int64(3e18), uint8(0), int64(math.MaxInt64), int64(0), int64(0), int64(0), int64(0), uint8(0))
	f.Fuzz(func(t *testing.T, kind, n, replicas uint8, target int64, targetSpell uint8, v0, v1, v2, v3, v4 int64, spell uint8) {
		const tolerance = 0.1
		count := 1 + int(n%5)
		current := 1 + int32(replicas%8)
		if target == math.MinInt64 {
			target = 0
		}
		target = max(1, target, -target)
		targetQ := fuzzQuantity(target, targetSpell)
		if targetQ.Sign() <= 0 {
			targetQ = *resource.NewMilliQuantity(1, resource.DecimalSI)
		}
		vals := [5]int64{v0, v1, v2, v3, v4}
		values := make([]resource.Quantity, count)
		for i := range values {
			values[i] = fuzzQuantity(vals[i], spell>>i)
		}

		var spec autoscalingv2.MetricSpec
		var mv hpa.MetricValues
		pods := current
		switch kind % 5 {
		case 0:
			spec = autoscalingv2.MetricSpec{Type: autoscalingv2.PodsMetricSourceType, Pods: &autoscalingv2.PodsMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "bytes"},
				Target: autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &targetQ}}}
			pods = int32(count)
			for i, q := range values {
				mv.Custom = append(mv.Custom, custommetrics.MetricValue{
					DescribedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Name: fmt.Sprintf("web-%d", i), Namespace: "default"},
					Metric:          custommetrics.MetricIdentifier{Name: "bytes"}, Timestamp: metav1.NewTime(now.Add(-time.Second)), Value: q})
			}
		case 1, 2:
			t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &targetQ}
			if kind%5 == 2 {
				t = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &targetQ}
			}
			ref := autoscalingv2.CrossVersionObjectReference{APIVersion: "v1", Kind: "Service", Name: "web"}
			spec = autoscalingv2.MetricSpec{Type: autoscalingv2.ObjectMetricSourceType, Object: &autoscalingv2.ObjectMetricSource{
				DescribedObject: ref, Metric: autoscalingv2.MetricIdentifier{Name: "depth"}, Target: t}}
			values = values[:1]
			mv.Custom = []custommetrics.MetricValue{{
				DescribedObject: corev1.ObjectReference{Kind: "Service", APIVersion: "v1", Name: "web", Namespace: "default"},
				Metric:          custommetrics.MetricIdentifier{Name: "depth"}, Timestamp: metav1.NewTime(now.Add(-time.Second)), Value: values[0]}}
		default:
			t := autoscalingv2.MetricTarget{Type: autoscalingv2.ValueMetricType, Value: &targetQ}
			if kind%5 == 4 {
				t = autoscalingv2.MetricTarget{Type: autoscalingv2.AverageValueMetricType, AverageValue: &targetQ}
			}
			spec = autoscalingv2.MetricSpec{Type: autoscalingv2.ExternalMetricSourceType, External: &autoscalingv2.ExternalMetricSource{
				Metric: autoscalingv2.MetricIdentifier{Name: "queue"}, Target: t}}
			for i, q := range values {
				mv.External = append(mv.External, externalmetrics.ExternalMetricValue{MetricName: "queue",
					MetricLabels: map[string]string{"shard": fmt.Sprint(i)}, Timestamp: metav1.NewTime(now.Add(-time.Second)), Value: q})
			}
		}

		tol, cpuInit, delay, window := tolerance, 5*time.Minute, 30*time.Second, 5*time.Minute
		r := &hpa.Reading{
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				MinReplicas:    ptrInt32(1), MaxReplicas: 1000, Metrics: []autoscalingv2.MetricSpec{spec}},
			Settings: hpa.Settings{Tolerance: &tol, CPUInitializationPeriod: &cpuInit, InitialReadinessDelay: &delay, DownscaleStabilizationWindow: &window},
			Scale:    hpa.Scale{Replicas: current, StatusReplicas: current, Selector: "app=web"},
			Metrics:  []hpa.MetricValues{mv},
		}
		for i := range pods {
			r.Pods = append(r.Pods, readyPod(fmt.Sprintf("web-%d", i)))
		}
		in, err := convert.Input(hpa.Request(r), now)
		if err != nil {
			// The server refuses quantities whose milli-value an int64 does
			// not hold (math.MinInt64 milli, here), where MilliValue would
			// saturate; nothing else may fail.
			if strings.Contains(err.Error(), "must be within") {
				return
			}
			t.Fatalf("convert.Input: %v", err)
		}
		d, err := engine.Decide(in, engine.History{})
		if err != nil {
			t.Fatalf("Decide: %v", err)
		}
		want := controllerPerMetric(spec, values, current, current, int64(pods), tolerance)
		if len(d.Status.CurrentMetrics) != 1 || len(d.Explanation.Metrics) != 1 {
			t.Fatalf("decision %+v: want one metric", d)
		}
		ms := d.Status.CurrentMetrics[0]
		q := ms.Value
		if q == nil {
			q = ms.AverageValue
		}
		if q == nil {
			t.Fatalf("status %+v reports no value (error %q)", ms, d.Error)
		}
		wantText := resource.NewMilliQuantity(want.reported, resource.DecimalSI).String()
		if q.Milli != want.reported || convert.Quantity(*q) != wantText {
			t.Errorf("%s %v of %v: Setpoint reports %dm (%s); the controller %dm (%s)",
				spec.Type, texts(values), targetQ.String(), q.Milli, convert.Quantity(*q), want.reported, wantText)
		}
		if got, w := d.Explanation.Metrics[0].Proposal, wantProposal(want.proposal); got != w {
			t.Errorf("%s %v of %v, %d replicas: Setpoint proposes %d; the controller %v", spec.Type, texts(values), targetQ.String(), current, got, want.proposal)
		}
	})
}

// texts are the quantities as the metrics API serves them.
func texts(qs []resource.Quantity) []string {
	out := make([]string, len(qs))
	for i := range qs {
		out[i] = qs[i].String()
	}
	return out
}

func ptrInt32(v int32) *int32 { return &v }

// readyPod is a running pod, ready long before now.
func readyPod(name string) *corev1.Pod {
	start := metav1.NewTime(now.Add(-time.Hour))
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}}},
	}
}
