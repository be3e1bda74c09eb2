package engine

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"
)

// The engine kept resource lists as maps (map[string]int64) until lists
// became ResourceList. The oracle below is the map form of the code that
// changed — requests, the pod request aggregate, the per-pod resource sums,
// the CPU readiness grouping — as it was; FuzzResourceLists holds the new
// form to its answers on the same pods, with the lists in any order.

// oraclePod is a pod in the map form.
type oraclePod struct {
	containers         []oracleContainer
	requests, overhead map[string]int64
}

// oracleContainer is a container in the map form.
type oracleContainer struct {
	name          string
	requests      map[string]int64
	sidecar, init bool
}

// oracleRequests is calculator.requests in the map form.
func oracleRequests(pods []oraclePod, names []string, resource, container string) ([]int64, error) {
	out := make([]int64, len(pods))
	for i, pod := range pods {
		if container == "" && oraclePodLevelSet(pod.requests) {
			v, ok := oraclePodRequest(pod, resource)
			if !ok {
				return nil, fmt.Errorf("missing pod-level request for %s in Pod %s", resource, names[i])
			}
			out[i] = v
			continue
		}
		var sum int64
		found := false
		for _, ct := range pod.containers {
			if ct.init || (container != "" && ct.name != container) {
				continue
			}
			v, ok := ct.requests[resource]
			if !ok {
				return nil, fmt.Errorf("missing request for %s in container %s of Pod %s", resource, ct.name, names[i])
			}
			sum += v
			if container != "" {
				found = true
				break
			}
		}
		if container != "" && !found {
			return nil, fmt.Errorf("container %s not found in Pod %s", container, names[i])
		}
		out[i] = sum
	}
	return out, nil
}

// oraclePodRequest is podRequest in the map form.
func oraclePodRequest(pod oraclePod, resource string) (int64, bool) {
	var total, sidecars, initMax int64
	ok := false
	add := func(dst *int64, reqs map[string]int64) {
		v, has := reqs[resource]
		ok = ok || has
		*dst += v
	}
	for _, ct := range pod.containers {
		switch {
		case ct.sidecar:
			add(&total, ct.requests)
			add(&sidecars, ct.requests)
			initMax = max(initMax, sidecars)
		case ct.init:
			var need int64
			add(&need, ct.requests)
			initMax = max(initMax, need+sidecars)
		default:
			add(&total, ct.requests)
		}
	}
	total = max(total, initMax)
	if v, has := pod.requests[resource]; has && supportedPodLevel(resource) {
		total, ok = v, true
	}
	add(&total, pod.overhead)
	return total, ok
}

// oraclePodLevelSet is podLevelRequestsSet in the map form.
func oraclePodLevelSet(requests map[string]int64) bool {
	for name := range requests {
		if supportedPodLevel(name) {
			return true
		}
	}
	return false
}

// oracleSum is a PodMetrics item's sample of resource in the map form:
// the named container's usage, or the sum over containers; ok is false
// when there is none.
func oracleSum(usage []map[string]int64, names []string, resource, container string) (int64, bool) {
	if container != "" {
		for j, u := range usage {
			if names[j] == container {
				v, ok := u[resource]
				return v, ok
			}
		}
		return 0, false
	}
	var sum int64
	for _, u := range usage {
		v, ok := u[resource]
		if !ok {
			return 0, false
		}
		sum += v
	}
	return sum, len(usage) > 0
}

// oracleGroup is groupOf's CPU readiness test in its original form: a time
// sum per pod rather than one cutoff per metric.
func oracleGroup(pod *Pod, timestamp time.Time, window time.Duration, now time.Time, s *Settings) podGroup {
	ready := pod.Ready
	var unready bool
	if ready == nil || pod.StartTime.IsZero() {
		unready = true
	} else if pod.StartTime.Add(s.CPUInitializationPeriod).After(now) {
		unready = ready.Status == ConditionFalse || timestamp.Before(ready.LastTransitionTime.Add(window))
	} else {
		unready = ready.Status == ConditionFalse && pod.StartTime.Add(s.InitialReadinessDelay).After(ready.LastTransitionTime)
	}
	if unready {
		return groupUnready
	}
	return groupReady
}

// fuzzReader hands out numbers from the fuzzer's bytes; zero once they run
// out.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzReader) i64() int64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(r.u8())
	}
	return int64(v)
}

// The resources and containers the fuzzed pods draw from.
var (
	fuzzResources  = []string{"cpu", "memory", "hugepages-2Mi", "example.com/gpu"}
	fuzzContainers = []string{"app", "proxy", "setup"}
)

// fuzzList returns a resource map drawn from r and the same entries as a
// list in an order drawn from r.
func fuzzList(r *fuzzReader) (map[string]int64, ResourceList) {
	bits := r.u8()
	m := map[string]int64{}
	for k, name := range fuzzResources {
		if bits&(1<<k) != 0 {
			m[name] = int64(r.u8()) * 100
			if bits&0x80 != 0 {
				m[name] = r.i64() >> 2 // large values, negative ones too
			}
		}
	}
	var l ResourceList
	for _, name := range fuzzResources {
		if v, ok := m[name]; ok {
			l = append(l, ResourceQuantity{Name: name, Milli: v})
		}
	}
	for i := len(l) - 1; i > 0; i-- { // shuffle
		j := int(r.u8()) % (i + 1)
		l[i], l[j] = l[j], l[i]
	}
	return m, l
}

// FuzzResourceLists: on fuzzed pods and samples, resource lists in any
// order give what the map form gave — the same validity, requests (or
// error), per-pod samples and CPU readiness groups — and a resource named
// twice, which a map cannot hold, is rejected.
func FuzzResourceLists(f *testing.F) {
	f.Add([]byte{3, 0x13, 5, 7, 1, 0x0f, 1, 2, 3, 4, 0, 2})
	f.Add([]byte{5, 0x83, 255, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16})
	f.Add([]byte{8, 0x21, 0x42, 0x63, 0x84, 0xa5, 0xc6, 0xe7, 9, 18, 27, 36, 45, 54, 63, 72, 81, 90, 99, 108, 117, 126})
	f.Add([]byte("the quick brown fox jumps over the lazy dog, twice over"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &fuzzReader{data}
		now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		in := Input{Now: now, Settings: Settings{
			CPUInitializationPeriod: time.Duration(r.u8()) * 5 * time.Second,
			InitialReadinessDelay:   time.Duration(r.u8()) * time.Second,
		}}
		if r.u8() == 255 {
			in.Settings.CPUInitializationPeriod = time.Duration(r.i64() & (1<<63 - 1))
		}
		var pods []oraclePod
		var podNames []string
		var usages [][]map[string]int64
		var usageNames [][]string
		for i := range int(r.u8() % 8) {
			name := fmt.Sprintf("pod-%d", i)
			var op oraclePod
			// Started around the end of the CPU initialization period, made
			// ready around the end of the readiness delay: the edges are
			// where a changed comparison would show.
			s := &in.Settings
			p := Pod{Name: name, Phase: PodRunning, StartTime: now.Add(-s.CPUInitializationPeriod).Add(time.Duration(int8(r.u8())) * time.Second)}
			if v := r.u8(); v%4 != 0 {
				st := []ConditionStatus{ConditionTrue, ConditionFalse, ConditionUnknown}[v%3]
				at := p.StartTime.Add(s.InitialReadinessDelay).Add(time.Duration(int8(r.u8())) * time.Second)
				p.Ready = &PodReadiness{Status: st, LastTransitionTime: at}
			}
			shape := r.u8()
			if shape&1 != 0 {
				op.requests, p.Requests = fuzzList(r)
			}
			if shape&2 != 0 {
				op.overhead, p.Overhead = fuzzList(r)
			}
			for j := range int(shape>>2) % 4 {
				kind := r.u8()
				ct := oracleContainer{name: fuzzContainers[j%len(fuzzContainers)], sidecar: kind%4 == 1, init: kind%4 == 2}
				c := Container{Name: ct.name, Sidecar: ct.sidecar, Init: ct.init}
				ct.requests, c.Requests = fuzzList(r)
				op.containers = append(op.containers, ct)
				p.Containers = append(p.Containers, c)
			}
			pods, podNames = append(pods, op), append(podNames, name)
			in.Pods = append(in.Pods, p)
			// Its sample, if any, taken a little before now.
			if v := r.u8(); v%5 != 0 {
				pu := PodUsage{Pod: name, Timestamp: now.Add(-time.Duration(v%64) * time.Second), Window: 30 * time.Second}
				if v%7 == 0 {
					pu.Pod = "ghost" // a pod the input does not list
				}
				var us []map[string]int64
				var un []string
				for j := range int(v>>5) % 3 {
					u := ContainerUsage{Name: fuzzContainers[j]}
					var m map[string]int64
					m, u.Usage = fuzzList(r)
					us, un = append(us, m), append(un, u.Name)
					pu.Containers = append(pu.Containers, u)
				}
				in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, pu)
				usages, usageNames = append(usages, us), append(usageNames, un)
			}
		}

		// Validity: the map form took names set and amounts >= 0.
		wantValid := true
		for _, p := range pods {
			for _, m := range append([]map[string]int64{p.requests, p.overhead}, containerMaps(p)...) {
				for _, v := range m {
					wantValid = wantValid && v >= 0
				}
			}
		}
		for _, us := range usages {
			for _, m := range us {
				for _, v := range m {
					wantValid = wantValid && v >= 0
				}
			}
		}
		v := validator{}
		v.pods = newPodIndex(in.Pods)
		for i := range in.Pods {
			v.pod(i, &in.Pods[i])
		}
		for i := range in.ResourceMetrics.Pods {
			v.podUsage(i, &in.ResourceMetrics.Pods[i])
		}
		if (v.err == nil) != wantValid {
			t.Fatalf("validator says %v; the map form's validity is %v", v.err, wantValid)
		}
		if !wantValid {
			return
		}
		// A resource named twice is rejected wherever it is.
		if i := int(r.u8()); len(in.Pods) > 0 && len(in.Pods[i%len(in.Pods)].Containers) > 0 {
			p := &in.Pods[i%len(in.Pods)]
			c := p.Containers[i%len(p.Containers)]
			if len(c.Requests) > 0 {
				dup := append(append(ResourceList(nil), c.Requests...), c.Requests[int(r.u8())%len(c.Requests)])
				q := validator{}
				q.quantities("requests", dup)
				if q.err == nil || quantitiesValid(dup) {
					t.Fatalf("a list naming a resource twice passes: %v", dup)
				}
			}
		}

		c := &calculator{in: in, pods: v.pods}
		for _, resource := range fuzzResources {
			for _, container := range append([]string{""}, fuzzContainers...) {
				s := c.resourceSamples(in.ResourceMetrics.Pods, resource, container)
				checkSamples(t, s, in.Pods, in.ResourceMetrics.Pods, usages, usageNames, resource, container)
				want, werr := oracleRequests(pods, podNames, resource, container)
				got, totals, gerr := c.requests(s, resource, container)
				if fmt.Sprint(werr) != fmt.Sprint(gerr) || (werr == nil && fmt.Sprint(want) != fmt.Sprint(got)) {
					t.Fatalf("requests(%q, %q) = %v, %v; the map form gives %v, %v", resource, container, got, gerr, want, werr)
				}
				if gerr == nil {
					if r1, u1, a1, e1 := totals.ratio(60); fmt.Sprint(utilizationRatio(s, got, 60)) != fmt.Sprint(r1, u1, a1, e1) {
						t.Fatalf("requests' totals give %v %v %v %v; utilizationRatio gives %v", r1, u1, a1, e1, fmt.Sprint(utilizationRatio(s, got, 60)))
					}
				}
				if resource != "cpu" || container != "" {
					continue
				}
				g := c.groupPods(s, resource)
				for i := range in.Pods {
					if !s.byPod[i].ok || g.of[i] != groupReady && g.of[i] != groupUnready {
						continue
					}
					ts, window := s.when(s.byPod[i])
					if want := oracleGroup(&in.Pods[i], ts, window, now, &in.Settings); g.of[i] != want {
						t.Fatalf("pod %d is in group %d; the per-pod time sum puts it in %d", i, g.of[i], want)
					}
				}
			}
		}
	})
}

// containerMaps returns the request maps of p's containers.
func containerMaps(p oraclePod) []map[string]int64 {
	var out []map[string]int64
	for _, c := range p.containers {
		out = append(out, c.requests)
	}
	return out
}

// checkSamples compares resourceSamples' answer with the map form's sums:
// the last sample of a listed pod at its index, the others by name.
func checkSamples(t *testing.T, s *samples, pods []Pod, items []PodUsage, usages [][]map[string]int64, names [][]string, resource, container string) {
	t.Helper()
	want := make([]podSample, len(pods))
	extra := map[string]int64{}
	for k, it := range items {
		v, ok := oracleSum(usages[k], names[k], resource, container)
		if !ok {
			continue
		}
		listed := false
		for i := range pods {
			if pods[i].Name == it.Pod {
				want[i], listed = podSample{value: v, src: int32(k), ok: true}, true
			}
		}
		if !listed {
			extra[it.Pod] = v
		}
	}
	if fmt.Sprint(want) != fmt.Sprint(s.byPod) || !maps.Equal(extra, s.extra) && (len(extra) > 0 || len(s.extra) > 0) {
		t.Fatalf("resourceSamples(%q, %q) = %v, %v; the map form gives %v, %v\nitems %s", resource, container,
			s.byPod, s.extra, want, extra, strings.ReplaceAll(fmt.Sprint(items), "} {", "}\n{"))
	}
}
