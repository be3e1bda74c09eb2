package engine_test

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/setpointhq/setpoint/engine"
)

// fuzzBytes hands out numbers from the fuzzer's bytes; zero once they run
// out.
type fuzzBytes struct{ b []byte }

func (r *fuzzBytes) u8() uint8 {
	if len(r.b) == 0 {
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *fuzzBytes) u16() uint16 { return uint16(r.u8())<<8 | uint16(r.u8()) }

func (r *fuzzBytes) i64() int64 {
	var v uint64
	for range 8 {
		v = v<<8 | uint64(r.u8())
	}
	return int64(v)
}

// Flags of FuzzDecide's flags argument.
const (
	fuzzPodsMetric   = 1 << iota // add a Pods metric
	fuzzExternal                 // add an External metric
	fuzzAverageValue             // the External/Object metric has an AverageValue target
	fuzzObject                   // add an Object metric
	fuzzBehavior                 // the spec has a behavior
	fuzzFailures                 // some fetches fail
	fuzzNoSelector               // the scale has no selector
	fuzzScaledToZero             // the status starts with ScaledToZero=True
)

// fuzzInput builds the first input of a fuzzed sequence.
func fuzzInput(r *fuzzBytes, current, minR, maxR, target int32, tolPermille uint16, flags uint8, upWin, downWin int32) engine.Input {
	in := engine.Input{
		Now:  now,
		Spec: engine.Spec{MinReplicas: minR, MaxReplicas: maxR},
		Settings: engine.Settings{
			Tolerance:                    float64(tolPermille) / 1000,
			CPUInitializationPeriod:      time.Duration(r.u8()) * 5 * time.Second,
			InitialReadinessDelay:        time.Duration(r.u8()) * time.Second,
			DownscaleStabilizationWindow: time.Duration(r.u16()%1200) * time.Second,
		},
		Scale: engine.Scale{Replicas: current, StatusReplicas: current + int32(r.u8()%3) - 1, Selector: "app=web"},
	}
	if flags&fuzzNoSelector != 0 {
		in.Scale.Selector = ""
	}
	if flags&fuzzScaledToZero != 0 {
		in.Status.Conditions = []engine.Condition{{Type: engine.ScaledToZero, Status: engine.ConditionTrue, Reason: "ScaledToZero"}}
	}
	// Pods, with every readiness variant.
	for i := range int(r.u8() % 12) {
		name := string(rune('a' + i))
		v := r.u8()
		p := engine.Pod{
			Name: name, Phase: engine.PodRunning, StartTime: now.Add(-time.Duration(r.u16()%900) * time.Second),
			Containers: []engine.Container{{Name: "app", Requests: cpuMemory(int64(r.u16() % 4000))}},
		}
		switch v % 8 {
		case 0:
			p.Phase = engine.PodPending
		case 1:
			p.Phase = engine.PodFailed
		case 2:
			p.Deleting = true
		}
		switch (v >> 3) % 4 {
		case 0:
			p.Ready = &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: p.StartTime.Add(time.Duration(r.u8()) * time.Second)}
		case 1:
			p.Ready = &engine.PodReadiness{Status: engine.ConditionFalse, LastTransitionTime: p.StartTime.Add(time.Duration(r.u8()) * time.Second)}
		case 2:
			p.Ready = &engine.PodReadiness{Status: engine.ConditionUnknown, LastTransitionTime: now}
		}
		if v&0x20 != 0 {
			p.StartTime = time.Time{}
		}
		if v&0x40 != 0 {
			p.Requests = cpuMemory(int64(r.u16()))
		}
		in.Pods = append(in.Pods, p)
		if v&0x80 == 0 { // a sample
			in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{
				Pod: name, Timestamp: now.Add(-time.Duration(r.u8()) * time.Second), Window: time.Duration(r.u8()) * time.Second,
				Containers: []engine.ContainerUsage{{Name: "app", Usage: cpuMemory(int64(r.u16()))}},
			})
		}
	}
	if r.u8()%4 == 0 { // a sample of a pod that is not listed
		in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{Pod: "ghost", Timestamp: now,
			Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceListOf(map[string]int64{"cpu": int64(r.u16())})}}})
	}
	// Metrics.
	in.Spec.Metrics = []engine.MetricSpec{cpuUtilization(target)}
	in.Observations = []engine.Observation{{}}
	tt := engine.ValueTarget
	if flags&fuzzAverageValue != 0 {
		tt = engine.AverageValueTarget
	}
	if flags&fuzzPodsMetric != 0 {
		in.Spec.Metrics = append(in.Spec.Metrics, podsMetric("qps", int64(r.u16())+1))
		var o engine.Observation
		for i := range int(r.u8() % 12) {
			o.Values = append(o.Values, engine.MetricValue{Pod: string(rune('a' + i)), Milli: int64(r.u16()), Timestamp: now})
		}
		in.Observations = append(in.Observations, o)
	}
	if flags&fuzzExternal != 0 {
		in.Spec.Metrics = append(in.Spec.Metrics, externalMetric("queue", tt, int64(r.u16())+1))
		var o engine.Observation
		for range int(r.u8() % 4) {
			v := int64(r.u16()) * int64(r.u8())
			if r.u8() == 255 {
				v = r.i64()
			}
			o.Values = append(o.Values, engine.MetricValue{Milli: v})
		}
		in.Observations = append(in.Observations, o)
	}
	if flags&fuzzObject != 0 {
		in.Spec.Metrics = append(in.Spec.Metrics, objectMetric("rps", tt, int64(r.u16())+1))
		in.Observations = append(in.Observations, engine.Observation{Values: []engine.MetricValue{{Milli: int64(r.u16()) * int64(r.u8())}}})
	}
	if flags&fuzzFailures != 0 {
		i := int(r.u8()) % len(in.Observations)
		in.Observations[i].Err = "unavailable"
		if i == 0 {
			in.ResourceMetrics.Err = "unavailable"
		}
	}
	if flags&fuzzBehavior != 0 {
		in.Spec.Behavior = &engine.Behavior{
			ScaleUp:   fuzzRules(r, upWin),
			ScaleDown: fuzzRules(r, downWin),
		}
	}
	return in
}

// cpuMemory is a resource list of cpu millicores and as many mebibytes of
// memory; the memory only makes the list longer than one.
func cpuMemory(cpu int64) engine.ResourceList {
	return engine.ResourceList{{Name: "cpu", Milli: cpu}, {Name: "memory", Milli: cpu << 20 * 1000}}
}

// reversedLists returns in with every resource list in reverse order (and
// every other field shared).
func reversedLists(in engine.Input) engine.Input {
	rev := func(l engine.ResourceList) engine.ResourceList {
		out := slices.Clone(l)
		slices.Reverse(out)
		return out
	}
	in.Pods = slices.Clone(in.Pods)
	for i := range in.Pods {
		p := &in.Pods[i]
		p.Requests, p.Overhead = rev(p.Requests), rev(p.Overhead)
		p.Containers = slices.Clone(p.Containers)
		for j := range p.Containers {
			p.Containers[j].Requests = rev(p.Containers[j].Requests)
		}
	}
	in.ResourceMetrics.Pods = slices.Clone(in.ResourceMetrics.Pods)
	for i := range in.ResourceMetrics.Pods {
		u := &in.ResourceMetrics.Pods[i]
		u.Containers = slices.Clone(u.Containers)
		for j := range u.Containers {
			u.Containers[j].Usage = rev(u.Containers[j].Usage)
		}
	}
	return in
}

func fuzzRules(r *fuzzBytes, window int32) engine.Rules {
	rules := engine.Rules{
		StabilizationWindowSeconds: window,
		SelectPolicy:               []engine.SelectPolicy{engine.SelectMax, engine.SelectMin, engine.SelectDisabled}[r.u8()%3],
		Tolerance:                  float64(r.u8()) / 200,
	}
	for range int(r.u8()%3) + 1 {
		p := engine.Policy{Type: engine.PodsPolicy, Value: int32(r.u8()) + 1, PeriodSeconds: int32(r.u16()%1800) + 1}
		if r.u8()%2 == 0 {
			p.Type, p.Value = engine.PercentPolicy, int32(r.u16()%1000)+1
		}
		rules.Policies = append(rules.Policies, p)
	}
	return rules
}

// FuzzDecide checks invariants of sequences of decisions built from fuzzed
// numbers: no panic; Validate-rejected inputs give a *FieldError and nothing
// else; determinism and purity; min ≤ desired ≤ max on a rescale; with a
// behavior, no rescale beyond the policy limits re-derived here from the
// events in the history; and an explanation whose steps lead from the
// proposal to the decision.
func FuzzDecide(f *testing.F) {
	// Valid inputs that rescale (up and down, legacy and behavior, limited
	// and not), found by a random search over fuzzInput's bytes.
	f.Add(int32(6), int32(1), int32(20), int32(38), uint16(100), uint8(16), int32(39), int32(0), uint8(4), []byte{82, 179, 59, 157, 14, 181, 84, 17, 136, 160, 6, 174, 173, 186, 53, 10, 251, 178, 75, 94, 143, 48, 210, 106, 96, 234, 55, 171, 129, 121, 251, 85, 112, 55, 193, 174, 6, 11, 63, 173, 162, 70, 154, 227, 73, 46, 253, 181, 135, 243, 109, 131, 249, 182, 51, 192, 155, 20, 162, 131, 26, 135, 3, 219, 95, 124, 32, 80, 151, 122, 209, 52, 33, 63, 148, 64, 240, 70, 67, 126, 108, 159, 9, 77, 110, 234, 55, 43, 193, 192, 139, 149, 128, 129, 196, 70, 209, 214, 198, 132, 200, 9, 86, 29, 108, 15, 122, 13, 204, 61, 251, 58, 113, 190, 214, 69, 40, 163, 1, 250, 141, 128, 82, 2, 78, 11, 63, 173, 29, 151, 88, 152, 153, 119, 36, 183, 198})
	f.Add(int32(6), int32(1), int32(20), int32(42), uint16(100), uint8(16), int32(89), int32(0), uint8(4), []byte{164, 245, 249, 254, 197, 160, 24, 96, 27, 194, 172, 252, 66, 55, 150, 85, 35, 9, 63, 53, 159, 177, 97, 11, 29, 214, 39, 59, 247, 160, 203, 144, 183, 197, 39, 64, 83, 161, 78, 204, 25, 7, 226, 95, 117, 24, 45, 220, 225, 190, 193, 108, 29, 90, 208, 216, 191, 226, 183, 173, 97, 31, 61, 237, 202, 23, 30, 9, 42, 90, 38})
	f.Add(int32(2), int32(1), int32(20), int32(29), uint16(100), uint8(152), int32(87), int32(0), uint8(4), []byte{3, 112, 115, 124, 202, 110, 84, 71, 195, 87, 167, 229, 185, 247, 31, 1, 60, 95, 30, 59, 60, 62, 111, 154, 117, 206, 116, 47, 252, 99, 168, 168, 221, 212, 36, 55, 140, 66, 57, 104, 143, 88, 254, 186, 125, 109, 15, 182, 253, 84, 54, 246, 83, 227, 96, 253, 36, 103, 71, 97, 47, 74, 149, 177, 201, 126, 51, 106, 69, 229, 23, 144, 54, 89, 91, 162, 22, 142, 218})
	f.Add(int32(2), int32(1), int32(20), int32(96), uint16(100), uint8(142), int32(47), int32(156), uint8(4), []byte{142, 221, 228, 241, 74, 203, 97, 176, 39, 115, 252, 207, 19, 38, 73, 176, 190, 150, 138, 106, 89, 121, 13, 47, 24, 48, 178, 129, 183, 172, 128, 35, 196, 25, 233, 131, 0, 45, 102, 236, 119, 93, 86, 3, 20, 67, 20, 205, 242, 43, 248, 156, 143, 77, 196, 92, 250, 220, 131, 178, 22, 88, 98, 197, 36, 174, 133, 185, 98, 23, 189, 138, 189, 63, 248, 93, 102, 169, 244, 1, 69, 195, 100, 126, 250, 253, 90, 20, 178, 85, 203, 207, 83, 1, 236, 70, 87, 117, 182, 206, 209, 173, 71, 2, 152, 147, 10, 71, 14})
	f.Add(int32(10), int32(1), int32(20), int32(70), uint16(100), uint8(134), int32(89), int32(104), uint8(4), []byte{78, 70, 228, 205, 78, 103, 97, 149, 90, 241, 127, 154, 46, 117, 80, 106, 71, 140, 250, 160, 76, 217, 75, 77, 158, 206, 143, 141, 38, 55, 76, 149, 51, 5, 8, 106, 32, 52, 74, 147, 2, 77, 250, 239, 161, 245, 128, 77, 12, 169, 135, 210, 250, 219, 238, 114, 158, 19, 126, 113, 116, 178, 237, 179, 222, 201, 193, 96, 135, 71, 32, 91, 218, 102, 1, 197, 1, 233, 106, 121, 94, 118, 138, 203, 126, 13, 132, 86, 130, 36, 183, 154, 50, 236, 247, 160, 114, 103, 77})
	f.Add(int32(5), int32(1), int32(20), int32(68), uint16(100), uint8(5), int32(91), int32(135), uint8(4), []byte{221, 117, 224, 146, 88, 209, 213, 99, 18, 119, 111, 66, 31, 196, 81, 90, 186, 238, 182, 2, 173, 175, 205, 245, 237, 114, 67, 71, 226, 118, 143, 179, 178, 42, 21, 169, 83, 20, 196, 159, 90, 132, 170, 92, 250, 78, 180, 53, 122, 55, 78, 208, 88, 188, 178, 175, 233, 128, 174, 130, 233, 205, 215, 182, 62, 103, 106, 83, 251, 68, 150, 1, 190, 129, 21, 235, 152, 90, 173, 143, 154, 110, 241, 112, 205, 225, 251, 82, 190, 238, 161, 26, 191})
	f.Add(int32(6), int32(1), int32(20), int32(58), uint16(100), uint8(157), int32(0), int32(162), uint8(4), []byte{38, 41, 159, 240, 142, 229, 86, 75, 30, 36, 156, 181, 64, 163, 139, 254, 157, 163, 233, 212, 36, 166, 201, 34, 11, 97, 25, 215, 19, 85, 229, 185, 17, 94, 188, 253, 51, 91, 227, 26, 77, 221, 60, 93, 210, 181, 168, 31, 240, 141, 232, 253, 36, 163, 80, 13, 134, 146, 112, 84, 152, 91, 21, 1, 79, 29, 20, 83, 43, 27, 150, 172, 171, 178, 238, 100, 230, 159, 165, 215, 240, 108, 131, 226, 54, 206, 144, 87, 5, 204, 167, 102, 57, 236, 107, 221, 60, 170, 192, 73, 28, 115, 9, 242, 224, 246, 216, 28, 216, 63, 206, 190, 168, 180, 199, 228, 206, 251, 74, 48, 110, 79, 244, 177, 220, 99, 200, 153, 173, 193, 157, 226, 245, 132, 61, 80})
	f.Add(int32(4), int32(1), int32(20), int32(38), uint16(100), uint8(28), int32(0), int32(82), uint8(4), []byte{239, 119, 227, 113, 18, 0, 29, 20, 163, 99, 66, 234, 199, 26, 80, 238, 196, 158, 118, 230, 165, 209, 226, 6, 141, 115, 145, 96, 211, 120, 225, 180, 128, 37, 19, 96, 81, 196, 180, 47, 46, 3, 179, 205, 102, 30, 124, 87, 250, 44, 108, 144, 123, 136, 44, 177, 173, 19, 216, 36, 26, 125, 101, 6, 221, 51})
	f.Add(int32(5), int32(1), int32(20), int32(41), uint16(100), uint8(23), int32(0), int32(97), uint8(4), []byte{251, 199, 189, 200, 88, 122, 216, 246, 131, 65, 191, 132, 177, 212, 144, 62, 139, 87, 51, 20, 57, 6, 222, 244, 22, 159, 198, 245, 187, 70, 49, 170, 180, 171, 223, 187, 182, 179, 153, 249, 181, 31, 1, 206, 168, 85, 86, 252, 206, 161, 85, 249, 188, 173, 41, 242, 234, 119, 35, 28, 221, 95, 233, 178, 97, 235, 244, 85, 147, 19, 131, 228, 158, 150, 229, 146, 202, 9, 154, 159, 80, 92, 171, 89, 222, 85, 213, 115, 72, 110, 125, 154, 119, 254, 26, 31, 20, 118, 92, 67, 241, 131, 68, 153, 246, 63, 5, 166, 182, 212, 88, 122, 197, 74, 23, 180, 102, 204, 62, 33, 138, 213, 1, 168, 177, 118, 106, 36, 159, 185, 152, 217, 253, 213, 225, 248, 20, 135, 72, 122, 243, 76, 24, 242, 230, 145, 109, 141, 234, 2, 165, 229})
	// Scale to zero and from zero, failures, invalid input, huge numbers.
	f.Add(int32(2), int32(0), int32(10), int32(80), uint16(50), uint8(fuzzExternal|fuzzAverageValue|fuzzBehavior|fuzzScaledToZero), int32(0), int32(0), uint8(5),
		[]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 0, 0, 0, 0})
	f.Add(int32(0), int32(0), int32(5), int32(60), uint16(100), uint8(fuzzObject|fuzzScaledToZero), int32(0), int32(300), uint8(2), []byte{9, 9, 9})
	f.Add(int32(7), int32(1), int32(6), int32(60), uint16(100), uint8(fuzzFailures|fuzzExternal), int32(0), int32(300), uint8(1), []byte{})
	f.Add(int32(-1), int32(5), int32(3), int32(0), uint16(65535), uint8(fuzzNoSelector), int32(-1), int32(4000), uint8(1), []byte{255})
	f.Add(int32(math.MaxInt32), int32(1), int32(math.MaxInt32), int32(1), uint16(0), uint8(fuzzExternal|fuzzBehavior), int32(3600), int32(3600), uint8(4),
		[]byte{255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, current, minR, maxR, target int32, tolPermille uint16, flags uint8, upWin, downWin int32, steps uint8, data []byte) {
		r := &fuzzBytes{data}
		in := fuzzInput(r, current, minR, maxR, target, tolPermille, flags, upWin, downWin)
		var h engine.History
		for step := range int(steps%6) + 1 {
			if !checkDecision(t, in, h) {
				return
			}
			d, _ := engine.Decide(in, h)
			// Carry the decision forward and move the clock and the load.
			in.Status, h = d.Status, d.History
			if d.Rescale {
				h = engine.RecordScale(h, in.Spec.Behavior, in.Scale.Replicas, d.DesiredReplicas, in.Now)
				in.Scale.Replicas, in.Scale.StatusReplicas = d.DesiredReplicas, d.DesiredReplicas
			}
			in.Now = in.Now.Add(time.Duration(r.u16()%600) * time.Second)
			for i := range in.ResourceMetrics.Pods {
				for j := range in.ResourceMetrics.Pods[i].Containers {
					in.ResourceMetrics.Pods[i].Containers[j].Usage = cpuMemory(int64(r.u16()))
				}
				in.ResourceMetrics.Pods[i].Timestamp = in.Now.Add(-time.Duration(r.u8()) * time.Second)
			}
			for i := range in.Observations {
				vals := append([]engine.MetricValue(nil), in.Observations[i].Values...)
				for j := range vals {
					vals[j].Milli = int64(r.u16()) * int64(step+1)
				}
				in.Observations[i].Values = vals
			}
		}
	})
}

// checkDecision decides once and checks the invariants; it reports whether
// the input was valid.
func checkDecision(t *testing.T, in engine.Input, h engine.History) bool {
	t.Helper()
	hBefore := cloneHistory(h)
	d, err := engine.Decide(in, h)
	if verr := engine.Validate(in); verr != nil {
		var fe *engine.FieldError
		if err == nil || !errors.As(err, &fe) || !errors.Is(err, engine.ErrInvalidInput) || err.Error() != verr.Error() {
			t.Fatalf("Validate = %v but Decide = %v", verr, err)
		}
		if !cmp.Equal(d, engine.Decision{}) {
			t.Fatalf("Decide returned a decision with its error: %+v", d)
		}
		return false
	}
	if err != nil {
		t.Fatalf("Decide = %v for an input Validate accepts", err)
	}
	d2, err2 := engine.Decide(in, h)
	if err2 != nil || !cmp.Equal(d, d2, cmpopts.EquateNaNs()) {
		t.Fatalf("Decide is not deterministic: %v\n%s", err2, cmp.Diff(d, d2, cmpopts.EquateNaNs()))
	}
	if !cmp.Equal(hBefore, cloneHistory(h)) {
		t.Fatalf("Decide modified its history argument")
	}
	// Resource lists, like the maps they replaced, have no order that
	// counts.
	if d3, err3 := engine.Decide(reversedLists(in), h); err3 != nil || !cmp.Equal(d, d3, cmpopts.EquateNaNs()) {
		t.Fatalf("Decide depends on the order of resource lists: %v\n%s", err3, cmp.Diff(d, d3, cmpopts.EquateNaNs()))
	}

	spec, current, ex := in.Spec, in.Scale.Replicas, d.Explanation
	evaluated := len(ex.Metrics) > 0 && ex.Winner >= 0
	if d.Rescale {
		if d.DesiredReplicas < spec.MinReplicas || d.DesiredReplicas > spec.MaxReplicas {
			t.Fatalf("rescale %d → %d outside [%d, %d]; explanation %+v", current, d.DesiredReplicas, spec.MinReplicas, spec.MaxReplicas, ex)
		}
		if d.DesiredReplicas == current {
			t.Fatalf("rescale to the current count %d", current)
		}
	} else if d.DesiredReplicas != current && d.Error == "" {
		t.Fatalf("no rescale but desired %d != current %d", d.DesiredReplicas, current)
	}
	if !evaluated {
		return true
	}
	// The steps lead from the proposal to the decision.
	at := ex.Proposal
	for _, s := range ex.Steps {
		if s.From != at {
			t.Fatalf("step %+v does not start at %d; explanation %+v", s, at, ex)
		}
		at = s.To
	}
	if at != d.DesiredReplicas {
		t.Fatalf("steps end at %d, decision %d; explanation %+v", at, d.DesiredReplicas, ex)
	}
	// With a behavior, the policies bound the change; the raise to the
	// minimum when scaling from zero is upstream's one exception.
	if b := spec.Behavior; b != nil && d.Rescale {
		desired := d.DesiredReplicas
		for _, s := range ex.Steps {
			if s.Kind == engine.StepMinFromZero {
				desired = s.From
			}
		}
		switch {
		case desired > current:
			if limit := max(policyLimit(current, h, &b.ScaleUp, in.Now, true), current); desired > limit {
				t.Fatalf("scale-up %d → %d beyond the policy limit %d; rules %+v, history %+v", current, desired, limit, b.ScaleUp, h)
			}
		case desired < current:
			if limit := min(policyLimit(current, h, &b.ScaleDown, in.Now, false), current); desired < limit {
				t.Fatalf("scale-down %d → %d beyond the policy limit %d; rules %+v, history %+v", current, desired, limit, b.ScaleDown, h)
			}
		}
	}
	return true
}

// policyLimit re-derives upstream's calculateScaleUpLimitWithScalingRules
// (up) and calculateScaleDownLimitWithBehaviors (down): each policy allows
// a change from the count at the start of its period (the current count
// less the scale-ups and plus the scale-downs of events strictly inside the
// period); Max picks the largest change, Min the smallest, Disabled none.
func policyLimit(current int32, h engine.History, rules *engine.Rules, now time.Time, up bool) int32 {
	if rules.SelectPolicy == engine.SelectDisabled {
		return current
	}
	inPeriod := func(events []engine.ScaleEvent, period int32) int64 {
		var sum int64
		for _, e := range events {
			if e.At.After(now.Add(-time.Duration(period) * time.Second)) {
				sum += int64(e.Change)
			}
		}
		return sum
	}
	var limits []int32
	for _, p := range rules.Policies {
		start := int64(current) - inPeriod(h.ScaleUpEvents, p.PeriodSeconds) + inPeriod(h.ScaleDownEvents, p.PeriodSeconds)
		switch {
		case p.Type == engine.PodsPolicy && up:
			limits = append(limits, saturatedInt32(float64(start+int64(p.Value))))
		case p.Type == engine.PodsPolicy:
			limits = append(limits, saturatedInt32(float64(start-int64(p.Value))))
		case up:
			limits = append(limits, saturatedInt32(math.Ceil(float64(start)*(1+float64(p.Value)/100))))
		default:
			limits = append(limits, saturatedInt32(float64(start)*(1-float64(p.Value)/100)))
		}
	}
	// Up: Max allows the most (largest count); down: Max allows the most
	// (smallest count).
	largest := (rules.SelectPolicy == engine.SelectMax) == up
	out := limits[0]
	for _, l := range limits[1:] {
		if largest {
			out = max(out, l)
		} else {
			out = min(out, l)
		}
	}
	return out
}

// saturatedInt32 is int32(f) saturated to the int32 range (NaN is
// MinInt32), as the engine converts.
func saturatedInt32(f float64) int32 {
	switch {
	case f >= math.MaxInt32+1:
		return math.MaxInt32
	case math.IsNaN(f) || f < math.MinInt32:
		return math.MinInt32
	}
	return int32(f)
}
