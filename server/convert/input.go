package convert

import (
	"fmt"
	"maps"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/hpa"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
)

// Kubernetes' defaults, resolved at this boundary.
const (
	// DefaultTolerance is the controller's default tolerance (fraction).
	DefaultTolerance = 0.1
	// DefaultCPUInitializationPeriod is the controller's default CPU
	// initialization period.
	DefaultCPUInitializationPeriod = 5 * time.Minute
	// DefaultInitialReadinessDelay is the controller's default initial
	// readiness delay.
	DefaultInitialReadinessDelay = 30 * time.Second
	// DefaultDownscaleStabilizationWindow is the controller's default
	// scale-down stabilization window.
	DefaultDownscaleStabilizationWindow = 5 * time.Minute
	// DefaultMinReplicas is spec.minReplicas when absent: the API
	// server's default.
	DefaultMinReplicas = hpa.DefaultMinReplicas
	// DefaultPodsMetricWindow is the window assumed for a Pods metric value
	// that states none.
	DefaultPodsMetricWindow = time.Minute
)

// defaultScaleUpPolicies and defaultScaleDownPolicies are the API server's
// default policies of a behavior direction (package hpa declares them).
var (
	defaultScaleUpPolicies   = policies(hpa.DefaultScaleUpPolicies())
	defaultScaleDownPolicies = policies(hpa.DefaultScaleDownPolicies())
)

// policies converts Kubernetes scaling policies.
func policies(ps []autoscalingv2.HPAScalingPolicy) []engine.Policy {
	out := make([]engine.Policy, len(ps))
	for i, p := range ps {
		out[i] = engine.Policy{Type: engine.PolicyType(p.Type), Value: p.Value, PeriodSeconds: p.PeriodSeconds}
	}
	return out
}

// Key returns the target key of an API target key.
func Key(k *setpointv1.TargetKey) target.Key {
	return target.Key{Cluster: k.GetCluster(), Namespace: k.GetNamespace(), Name: k.GetName()}
}

// TargetRef returns the target's form of a scale target reference.
func TargetRef(r *setpointv1.CrossVersionObjectReference) target.Ref {
	return target.Ref{APIVersion: r.GetApiVersion(), Kind: r.GetKind(), Name: r.GetName()}
}

// Observation returns what an ObserveRequest reports, for target.Observe.
// A request without a change has no kind, which target.Observe rejects.
func Observation(req *setpointv1.ObserveRequest) target.Observation {
	o := target.Observation{DecisionID: req.GetDecisionId()}
	switch c := req.GetChange().(type) {
	case *setpointv1.ObserveRequest_Applied:
		o.Kind, o.From, o.To = target.EventApplied, c.Applied.GetFrom(), c.Applied.GetTo()
	case *setpointv1.ObserveRequest_Failed:
		o.Kind, o.To, o.Message = target.EventFailed, c.Failed.GetTo(), c.Failed.GetMessage()
	case *setpointv1.ObserveRequest_External:
		o.Kind, o.From, o.To = target.EventExternal, c.External.GetFrom(), c.External.GetTo()
	}
	return o
}

// Input converts and validates a RecommendRequest, resolving every default,
// into the engine's input at now. The input's Status is left zero: it is
// the target's stored status, set by the caller. Errors are
// *setpointv1.ValidationError.
func Input(req *setpointv1.RecommendRequest, now time.Time) (engine.Input, error) {
	return InputIn(req, now, nil)
}

// InputIn is Input with the pods, resource metrics and observations of the
// input (and their containers, resource lists and values) in s's memory
// instead of new memory; a nil s is Input. The input is valid until s is
// used again or Reset: nothing of it may be kept beyond that (the engine
// keeps none of it in a decision; TestInputInKeepsNothing).
func InputIn(req *setpointv1.RecommendRequest, now time.Time, s *Scratch) (engine.Input, error) {
	// The first pass builds no field paths of pods, containers and values:
	// a valid request of many pods costs no formatting. Only a request
	// with violations is converted again, with every path, to report them.
	in, err := input(req, now, true, s)
	if err != nil {
		in, err = input(req, now, false, s)
	}
	return in, err
}

// Scratch is reusable memory for the per-pod and per-value parts of the
// inputs InputIn builds: a server converting many requests allocates them
// once instead of for each request. The zero value is ready to use. A
// Scratch is used by one conversion at a time; the input it holds is valid
// until its next use or Reset.
type Scratch struct {
	pods       []engine.Pod
	containers []engine.Container
	readies    []engine.PodReadiness
	requests   engine.ResourceList // the pods' and containers' resource lists
	usages     []engine.PodUsage
	cusages    []engine.ContainerUsage
	usage      engine.ResourceList // the containers' usage lists
	obs        []engine.Observation
	values     []engine.MetricValue
}

// maxScratchEntries is the largest array a Scratch keeps across Reset: a
// rare request of thousands of pods does not pin its memory for the
// requests after it.
const maxScratchEntries = 1024

// Reset forgets the input s holds: its memory is cleared, so that it keeps
// no request's strings alive, and arrays larger than maxScratchEntries are
// let go.
func (s *Scratch) Reset() {
	resetScratch(&s.pods)
	resetScratch(&s.containers)
	resetScratch(&s.readies)
	resetScratch(&s.requests)
	resetScratch(&s.usages)
	resetScratch(&s.cusages)
	resetScratch(&s.usage)
	resetScratch(&s.obs)
	resetScratch(&s.values)
}

// resetScratch clears the part of *buf's array used since the last reset
// (its length), or drops the array when it is larger than
// maxScratchEntries: after a large request, a small one clears only what
// it used.
func resetScratch[S ~[]T, T any](buf *S) {
	if cap(*buf) > maxScratchEntries {
		*buf = nil
		return
	}
	clear(*buf)
	*buf = (*buf)[:0]
}

// scratchSlice returns an empty slice of capacity n of *buf's array,
// growing it when too small; *buf's length becomes at least n (the part
// Reset clears).
func scratchSlice[S ~[]T, T any](buf *S, n int) S {
	if cap(*buf) < n {
		*buf = make(S, n)
	}
	if len(*buf) < n {
		*buf = (*buf)[:n]
	}
	return (*buf)[:0:n]
}

// input is InputIn; quiet leaves the per-item field paths empty.
func input(req *setpointv1.RecommendRequest, now time.Time, quiet bool, s *Scratch) (engine.Input, error) {
	if s == nil {
		s = &Scratch{} // its arrays are made to measure
	}
	c := &converter{err: &setpointv1.ValidationError{}, quiet: quiet, scratch: s}
	in := engine.Input{Now: now, Namespace: req.GetTarget().GetNamespace()}
	in.Settings = c.settings(req.GetSettings())
	in.Spec = c.spec(req.GetSpec(), in.Settings)
	if a := c.ahead("spec", req.GetSpec()); !now.IsZero() {
		in.Proposals = a.Proposals(now) // the schedule windows open at now
	}
	c.podStartup(req.GetPodStartup())
	in.Scale = c.scale(req.GetScale())
	in.Pods = c.pods(req.GetPods())
	in.ResourceMetrics = c.resourceMetrics(req.GetResourceMetrics())
	in.Observations = c.observations(req.GetObservations(), in.Spec.Metrics)
	if err := c.err.Err(); err != nil {
		return engine.Input{}, err
	}
	return in, nil
}

// Settings resolves controller settings with Kubernetes' defaults.
func Settings(s *setpointv1.ControllerSettings) (engine.Settings, error) {
	c := &converter{err: &setpointv1.ValidationError{}}
	out := c.settings(s)
	return out, c.err.Err()
}

// converter accumulates the violations found while converting a request.
type converter struct {
	err *setpointv1.ValidationError
	// quiet: indexed and keyed return "" — the violations are only
	// counted, not reported (see Input).
	quiet bool
	// lists backs the resource lists of the pods or the resource metrics
	// being converted: sized once for all of them, each list a part of it.
	lists engine.ResourceList
	// scratch is the memory of the per-pod and per-value parts (InputIn).
	scratch *Scratch
}

// indexed returns the field path prefix[i], or "" when quiet.
func (c *converter) indexed(prefix string, i int) string {
	if c.quiet {
		return ""
	}
	return prefix + "[" + strconv.Itoa(i) + "]"
}

// at returns the field path f+suffix, or "" when quiet.
func (c *converter) at(f, suffix string) string {
	if c.quiet {
		return ""
	}
	return f + suffix
}

// keyed returns the field path prefix["key"], or "" when quiet.
func (c *converter) keyed(prefix, key string) string {
	if c.quiet {
		return ""
	}
	return prefix + "[" + strconv.Quote(key) + "]"
}

func (c *converter) settings(s *setpointv1.ControllerSettings) engine.Settings {
	out := engine.Settings{
		Tolerance:                    DefaultTolerance,
		CPUInitializationPeriod:      DefaultCPUInitializationPeriod,
		InitialReadinessDelay:        DefaultInitialReadinessDelay,
		DownscaleStabilizationWindow: DefaultDownscaleStabilizationWindow,
	}
	if s == nil {
		return out
	}
	if s.Tolerance != nil {
		out.Tolerance = s.GetTolerance()
		if math.IsNaN(out.Tolerance) || math.IsInf(out.Tolerance, 0) || out.Tolerance < 0 {
			c.err.Add("settings.tolerance", "must be a finite fraction >= 0, got %v", out.Tolerance)
		}
	}
	c.duration("settings.cpu_initialization_period", s.GetCpuInitializationPeriod(), &out.CPUInitializationPeriod)
	c.duration("settings.initial_readiness_delay", s.GetInitialReadinessDelay(), &out.InitialReadinessDelay)
	c.duration("settings.downscale_stabilization_window", s.GetDownscaleStabilizationWindow(), &out.DownscaleStabilizationWindow)
	return out
}

// duration sets *out from d when d is present; d must be valid and >= 0.
func (c *converter) duration(field string, d *durationpb.Duration, out *time.Duration) {
	if d == nil {
		return
	}
	if err := d.CheckValid(); err != nil {
		c.err.Add(field, "must be a valid duration: within ±10000 years, nanos within ±999999999 and of the seconds' sign")
		return
	}
	if d.AsDuration() < 0 {
		c.err.Add(field, "must be >= 0, got %v", d.AsDuration())
		return
	}
	*out = d.AsDuration()
}

// timestamp returns t as a time, zero when absent.
func (c *converter) timestamp(field string, t *timestamppb.Timestamp) time.Time {
	if t == nil {
		return time.Time{}
	}
	if err := t.CheckValid(); err != nil {
		c.err.Add(field, "must be a valid timestamp: from year 1 to 9999, nanos within [0, 999999999]")
		return time.Time{}
	}
	return t.AsTime()
}

// quantity parses a quantity into a milli-value. ok is false (and a
// violation recorded) when it does not parse.
func (c *converter) quantity(field, s string) (milli int64, ok bool) {
	if v, ok := plainMilli(s); ok {
		return v, true
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		c.err.Add(field, "must be a quantity: %v", err)
		return 0, false
	}
	// MilliValue saturates: a quantity beyond the int64 milli-value range
	// would silently become another number.
	if q.Cmp(*maxMilliQuantity) > 0 || q.Cmp(*minMilliQuantity) < 0 {
		c.err.Add(field, "must be within ±%s, got %q", maxMilliQuantity.String(), s)
		return 0, false
	}
	return q.MilliValue(), true
}

// plainMilli returns the milli-value of s when s is a plain decimal
// integer of 1 to 15 digits followed by nothing, "m", a decimal SI suffix
// up to "P" or a binary SI suffix up to "Pi" ("250m", "3", "512Mi", "2G")
// and the value fits an int64 — how CPU and memory quantities and most
// metric values are spelled — which is the value resource.ParseQuantity
// gives it (FuzzPlainMilli). ok is false for any other spelling, which then
// goes through resource.ParseQuantity.
func plainMilli(s string) (milli int64, ok bool) {
	n := 0
	var v uint64
	for ; n < len(s) && n < 16; n++ {
		d := s[n]
		if d < '0' || d > '9' {
			break
		}
		v = v*10 + uint64(d-'0')
	}
	if n == 0 || n > 15 {
		return 0, false
	}
	unit, ok := suffixMilli(s[n:])
	if !ok {
		return 0, false
	}
	hi, lo := bits.Mul64(v, unit)
	if hi != 0 || lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

// suffixMilli returns the milli-value of one unit of a quantity suffix
// that plainMilli takes.
func suffixMilli(suffix string) (uint64, bool) {
	switch suffix {
	case "m":
		return 1, true
	case "":
		return 1e3, true
	case "k":
		return 1e6, true
	case "M":
		return 1e9, true
	case "G":
		return 1e12, true
	case "T":
		return 1e15, true
	case "P":
		return 1e18, true
	case "Ki":
		return 1e3 << 10, true
	case "Mi":
		return 1e3 << 20, true
	case "Gi":
		return 1e3 << 30, true
	case "Ti":
		return 1e3 << 40, true
	case "Pi":
		return 1e3 << 50, true
	}
	return 0, false
}

// The quantities whose milli-values an int64 holds.
var (
	maxMilliQuantity = resource.NewMilliQuantity(math.MaxInt64, resource.DecimalSI)
	minMilliQuantity = resource.NewMilliQuantity(-math.MaxInt64, resource.DecimalSI)
)

// quantities converts a resource name → quantity map into a resource list
// sorted by name, taken from c.lists; values must be >= 0. An empty map
// gives nil.
func (c *converter) quantities(field string, m map[string]string) engine.ResourceList {
	if len(m) == 0 {
		return nil
	}
	start := len(c.lists)
	if c.commonQuantities(field, m) {
		return c.lists[start:len(c.lists):len(c.lists)]
	}
	if c.quiet {
		// The first, quiet pass only asks whether there is a violation.
		for name, s := range m {
			c.quantityEntry(field, name, s)
		}
	} else {
		// Sorted, so that violations come in a stable order.
		for _, name := range slices.Sorted(maps.Keys(m)) {
			c.quantityEntry(field, name, m[name])
		}
	}
	out := c.lists[start:len(c.lists):len(c.lists)]
	if len(out) > 1 {
		slices.SortFunc(out, func(a, b engine.ResourceQuantity) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// commonResources are the resource names nearly every list is made of, in
// name order.
var commonResources = [...]string{"cpu", "ephemeral-storage", "memory"}

// commonQuantities converts m as quantities does when m names only common
// resources, and reports whether it did. Looked up by name, in name order,
// such a list needs neither an iteration of the map nor a sort.
func (c *converter) commonQuantities(field string, m map[string]string) bool {
	if len(m) > len(commonResources) {
		return false
	}
	var values [len(commonResources)]string
	var has [len(commonResources)]bool
	found := 0
	// cpu and memory first: "ephemeral-storage" is looked up only when the
	// map has more than they are.
	for _, i := range [...]int{0, 2, 1} {
		if found == len(m) {
			break
		}
		values[i], has[i] = m[commonResources[i]]
		if has[i] {
			found++
		}
	}
	if found != len(m) {
		return false
	}
	for i, name := range commonResources {
		if has[i] {
			c.quantityEntry(field, name, values[i])
		}
	}
	return true
}

// quantityEntry converts the entry name: s of the map at field, appending
// it to c.lists.
func (c *converter) quantityEntry(field, name, s string) {
	if name == "" {
		c.err.Add(field, "resource name must be set")
		return
	}
	f := c.keyed(field, name)
	if v, ok := c.quantity(f, s); ok {
		if v < 0 {
			c.err.Add(f, "must be a quantity >= 0, got %q", s)
		}
		c.lists = append(c.lists, engine.ResourceQuantity{Name: name, Milli: v})
	}
}

func (c *converter) spec(s *setpointv1.HorizontalPodAutoscalerSpec, settings engine.Settings) engine.Spec {
	out := engine.Spec{MinReplicas: DefaultMinReplicas, MaxReplicas: s.GetMaxReplicas()}
	if s == nil {
		c.err.Add("spec", "must be set")
		return out
	}
	if s.MinReplicas != nil {
		out.MinReplicas = s.GetMinReplicas()
	}
	if out.MinReplicas < 0 {
		c.err.Add("spec.min_replicas", "must be >= 0, got %d", out.MinReplicas)
	}
	if out.MaxReplicas < 1 {
		c.err.Add("spec.max_replicas", "must be >= 1, got %d", out.MaxReplicas)
	} else if out.MinReplicas > out.MaxReplicas {
		c.err.Add("spec.min_replicas", "must be <= spec.max_replicas (%d), got %d", out.MaxReplicas, out.MinReplicas)
	}
	if len(s.GetMetrics()) == 0 {
		c.err.Add("spec.metrics", "must have at least one metric")
	}
	objectOrExternal := false
	if n := len(s.GetMetrics()); n > 0 {
		out.Metrics = make([]engine.MetricSpec, 0, n)
	}
	for i, m := range s.GetMetrics() {
		ms := c.metric(c.indexed("spec.metrics", i), m)
		objectOrExternal = objectOrExternal || ms.Type == engine.ObjectSource || ms.Type == engine.ExternalSource
		out.Metrics = append(out.Metrics, ms)
	}
	if out.MinReplicas == 0 && len(out.Metrics) > 0 && !objectOrExternal {
		c.err.Add("spec.min_replicas", "may be 0 only with at least one Object or External metric")
	}
	if b := s.GetBehavior(); b != nil {
		window := int32(settings.DownscaleStabilizationWindow / time.Second)
		out.Behavior = &engine.Behavior{
			ScaleUp:   c.rules("spec.behavior.scale_up", b.GetScaleUp(), hpa.DefaultScaleUpStabilizationWindowSeconds, defaultScaleUpPolicies, settings.Tolerance),
			ScaleDown: c.rules("spec.behavior.scale_down", b.GetScaleDown(), window, defaultScaleDownPolicies, settings.Tolerance),
		}
	}
	return out
}

// rules resolves one direction of a behavior with the API server's
// defaulting.
func (c *converter) rules(f string, r *setpointv1.ScalingRules, window int32, policies []engine.Policy, tolerance float64) engine.Rules {
	out := engine.Rules{StabilizationWindowSeconds: window, SelectPolicy: engine.SelectMax, Tolerance: tolerance}
	if len(r.GetPolicies()) == 0 {
		out.Policies = append([]engine.Policy(nil), policies...)
	}
	if r == nil {
		return out
	}
	if r.StabilizationWindowSeconds != nil {
		out.StabilizationWindowSeconds = r.GetStabilizationWindowSeconds()
		if w := out.StabilizationWindowSeconds; w < 0 || w > engine.MaxStabilizationWindowSeconds {
			c.err.Add(f+".stabilization_window_seconds", "must be within [0, %d], got %d", engine.MaxStabilizationWindowSeconds, w)
		}
	}
	switch sp := engine.SelectPolicy(r.GetSelectPolicy()); sp {
	case "":
	case engine.SelectMax, engine.SelectMin, engine.SelectDisabled:
		out.SelectPolicy = sp
	default:
		c.err.Add(f+".select_policy", "must be Max, Min or Disabled, got %q", sp)
	}
	if len(r.GetPolicies()) > 0 {
		out.Policies = make([]engine.Policy, 0, len(r.GetPolicies()))
		for i, p := range r.GetPolicies() {
			pf := c.indexed(c.at(f, ".policies"), i)
			pt := engine.PolicyType(p.GetType())
			if pt != engine.PodsPolicy && pt != engine.PercentPolicy {
				c.err.Add(pf+".type", "must be Pods or Percent, got %q", pt)
			}
			if p.GetValue() <= 0 {
				c.err.Add(pf+".value", "must be > 0, got %d", p.GetValue())
			}
			if ps := p.GetPeriodSeconds(); ps <= 0 || ps > engine.MaxPolicyPeriodSeconds {
				c.err.Add(pf+".period_seconds", "must be within [1, %d], got %d", engine.MaxPolicyPeriodSeconds, ps)
			}
			out.Policies = append(out.Policies, engine.Policy{Type: pt, Value: p.GetValue(), PeriodSeconds: p.GetPeriodSeconds()})
		}
	}
	if t := r.GetTolerance(); t != "" {
		q, err := resource.ParseQuantity(t)
		switch {
		case err != nil:
			c.err.Add(f+".tolerance", "must be a quantity: %v", err)
		case q.Sign() < 0:
			c.err.Add(f+".tolerance", "must be a quantity >= 0, got %q", t)
		default:
			out.Tolerance = toleranceValue(q)
		}
	}
	return out
}

func (c *converter) metric(f string, m *setpointv1.MetricSpec) engine.MetricSpec {
	out := engine.MetricSpec{Type: engine.MetricSourceType(m.GetType())}
	missing := func(field string) { c.err.Add(f+"."+field, "must be set for a %s metric", out.Type) }
	switch out.Type {
	case engine.ResourceSource:
		r := m.GetResource()
		if r == nil {
			missing("resource")
			break
		}
		out.Resource = r.GetName()
		c.nonEmpty(f+".resource.name", out.Resource)
		out.Target = c.target(f+".resource.target", r.GetTarget(), averageValueFirst, engine.UtilizationTarget)
	case engine.ContainerResourceSource:
		r := m.GetContainerResource()
		if r == nil {
			missing("container_resource")
			break
		}
		out.Resource, out.Container = r.GetName(), r.GetContainer()
		c.nonEmpty(f+".container_resource.name", out.Resource)
		c.nonEmpty(f+".container_resource.container", out.Container)
		out.Target = c.target(f+".container_resource.target", r.GetTarget(), averageValueFirst, engine.UtilizationTarget)
	case engine.PodsSource:
		p := m.GetPods()
		if p == nil {
			missing("pods")
			break
		}
		out.Metric = c.identifier(f+".pods.metric", p.GetMetric())
		out.Target = c.target(f+".pods.target", p.GetTarget(), averageValueOnly)
	case engine.ObjectSource:
		o := m.GetObject()
		if o == nil {
			missing("object")
			break
		}
		out.Metric = c.identifier(f+".object.metric", o.GetMetric())
		d := o.GetDescribedObject()
		out.DescribedObject = engine.ObjectReference{APIVersion: d.GetApiVersion(), Kind: d.GetKind(), Name: d.GetName()}
		c.nonEmpty(f+".object.described_object.kind", d.GetKind())
		c.nonEmpty(f+".object.described_object.name", d.GetName())
		out.Target = c.target(f+".object.target", o.GetTarget(), byType, engine.ValueTarget)
	case engine.ExternalSource:
		e := m.GetExternal()
		if e == nil {
			missing("external")
			break
		}
		out.Metric = c.identifier(f+".external.metric", e.GetMetric())
		out.Target = c.target(f+".external.target", e.GetTarget(), averageValueFirst, engine.ValueTarget)
	default:
		c.err.Add(f+".type", "must be Resource, ContainerResource, Pods, Object or External, got %q", out.Type)
	}
	return out
}

func (c *converter) nonEmpty(field, v string) {
	if v == "" {
		c.err.Add(field, "must be set")
	}
}

func (c *converter) identifier(f string, id *setpointv1.MetricIdentifier) engine.MetricIdentifier {
	c.nonEmpty(c.at(f, ".name"), id.GetName())
	out := engine.MetricIdentifier{Name: id.GetName()}
	if s := id.GetSelector(); s != nil {
		out.Selector = &engine.LabelSelector{}
		if len(s.GetMatchLabels()) > 0 {
			out.Selector.MatchLabels = make(map[string]string, len(s.GetMatchLabels()))
			for k, v := range s.GetMatchLabels() {
				out.Selector.MatchLabels[k] = v
			}
		}
		for i, e := range s.GetMatchExpressions() {
			switch e.GetOperator() {
			case "In", "NotIn", "Exists", "DoesNotExist":
			default:
				c.err.Add(fmt.Sprintf("%s.selector.match_expressions[%d].operator", f, i), "must be In, NotIn, Exists or DoesNotExist, got %q", e.GetOperator())
			}
			out.Selector.MatchExpressions = append(out.Selector.MatchExpressions, engine.LabelSelectorRequirement{
				Key: e.GetKey(), Operator: e.GetOperator(), Values: append([]string(nil), e.GetValues()...),
			})
		}
	}
	return out
}

// targetRule says how a metric source reads its MetricTarget, following the
// Kubernetes controller.
type targetRule int

const (
	// averageValueFirst: average_value when set, else the fallback type's
	// field (Resource, ContainerResource: utilization; External: value).
	averageValueFirst targetRule = iota
	// averageValueOnly: average_value (Pods).
	averageValueOnly
	// byType: the field named by type (Object: Value or AverageValue).
	byType
)

// target resolves a metric target. fallback is the type used when
// averageValueFirst finds no average_value.
func (c *converter) target(f string, t *setpointv1.MetricTarget, rule targetRule, fallback ...engine.TargetType) engine.Target {
	if t == nil {
		c.err.Add(f, "must be set")
		return engine.Target{}
	}
	declared := engine.TargetType(t.GetType())
	switch declared {
	case engine.UtilizationTarget, engine.ValueTarget, engine.AverageValueTarget:
	default:
		c.err.Add(f+".type", "must be Utilization, Value or AverageValue, got %q", declared)
		return engine.Target{}
	}
	milli := func(field, s string) int64 {
		at := c.at(f, field)
		v, ok := c.quantity(at, s)
		if ok && v <= 0 {
			c.err.Add(at, "must be a quantity > 0, got %q", s)
		}
		return v
	}
	var typ engine.TargetType
	switch rule {
	case averageValueFirst:
		typ = fallback[0]
		if t.GetAverageValue() != "" {
			typ = engine.AverageValueTarget
		}
	case averageValueOnly:
		typ = engine.AverageValueTarget
	case byType:
		typ = declared
	}
	out := engine.Target{Type: typ}
	switch typ {
	case engine.AverageValueTarget:
		if t.GetAverageValue() == "" {
			c.err.Add(f+".average_value", "must be set")
			break
		}
		out.Milli = milli(".average_value", t.GetAverageValue())
	case engine.ValueTarget:
		if t.GetValue() == "" {
			c.err.Add(f+".value", "must be set")
			break
		}
		out.Milli = milli(".value", t.GetValue())
	case engine.UtilizationTarget:
		if t.AverageUtilization == nil {
			c.err.Add(f+".average_utilization", "must be set (or average_value)")
			break
		}
		out.Utilization = t.GetAverageUtilization()
		if out.Utilization <= 0 {
			c.err.Add(f+".average_utilization", "must be > 0, got %d", out.Utilization)
		}
	}
	return out
}

func (c *converter) scale(s *setpointv1.Scale) engine.Scale {
	out := engine.Scale{Replicas: s.GetReplicas(), StatusReplicas: s.GetStatusReplicas(), Selector: s.GetSelector()}
	if out.Replicas < 0 {
		c.err.Add("scale.replicas", "must be >= 0, got %d", out.Replicas)
	}
	if out.StatusReplicas < 0 {
		c.err.Add("scale.status_replicas", "must be >= 0, got %d", out.StatusReplicas)
	}
	if out.Selector != "" && !plainSelector(out.Selector) {
		if _, err := labels.Parse(out.Selector); err != nil {
			out.SelectorError = err.Error()
		}
	}
	return out
}

// plainSelector reports whether s is a selector of equality requirements
// only, "key=value" joined by commas, with keys and values of 1 to 63
// letters, digits, '-', '_' and '.' that start and end with a letter or
// digit (and, to stay clear of the lexer's keywords, are not "in" or
// "notin") — how scale selectors are mostly spelled ("app=web"), and
// selectors that labels.Parse accepts (FuzzPlainSelector). False means
// nothing: s then goes through labels.Parse.
func plainSelector(s string) bool {
	for term := range strings.SplitSeq(s, ",") {
		k, v, ok := strings.Cut(term, "=")
		if !ok || !plainLabel(k) || !plainLabel(v) {
			return false
		}
	}
	return true
}

// plainLabel reports whether s is a label name or value plainSelector
// takes.
func plainLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s == "in" || s == "notin" {
		return false
	}
	for i := range len(s) {
		switch b := s[i]; {
		case 'a' <= b && b <= 'z', 'A' <= b && b <= 'Z', '0' <= b && b <= '9':
		case (b == '-' || b == '_' || b == '.') && i > 0 && i < len(s)-1:
		default:
			return false
		}
	}
	return true
}

func (c *converter) pods(ps []*setpointv1.Pod) []engine.Pod {
	if len(ps) == 0 {
		return nil
	}
	out := scratchSlice(&c.scratch.pods, len(ps))
	// Duplicate names: a few pods are compared with the ones before them
	// (no map to allocate), many are looked up in a map.
	var seen map[string]bool
	if len(ps) > smallPodCount {
		seen = make(map[string]bool, len(ps))
	}
	// One array backs every pod's containers, one every resource list,
	// one every Ready condition.
	var containers, quantities, readies int
	for _, p := range ps {
		if p.GetReady() != nil {
			readies++
		}
		containers += len(p.GetContainers())
		quantities += len(p.GetRequests()) + len(p.GetOverhead())
		for _, ct := range p.GetContainers() {
			quantities += len(ct.GetRequests())
		}
	}
	cts := scratchSlice(&c.scratch.containers, containers)
	c.lists = scratchSlice(&c.scratch.requests, quantities)
	ready := scratchSlice(&c.scratch.readies, readies)
	for i, p := range ps {
		f := c.indexed("pods", i)
		switch {
		case p.GetName() == "":
			c.err.Add(f+".name", "must be set")
		case seenPod(seen, out, p.GetName()):
			c.err.Add(f+".name", "duplicate pod name %q", p.GetName())
		}
		if seen != nil {
			seen[p.GetName()] = true
		}
		pod := engine.Pod{
			Name:      p.GetName(),
			Phase:     engine.PodPhase(p.GetPhase()),
			Deleting:  p.GetDeleting(),
			StartTime: c.timestamp(c.at(f, ".start_time"), p.GetStartTime()),
			Requests:  c.quantities(c.at(f, ".requests"), p.GetRequests()),
			Overhead:  c.quantities(c.at(f, ".overhead"), p.GetOverhead()),
		}
		switch pod.Phase {
		case engine.PodPending, engine.PodRunning, engine.PodSucceeded, engine.PodFailed, engine.PodUnknown:
		default:
			c.err.Add(f+".phase", "must be Pending, Running, Succeeded, Failed or Unknown, got %q", pod.Phase)
		}
		if r := p.GetReady(); r != nil {
			ready = append(ready, engine.PodReadiness{
				Status:             engine.ConditionStatus(r.GetStatus()),
				LastTransitionTime: c.timestamp(c.at(f, ".ready.last_transition_time"), r.GetLastTransitionTime()),
			})
			pod.Ready = &ready[len(ready)-1]
			c.conditionStatus(c.at(f, ".ready.status"), pod.Ready.Status)
		}
		first := len(cts)
		for j, ct := range p.GetContainers() {
			cf := c.indexed(c.at(f, ".containers"), j)
			c.nonEmpty(c.at(cf, ".name"), ct.GetName())
			if ct.GetRestartableInit() && ct.GetInit() {
				c.err.Add(cf, "restartable_init and init are exclusive")
			}
			cts = append(cts, engine.Container{Name: ct.GetName(), Requests: c.quantities(c.at(cf, ".requests"), ct.GetRequests()), Sidecar: ct.GetRestartableInit(), Init: ct.GetInit()})
		}
		if len(cts) > first {
			pod.Containers = cts[first:len(cts):len(cts)]
		}
		out = append(out, pod)
	}
	return out
}

// smallPodCount is the most pods whose names are checked for duplicates
// without a map.
const smallPodCount = 32

// seenPod reports whether name is one of the pods converted before: in seen
// when there is a map, else among before.
func seenPod(seen map[string]bool, before []engine.Pod, name string) bool {
	if seen != nil {
		return seen[name]
	}
	for i := range before {
		if before[i].Name == name {
			return true
		}
	}
	return false
}

func (c *converter) conditionStatus(field string, s engine.ConditionStatus) {
	switch s {
	case engine.ConditionTrue, engine.ConditionFalse, engine.ConditionUnknown:
	default:
		c.err.Add(field, "must be True, False or Unknown, got %q", s)
	}
}

func (c *converter) resourceMetrics(r *setpointv1.ResourceMetrics) engine.ResourceMetrics {
	out := engine.ResourceMetrics{Err: r.GetError()}
	if n := len(r.GetItems()); n > 0 {
		out.Pods = scratchSlice(&c.scratch.usages, n)
	}
	// One array backs every item's containers, one every usage list.
	var containers, quantities int
	for _, it := range r.GetItems() {
		containers += len(it.GetContainers())
		for _, ct := range it.GetContainers() {
			quantities += len(ct.GetUsage())
		}
	}
	cts := scratchSlice(&c.scratch.cusages, containers)
	c.lists = scratchSlice(&c.scratch.usage, quantities)
	for i, it := range r.GetItems() {
		f := c.indexed("resource_metrics.items", i)
		c.nonEmpty(c.at(f, ".pod"), it.GetPod())
		u := engine.PodUsage{Pod: it.GetPod(), Timestamp: c.timestamp(c.at(f, ".timestamp"), it.GetTimestamp())}
		c.duration(c.at(f, ".window"), it.GetWindow(), &u.Window)
		first := len(cts)
		for j, ct := range it.GetContainers() {
			cf := c.indexed(c.at(f, ".containers"), j)
			cts = append(cts, engine.ContainerUsage{Name: ct.GetName(), Usage: c.quantities(c.at(cf, ".usage"), ct.GetUsage())})
		}
		if len(cts) > first {
			u.Containers = cts[first:len(cts):len(cts)]
		}
		out.Pods = append(out.Pods, u)
	}
	return out
}

func (c *converter) observations(obs []*setpointv1.MetricObservation, metrics []engine.MetricSpec) []engine.Observation {
	if len(obs) != len(metrics) {
		c.err.Add("observations", "must have one entry per spec metric (%d), got %d", len(metrics), len(obs))
		return nil
	}
	if len(obs) == 0 {
		return nil
	}
	out := scratchSlice(&c.scratch.obs, len(obs))[:len(obs)]
	clear(out) // not every field is set below
	// One array backs every observation's values.
	n := 0
	for _, o := range obs {
		n += len(o.GetValues())
	}
	values := scratchSlice(&c.scratch.values, n)
	for i, o := range obs {
		f := c.indexed("observations", i)
		out[i].Err = o.GetError()
		pods := metrics[i].Type == engine.PodsSource
		if metrics[i].Type == engine.ObjectSource && len(o.GetValues()) > 1 {
			c.err.Add(f+".values", "an Object metric has at most one value, got %d", len(o.GetValues()))
		}
		for j, v := range o.GetValues() {
			vf := c.indexed(c.at(f, ".values"), j)
			mv := engine.MetricValue{Pod: v.GetPod(), Timestamp: c.timestamp(c.at(vf, ".timestamp"), v.GetTimestamp())}
			mv.Milli, _ = c.quantity(c.at(vf, ".value"), v.GetValue())
			if pods {
				c.nonEmpty(c.at(vf, ".pod"), mv.Pod)
				mv.Window = DefaultPodsMetricWindow
			}
			c.duration(c.at(vf, ".window"), v.GetWindow(), &mv.Window)
			values = append(values, mv)
		}
		if k := len(o.GetValues()); k > 0 {
			out[i].Values = values[len(values)-k : len(values) : len(values)]
		}
	}
	return out
}

// toleranceValue reads a behavior tolerance as the Kubernetes controller
// does: the API server stores the quantity in canonical form ("0.3" becomes
// "300m"), and the controller takes the approximate float64 of that form,
// which may differ from the approximate float64 of what the client sent.
func toleranceValue(q resource.Quantity) float64 {
	canonical, err := resource.ParseQuantity(q.String())
	if err != nil { // cannot happen: String always parses
		return q.AsApproximateFloat64()
	}
	return canonical.AsApproximateFloat64()
}
