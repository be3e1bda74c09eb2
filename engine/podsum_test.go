package engine

import (
	"math"
	"testing"
)

// Sums of per-pod values wrap around as Kubernetes' int64 arithmetic does
// (metrics.GetResourceUtilizationRatio and GetMetricUsageRatio add without
// checks); only the External sums saturate, as upstream's do.
func TestPerPodSumsWrapLikeKubernetes(t *testing.T) {
	huge := &samples{byPod: make([]podSample, 2)}
	huge.put(0, podSample{value: math.MaxInt64})
	huge.put(1, podSample{value: 2})
	var total int64 = math.MaxInt64
	total += 2 // the wrapped sum: math.MinInt64 + 1

	_, average := usageRatio(huge, 1000)
	if want := total / 2; average != want {
		t.Errorf("usageRatio average = %d, want the wrapped sum over 2 = %d", average, want)
	}

	_, utilization, raw, err := utilizationRatio(huge, []int64{100, 100}, 50)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64 = math.MaxInt64
	sum += 2
	if want := int32((sum * 100) / 200); utilization != want {
		t.Errorf("utilization = %d, want %d (wrapped sum × 100 over 200, truncated to int32)", utilization, want)
	}
	if want := sum / 2; raw != want {
		t.Errorf("raw average = %d, want %d", raw, want)
	}
}
