package budget

import (
	"strconv"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// The per-pod messages come by the ten thousand; budgets checks them with
// their generated getters, not by reflection (BenchmarkBudgets: about 3×
// faster, 15× fewer allocations), and spells a path only for a violation
// (none allocated per pod). TestPodBudgetsCoverEveryField keeps the
// checks in step with the messages' fields.

// podChecks are the typed checks of the elements of the per-pod lists,
// for the reflective walk; the walker's path is the element's.
var podChecks = map[protoreflect.FullName]func(w *walker, m protoreflect.Message){
	"setpoint.v1.RecommendRequest.pods":    func(w *walker, m protoreflect.Message) { w.pod(m.Interface().(*setpointv1.Pod)) },
	"setpoint.v1.SimulateStep.pods":        func(w *walker, m protoreflect.Message) { w.pod(m.Interface().(*setpointv1.Pod)) },
	"setpoint.v1.FleetReport.pods":         func(w *walker, m protoreflect.Message) { w.pod(m.Interface().(*setpointv1.Pod)) },
	"setpoint.v1.ResourceMetrics.items":    func(w *walker, m protoreflect.Message) { w.podMetrics(m.Interface().(*setpointv1.PodMetrics)) },
	"setpoint.v1.MetricObservation.values": func(w *walker, m protoreflect.Message) { w.metricValue(m.Interface().(*setpointv1.MetricValue)) },
}

// str checks string s of the field at the path, then suffix.
func (w *walker) str(s string, suffix string) {
	if len(s) > w.MaxString {
		w.e.Add(w.at(suffix), "is %d bytes: at most %d", len(s), w.MaxString)
	}
}

// strMap checks map m of the field at the path, then suffix.
func (w *walker) strMap(m map[string]string, suffix string) {
	if len(m) > w.MaxEntries {
		w.e.Add(w.at(suffix), "has %d entries: at most %d", len(m), w.MaxEntries)
		return
	}
	if w.stringsFit {
		return
	}
	for k, v := range m {
		switch {
		case len(k) > w.MaxString:
			w.e.Add(w.at(suffix), "has a key of %d bytes: at most %d", len(k), w.MaxString)
			return
		case len(v) > w.MaxString:
			w.e.Add(w.at(suffix)+"["+strconv.Quote(k)+"]", "is %d bytes: at most %d", len(v), w.MaxString)
		}
	}
}

// list checks the length of a list of n entries at the path, then suffix.
func (w *walker) list(n int, suffix string) bool {
	if n > w.MaxEntries {
		w.e.Add(w.at(suffix), "has %d entries: at most %d", n, w.MaxEntries)
		return false
	}
	return true
}

// containerPath is the suffix of a pod's i-th container's field, spelled
// only for a violation.
type containerPath int

func (i containerPath) suffix(field string) string {
	return ".containers[" + strconv.Itoa(int(i)) + "]." + field
}

func (w *walker) pod(p *setpointv1.Pod) {
	w.str(p.GetName(), ".name")
	w.str(p.GetPhase(), ".phase")
	w.str(p.GetReady().GetStatus(), ".ready.status")
	w.strMap(p.GetRequests(), ".requests")
	w.strMap(p.GetOverhead(), ".overhead")
	if w.list(len(p.GetContainers()), ".containers") {
		for i, c := range p.GetContainers() {
			w.container(containerPath(i), c.GetName(), c.GetRequests(), "requests")
		}
	}
}

func (w *walker) podMetrics(p *setpointv1.PodMetrics) {
	w.str(p.GetPod(), ".pod")
	if w.list(len(p.GetContainers()), ".containers") {
		for i, c := range p.GetContainers() {
			w.container(containerPath(i), c.GetName(), c.GetUsage(), "usage")
		}
	}
}

// container checks the name and the quantity map (field mapField) of the
// container at i.
func (w *walker) container(i containerPath, name string, m map[string]string, mapField string) {
	if len(name) > w.MaxString {
		w.e.Add(w.at(i.suffix("name")), "is %d bytes: at most %d", len(name), w.MaxString)
	}
	if len(m) > w.MaxEntries || w.overlong(m) {
		w.strMap(m, i.suffix(mapField))
	}
}

// overlong reports whether a key or value of m is longer than maxString.
func (w *walker) overlong(m map[string]string) bool {
	if w.stringsFit {
		return false
	}
	for k, v := range m {
		if len(k) > w.MaxString || len(v) > w.MaxString {
			return true
		}
	}
	return false
}

func (w *walker) metricValue(v *setpointv1.MetricValue) {
	w.str(v.GetPod(), ".pod")
	w.str(v.GetValue(), ".value")
}
