package budget

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// TestPodBudgetsCoverEveryField: the typed checks of pods.go cover
// every string, map and list of the per-pod messages (a field added to
// them must be added to the checks too), and find an oversized value.
func TestPodBudgetsCoverEveryField(t *testing.T) {
	var got []string
	var collect func(prefix string, md protoreflect.MessageDescriptor)
	collect = func(prefix string, md protoreflect.MessageDescriptor) {
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			name := prefix + string(fd.Name())
			switch {
			case fd.IsMap() || fd.Kind() == protoreflect.StringKind:
				got = append(got, name)
			case fd.Kind() == protoreflect.MessageKind && strings.HasPrefix(string(fd.Message().FullName()), "setpoint.v1."):
				if fd.IsList() {
					got = append(got, name)
				}
				collect(name+".", fd.Message())
			}
		}
	}
	for _, m := range []proto.Message{&setpointv1.Pod{}, &setpointv1.PodMetrics{}, &setpointv1.MetricValue{}} {
		collect(string(m.ProtoReflect().Descriptor().Name())+".", m.ProtoReflect().Descriptor())
	}
	slices.Sort(got)
	want := []string{ // what checkPod, checkPodMetrics and checkMetricValue check
		"MetricValue.pod", "MetricValue.value",
		"Pod.containers", "Pod.containers.name", "Pod.containers.requests", "Pod.name", "Pod.overhead", "Pod.phase", "Pod.ready.status", "Pod.requests",
		"PodMetrics.containers", "PodMetrics.containers.name", "PodMetrics.containers.usage", "PodMetrics.pod",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("fields of the per-pod messages (-checked +present):\n%s", diff)
	}

	b := Budgets{MaxString: 8, MaxEntries: 2, MaxSpec: 1 << 20}
	long := strings.Repeat("x", 9)
	req := &setpointv1.RecommendRequest{
		Pods: []*setpointv1.Pod{{Name: "ok"}, {Name: "ok", Ready: &setpointv1.PodReadyCondition{Status: long},
			Containers: []*setpointv1.Container{{Name: "c", Requests: map[string]string{"cpu": long}}}}},
		ResourceMetrics: &setpointv1.ResourceMetrics{Items: []*setpointv1.PodMetrics{{Pod: long, Containers: make([]*setpointv1.ContainerMetrics, 3)}}},
		Observations:    []*setpointv1.MetricObservation{{Values: []*setpointv1.MetricValue{{Value: long}}}},
	}
	e := &setpointv1.ValidationError{}
	b.Check(e, req)
	var fields []string
	for _, v := range e.Violations {
		fields = append(fields, v.Field)
	}
	wantFields := []string{
		"pods[1].ready.status", `pods[1].containers[0].requests["cpu"]`,
		"resource_metrics.items[0].pod", "resource_metrics.items[0].containers",
		"observations[0].values[0].value",
	}
	// The walk visits fields in protoreflect's Range order, which is not
	// specified (it differs between builds): compare as sets.
	if diff := cmp.Diff(wantFields, fields, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("violations (-want +got):\n%s", diff)
	}
}
