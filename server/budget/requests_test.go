package budget

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// budgetCase sets one oversized value in a request.
type budgetCase struct {
	name string
	set  func(m protoreflect.Message)
}

// oversized returns a case for every string, list and map reachable from
// md that sets it over b's bounds: a long string, a long list or map (but
// for lists bounded elsewhere), a long map key or value. Lists are reached
// through their second entry, so paths carry an index other than 0.
func oversized(t *testing.T, md protoreflect.MessageDescriptor, b Budgets) []budgetCase {
	t.Helper()
	long := strings.Repeat("x", b.MaxString+1)
	var cases []budgetCase
	for i := range md.Fields().Len() {
		fd := md.Fields().Get(i)
		name := string(fd.Name())
		switch {
		case fd.IsMap():
			if fd.MapKey().Kind() != protoreflect.StringKind || fd.MapValue().Kind() != protoreflect.StringKind {
				t.Fatalf("%s: only map<string, string> is generated", fd.FullName())
			}
			entries := func(n int, key, value string) func(m protoreflect.Message) {
				return func(m protoreflect.Message) {
					mp := m.Mutable(fd).Map()
					for j := range n {
						mp.Set(protoreflect.ValueOfString(fmt.Sprint(key, j)).MapKey(), protoreflect.ValueOfString(value))
					}
				}
			}
			cases = append(cases,
				budgetCase{name + " entries", entries(b.MaxEntries+1, "k", "v")},
				budgetCase{name + " key", entries(1, long, "v")},
				budgetCase{name + " value", entries(1, "k", long)})
		case fd.IsList():
			if !boundedElsewhere[fd.FullName()] {
				cases = append(cases, budgetCase{name + " entries", func(m protoreflect.Message) {
					l := m.Mutable(fd).List()
					for range b.MaxEntries + 1 {
						l.Append(l.NewElement())
					}
				}})
			}
			switch fd.Kind() {
			case protoreflect.StringKind:
				cases = append(cases, budgetCase{name + "[1]", func(m protoreflect.Message) {
					l := m.Mutable(fd).List()
					l.Append(protoreflect.ValueOfString("ok"))
					l.Append(protoreflect.ValueOfString(long))
				}})
			case protoreflect.MessageKind:
				for _, c := range oversized(t, fd.Message(), b) {
					cases = append(cases, budgetCase{name + "[1]." + c.name, func(m protoreflect.Message) {
						l := m.Mutable(fd).List()
						l.Append(l.NewElement())
						c.set(l.AppendMutable().Message())
					}})
				}
			default:
				t.Fatalf("%s: lists of %v are not generated", fd.FullName(), fd.Kind())
			}
		case fd.Kind() == protoreflect.StringKind:
			cases = append(cases, budgetCase{name, func(m protoreflect.Message) { m.Set(fd, protoreflect.ValueOfString(long)) }})
		case fd.Kind() == protoreflect.BytesKind:
			cases = append(cases, budgetCase{name, func(m protoreflect.Message) { m.Set(fd, protoreflect.ValueOfBytes([]byte(long))) }})
		case fd.Kind() == protoreflect.MessageKind:
			for _, c := range oversized(t, fd.Message(), b) {
				cases = append(cases, budgetCase{name + "." + c.name, func(m protoreflect.Message) { c.set(m.Mutable(fd).Message()) }})
			}
		}
	}
	return cases
}

// violations are e's violations, sorted.
func violations(e *setpointv1.ValidationError) []string {
	var vs []string
	for _, v := range e.Violations {
		vs = append(vs, v.Field+": "+v.Description)
	}
	slices.Sort(vs)
	return vs
}

// TestTypedBudgetsMatchTheWalk: the typed walks of Recommend and Observe
// find what the reflective walk finds, at the same paths, for an oversized
// value at every string, list and map of the requests (a field added to
// the messages but not to the typed walks fails here), and find nothing in
// a request within its budgets.
func TestTypedBudgetsMatchTheWalk(t *testing.T) {
	b := Budgets{MaxString: 8, MaxEntries: 2, MaxSpec: 1 << 20}
	for _, req := range []proto.Message{&setpointv1.RecommendRequest{}, &setpointv1.ObserveRequest{}} {
		md := req.ProtoReflect().Descriptor()
		cases := oversized(t, md, b)
		if len(cases) < 5 {
			t.Fatalf("%s: only %d cases generated", md.Name(), len(cases))
		}
		for _, c := range cases {
			t.Run(string(md.Name())+"/"+c.name, func(t *testing.T) {
				m := req.ProtoReflect().New()
				c.set(m)
				typed, walked := &setpointv1.ValidationError{}, &setpointv1.ValidationError{}
				b.Check(typed, m.Interface())
				b.checkReflective(walked, m.Interface())
				if len(walked.Violations) == 0 {
					t.Fatalf("the reflective walk finds nothing in %v", m)
				}
				if diff := cmp.Diff(violations(walked), violations(typed)); diff != "" {
					t.Errorf("violations (-walk +typed):\n%s", diff)
				}
				// Received as its encoded size: the same, also when that
				// size is within maxString and so no string is checked.
				size := proto.Size(m.Interface())
				for _, bb := range []Budgets{b, {MaxString: size, MaxEntries: b.MaxEntries, MaxSpec: b.MaxSpec}} {
					sized, walked := &setpointv1.ValidationError{}, &setpointv1.ValidationError{}
					bb.CheckReceived(sized, m.Interface(), int64(size))
					bb.checkReflective(walked, m.Interface())
					if diff := cmp.Diff(violations(walked), violations(sized)); diff != "" {
						t.Errorf("maxString %d, received %d: violations (-walk +typed):\n%s", bb.MaxString, size, diff)
					}
				}
			})
		}
	}
	for name, m := range map[string]proto.Message{
		"recommend": &setpointv1.RecommendRequest{
			Target: &setpointv1.TargetKey{Cluster: "c", Namespace: "ns", Name: "web"},
			Spec: &setpointv1.HorizontalPodAutoscalerSpec{MaxReplicas: 3, Metrics: []*setpointv1.MetricSpec{{Type: "External", External: &setpointv1.ExternalMetricSource{
				Metric: &setpointv1.MetricIdentifier{Name: "q", Selector: &setpointv1.LabelSelector{MatchLabels: map[string]string{"q": "web"},
					MatchExpressions: []*setpointv1.LabelSelectorRequirement{{Key: "k", Operator: "In", Values: []string{"a", "b"}}}}},
				Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: "30"}}}}},
			Pods: []*setpointv1.Pod{{Name: "web-0", Requests: map[string]string{"cpu": "1"}, Containers: []*setpointv1.Container{{Name: "app"}}}},
		},
		"observe": &setpointv1.ObserveRequest{Target: &setpointv1.TargetKey{Name: "web"}, DecisionId: "d",
			Change: &setpointv1.ObserveRequest_Failed{Failed: &setpointv1.FailedChange{Message: "quota"}}},
	} {
		e := &setpointv1.ValidationError{}
		Budgets{MaxString: 16, MaxEntries: 2, MaxSpec: 1 << 20}.Check(e, m)
		if len(e.Violations) > 0 {
			t.Errorf("%s within budgets: %v", name, e)
		}
	}
}

// TestRequestsNestLessThanMaxDepth: the walker keeps the steps of a path
// in an array of maxDepth; every request of the services nests less deep
// (fields, list and map entries), and none nests without end.
func TestRequestsNestLessThanMaxDepth(t *testing.T) {
	var depth func(md protoreflect.MessageDescriptor, seen []protoreflect.FullName) int
	depth = func(md protoreflect.MessageDescriptor, seen []protoreflect.FullName) int {
		if slices.Contains(seen, md.FullName()) {
			t.Fatalf("%s nests in itself: %v", md.FullName(), seen)
		}
		seen = append(seen, md.FullName())
		deepest := 0
		for i := range md.Fields().Len() {
			fd := md.Fields().Get(i)
			d := 1
			if fd.IsList() || fd.IsMap() {
				d++
			}
			if fd.Kind() == protoreflect.MessageKind && !fd.IsMap() {
				d += depth(fd.Message(), seen)
			}
			deepest = max(deepest, d)
		}
		return deepest
	}
	files := []protoreflect.FileDescriptor{setpointv1.File_setpoint_v1_setpoint_proto, setpointv1.File_setpoint_v1_admin_proto}
	checked := 0
	for _, f := range files {
		for i := range f.Services().Len() {
			methods := f.Services().Get(i).Methods()
			for j := range methods.Len() {
				in := methods.Get(j).Input()
				if d := depth(in, nil); d >= maxDepth {
					t.Errorf("%s nests %d steps deep: the walker keeps %d", in.FullName(), d, maxDepth)
				}
				checked++
			}
		}
	}
	if checked < 5 {
		t.Fatalf("only %d methods found", checked)
	}
}
