// Package simulate runs what-ifs through the engine: a Simulate request's
// steps, each decided by target.Decide with the status and history the
// earlier steps left, as a stored target's are, on inputs given or
// synthesized by a pod model. It validates and converts the whole request
// first, naming every bad field at once; it never reads the clock nor
// writes anything. The server's Simulate handler (admission, seed_from's
// authorization and store read) calls it.
package simulate

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/forecast"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/server/forecasting"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/timestamppb"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Defaults of the Limits (the server's Options.MaxSimulateSteps and
// MaxSimulatePods).
const (
	// DefaultMaxSimulateSteps is the most steps one Simulate call runs.
	DefaultMaxSimulateSteps = 1000
	// DefaultMaxSimulatePods is the most pods a pod model synthesizes: it
	// bounds spec.max_replicas, pod_model.initial_replicas and every step's
	// scale.replicas of a Simulate call with a pod model.
	DefaultMaxSimulatePods = 1000
)

// Pod model constants: what the synthesized pods and samples look like.
const (
	// simContainer is the container of a synthesized pod, unless a
	// ContainerResource metric names another.
	simContainer = "app"
	// simSelector is the scale selector of a synthesized target.
	simSelector = "app=simulated"
	// simMetricWindow is the window of a synthesized sample.
	simMetricWindow = 15 * time.Second
	// simLongAgo is how long before the first step the initial pods of a
	// pod model started (and became ready): long enough that neither the
	// CPU initialization period nor the readiness delay applies.
	simLongAgo = 24 * time.Hour
)

// Limits bound one simulation.
type Limits struct {
	// MaxSteps bounds the steps.
	MaxSteps int
	// MaxPods bounds the pods a pod model synthesizes.
	MaxPods int
}

// Simulation is one Simulate call: the converted spec and settings, the
// steps' inputs, and the state carried between steps.
type Simulation struct {
	req      *setpointv1.SimulateRequest
	settings engine.Settings
	model    *podModel // nil without a pod model
	steps    []simStep

	// rec is the simulated target: its status and history carry from
	// step to step through target.Decide and target.Observe, as a stored
	// target's do; with a forecast, so do its metrics' histories.
	rec      target.Record
	models   *forecast.Cache // the simulation's fitted models; nil until a step forecasts
	replicas int32           // the count reached: used by steps without a scale
	selector string          // the last scale selector seen
}

// simStep is one step's converted input: a full engine input without a pod
// model, or the parsed metric values with one.
type simStep struct {
	at     time.Time
	spec   engine.Spec   // the spec in force at this step
	specAt string        // where that spec is in the request: "spec" or "steps[k].spec"
	ahead  convert.Ahead // that spec's fallback and schedules
	// forecast is that spec's forecast settings (its lead_time: a
	// simulation has no measured pod start-up); nil without a forecast.
	forecast *forecast.Config
	in       engine.Input // without a pod model; Status is set when run
	scale    *engine.Scale
	values   []*int64 // with a pod model: one per spec metric, nil when empty
}

// New validates and converts req for a simulation within lim. Every violation is reported at
// once, as a *setpointv1.ValidationError naming the request's fields.
func New(req *setpointv1.SimulateRequest, lim Limits) (*Simulation, error) {
	verr := &setpointv1.ValidationError{}
	steps := req.GetSteps()
	switch {
	case req.GetSpec() == nil:
		verr.Add("spec", "must be set")
	case len(steps) == 0:
		verr.Add("steps", "must have at least one step")
	case len(steps) > lim.MaxSteps:
		verr.Add("steps", "must have at most %d steps, got %d", lim.MaxSteps, len(steps))
	}
	if seed := req.GetSeedFrom(); seed != nil {
		probe := &setpointv1.GetTargetRequest{Target: seed}
		if err := probe.Validate(); err != nil {
			// The probe names its own field, target; seed_from is the key.
			var ve *setpointv1.ValidationError
			if errors.As(err, &ve) {
				for _, v := range ve.Violations {
					verr.Add("seed_from"+strings.TrimPrefix(v.Field, "target"), "%s", v.Description)
				}
			}
		}
	}
	if err := verr.Err(); err != nil {
		return nil, err
	}
	// The spec and settings, converted once with an otherwise empty input.
	nMetrics := len(req.GetSpec().GetMetrics())
	in, err := convert.Input(&setpointv1.RecommendRequest{
		Spec: req.GetSpec(), Settings: req.GetSettings(), Scale: &setpointv1.Scale{},
		Observations: make([]*setpointv1.MetricObservation, nMetrics),
	}, time.Time{})
	if err != nil {
		return nil, err
	}
	sim := &Simulation{req: req, settings: in.Settings, selector: simSelector}
	if pm := req.GetPodModel(); pm != nil {
		sim.model = newPodModel(verr, pm, in.Spec, lim.MaxPods)
		sim.replicas = pm.GetInitialReplicas()
	}
	var prev time.Time
	spec, specIn, specAt := req.GetSpec(), in.Spec, "spec" // the spec in force: as sent, converted, and where
	ahead, _ := convert.AheadOf("spec", spec)              // its fallback and schedules: Input checked them
	fc := convert.Forecast(&setpointv1.RecommendRequest{Spec: spec})
	for i, st := range steps {
		f := fmt.Sprintf("steps[%d]", i)
		if edit := st.GetSpec(); edit != nil {
			editIn, err := convert.Input(&setpointv1.RecommendRequest{
				Spec: edit, Settings: req.GetSettings(), Scale: &setpointv1.Scale{},
				Observations: make([]*setpointv1.MetricObservation, len(edit.GetMetrics())),
			}, time.Time{})
			if err != nil {
				addAll(verr, f, err)
			} else if sim.model != nil {
				sim.model.fits(verr, f+".spec", editIn.Spec, lim.MaxPods)
			}
			spec, specIn, specAt = edit, editIn.Spec, f+".spec"
			ahead, _ = convert.AheadOf("spec", edit)
			fc = convert.Forecast(&setpointv1.RecommendRequest{Spec: edit})
		}
		var at time.Time
		switch {
		case st.GetTime() == nil:
			verr.Add(f+".time", "must be set")
		case st.GetTime().CheckValid() != nil:
			verr.Add(f+".time", "must be a valid timestamp, between 0001-01-01 and 9999-12-31 UTC with nanos within [0, 1e9)")
		default:
			at = st.GetTime().AsTime()
			if i > 0 && !prev.IsZero() && !at.After(prev) {
				verr.Add(f+".time", "must be after steps[%d].time (%s), got %s", i-1, prev.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano))
			}
			prev = at
		}
		step := simStep{at: at, spec: specIn, specAt: specAt, ahead: ahead, forecast: fc}
		if sim.model != nil {
			step.values = sim.model.values(verr, f, st, specIn)
			if sc := st.GetScale(); sc != nil {
				if sc.GetReplicas() < 0 || int(sc.GetReplicas()) > lim.MaxPods {
					verr.Add(f+".scale.replicas", "must be within [0, %d] with a pod model, got %d", lim.MaxPods, sc.GetReplicas())
				}
				step.scale = &engine.Scale{Replicas: sc.GetReplicas(), StatusReplicas: sc.GetStatusReplicas(), Selector: sc.GetSelector()}
			}
		} else {
			if i == 0 && st.GetScale() == nil {
				verr.Add(f+".scale", "must be set in the first step without a pod model")
			}
			if len(st.GetMetricValues()) > 0 {
				verr.Add(f+".metric_values", "requires a pod model")
			}
			scale := st.GetScale()
			if scale == nil {
				scale = &setpointv1.Scale{} // the count reached, set when run
			}
			stepIn, err := convert.Input(&setpointv1.RecommendRequest{
				Spec: spec, Settings: req.GetSettings(), Scale: scale,
				Pods: st.GetPods(), ResourceMetrics: st.GetResourceMetrics(), Observations: st.GetObservations(),
			}, at)
			// The spec in force was converted (and any violation reported)
			// once, where it is in the request.
			if err := withoutSpec(err); err != nil {
				addAll(verr, f, err)
			}
			step.in = stepIn
			if st.GetScale() != nil {
				step.scale = &stepIn.Scale
			}
		}
		sim.steps = append(sim.steps, step)
	}
	if err := verr.Err(); err != nil {
		return nil, err
	}
	return sim, nil
}

// withoutSpec drops the spec's violations from a *setpointv1.ValidationError;
// nil when none is left.
func withoutSpec(err error) error {
	var ve *setpointv1.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &setpointv1.ValidationError{}
	for _, v := range ve.Violations {
		if !strings.HasPrefix(v.Field, "spec.") && v.Field != "spec" {
			out.Violations = append(out.Violations, v)
		}
	}
	if len(out.Violations) == 0 {
		return nil
	}
	return out
}

// addAll adds the violations of err (a *setpointv1.ValidationError) under
// prefix; any other error is added as a violation of prefix itself.
func addAll(verr *setpointv1.ValidationError, prefix string, err error) {
	var ve *setpointv1.ValidationError
	if !errors.As(err, &ve) {
		verr.Add(prefix, "%v", err)
		return
	}
	for _, v := range ve.Violations {
		verr.Add(prefix+"."+v.Field, "%s", v.Description)
	}
}

// Seed starts the simulation from a stored target's status and history,
// and its metrics' forecast histories (a simulated spec with a forecast
// forecasts from them). The first step may not be before the target's last
// decision.
func (sim *Simulation) Seed(rec target.Record) error {
	if rec.Last != nil && len(sim.steps) > 0 && sim.steps[0].at.Before(rec.Last.At) {
		verr := &setpointv1.ValidationError{}
		verr.Add("steps[0].time", "must not be before the seed target's last decision at %s", rec.Last.At.Format(time.RFC3339Nano))
		return verr
	}
	sim.rec.Status, sim.rec.History, sim.rec.Forecasts = rec.Status, rec.History, rec.Forecasts
	return nil
}

// SeedForecasts starts the simulation's forecast histories from a stored
// target's (rec.Forecasts) as they stood at until: the steps closed by
// then, none of what the target measured after (a replay of the target's
// own timeline from until on forecasts from what it knew at its start). A
// history that does not decode is left out.
func (sim *Simulation) SeedForecasts(fs []target.MetricHistory, until time.Time) {
	sim.rec.Forecasts = nil
	for _, f := range fs {
		var h forecast.History
		if err := h.UnmarshalBinary([]byte(f.History)); err != nil {
			continue
		}
		before := h.Until(until)
		b, err := before.MarshalBinary()
		if err != nil {
			continue
		}
		sim.rec.Forecasts = append(sim.rec.Forecasts, target.MetricHistory{Metric: f.Metric, History: string(b)})
	}
}

// Run decides every step in order, as Recommend decides: a step whose
// spec has a forecast through forecasting.Decide (the histories carried
// from step to step), any other by target.Decide, which drops them. A
// decision asking for a rescale is applied before the next step, recorded
// as an applied Observe records it.
func (sim *Simulation) Run(ctx context.Context) (*setpointv1.SimulateResponse, error) {
	resp := &setpointv1.SimulateResponse{Steps: make([]*setpointv1.SimulateStepResult, 0, len(sim.steps))}
	for i := range sim.steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		// A simulation is CPU-bound for up to MaxSteps decisions; it
		// yields between them so that the calls waiting for a processor
		// (other tenants' Recommends) run within a step, not within the
		// scheduler's 10 ms time slice.
		runtime.Gosched()
		step := &sim.steps[i]
		if step.scale != nil {
			sim.replicas = step.scale.Replicas
			if step.scale.Selector != "" {
				sim.selector = step.scale.Selector
			}
		}
		in := sim.input(step)
		// Each step's decision has an id of its own, so that applying it
		// is recorded once; the ids are not part of the answer.
		id := strconv.Itoa(i)
		notes, err := sim.decide(step, target.Input{Engine: in, Fallback: step.ahead.Fallback}, id)
		if err != nil {
			return nil, stepError(i, step.specAt, err)
		}
		d := sim.rec.Last.Decision
		result := &setpointv1.SimulateStepResult{
			Time:     timestamppb.New(step.at),
			Decision: convert.Decision(target.LastDecision{At: step.at, Decision: d}),
			Notes:    notes,
		}
		if d.Rescale {
			applied := target.Observation{Kind: target.EventApplied, DecisionID: id, From: in.Scale.Replicas, To: d.DesiredReplicas}
			if err := target.Observe(&sim.rec, applied, step.at); err != nil {
				return nil, err
			}
			sim.rec.Events = nil // a simulation answers with decisions, not events
			if sim.model != nil {
				sim.model.resize(d.DesiredReplicas, step.at)
			}
			sim.replicas = d.DesiredReplicas
			result.Applied = true
		}
		resp.Steps = append(resp.Steps, result)
	}
	return resp, nil
}

// decide decides step on sim.rec with in, as Recommend's store update
// does: with the step's forecast through forecasting.Decide, else by
// target.Decide, after which the record keeps no forecast history. It
// returns why the forecast's metrics proposed nothing (the step's notes).
func (sim *Simulation) decide(step *simStep, in target.Input, id string) ([]string, error) {
	if step.forecast != nil {
		if sim.models == nil {
			// The simulation's own models: its histories are not the
			// stored targets', and fitting them through the server's cache
			// would push those out.
			sim.models = forecast.NewCache(forecasting.MaxMetrics)
		}
		return forecasting.Decide(&sim.rec, in, *step.forecast, sim.models, id, step.at)
	}
	if err := target.Decide(&sim.rec, in, id, step.at); err != nil {
		return nil, err
	}
	sim.rec.Forecasts = nil
	return nil, nil
}

// input returns the engine input of step, Status unset.
func (sim *Simulation) input(step *simStep) engine.Input {
	if sim.model == nil {
		in := step.in
		if step.scale == nil {
			in.Scale = engine.Scale{Replicas: sim.replicas, StatusReplicas: sim.replicas, Selector: sim.selector}
		}
		return in
	}
	scale := engine.Scale{Replicas: sim.replicas, StatusReplicas: sim.replicas, Selector: sim.selector}
	if step.scale != nil {
		scale = *step.scale
		if scale.Selector == "" {
			scale.Selector = sim.selector
		}
	}
	sim.model.resize(scale.Replicas, step.at)
	in := sim.model.input(step.spec, sim.settings, scale, step)
	in.Proposals = step.ahead.Proposals(step.at)
	return in
}

// StepError is an engine validation error of one step's input: Run's
// caller names its field in the request (Field is the engine's path in a
// Recommend's terms; a spec field is SpecAt's, a settings field the
// request's, any other the step's).
type StepError struct {
	// Step is the step's index.
	Step int
	// SpecAt is where the spec in force is in the request: "spec" or
	// "steps[k].spec".
	SpecAt string
	// Err is the engine's error.
	Err *engine.FieldError
}

// Error implements error.
func (e *StepError) Error() string { return fmt.Sprintf("simulate: steps[%d]: %v", e.Step, e.Err) }

// stepError is err of step i as a *StepError when it is an engine
// validation error, err otherwise.
func stepError(i int, specAt string, err error) error {
	var fe *engine.FieldError
	if !errors.As(err, &fe) {
		return err
	}
	return &StepError{Step: i, SpecAt: specAt, Err: fe}
}

// podModel synthesizes identical pods from a replica count. The pods
// present before the first step started long before it; a scale-up adds
// pods that start at the step's time and become ready readyAfter later; a
// scale-down removes the newest pods.
type podModel struct {
	requests   map[string]int64
	readyAfter time.Duration
	container  string
	started    []time.Time // one per pod, oldest first; zero: an initial pod
	firstStep  time.Time
}

// newPodModel validates pm against spec and returns the model.
func newPodModel(verr *setpointv1.ValidationError, pm *setpointv1.PodModel, spec engine.Spec, maxPods int) *podModel {
	m := &podModel{requests: map[string]int64{}, container: simContainer}
	if n := pm.GetInitialReplicas(); n < 0 || int(n) > maxPods {
		verr.Add("pod_model.initial_replicas", "must be within [0, %d], got %d", maxPods, n)
	}
	for name, q := range pm.GetRequests() {
		v, err := resource.ParseQuantity(q)
		if err != nil || v.Sign() < 0 {
			verr.Add(fmt.Sprintf("pod_model.requests[%q]", name), "must be a quantity >= 0, got %q", q)
			continue
		}
		m.requests[name] = v.MilliValue()
	}
	if d := pm.GetReadyAfter(); d != nil {
		if err := d.CheckValid(); err != nil || d.AsDuration() < 0 {
			verr.Add("pod_model.ready_after", "must be a duration >= 0")
		} else {
			m.readyAfter = d.AsDuration()
		}
	}
	m.fits(verr, "spec", spec, maxPods)
	if n := pm.GetInitialReplicas(); n > 0 && int(n) <= maxPods {
		m.started = make([]time.Time, n)
	}
	return m
}

// fits checks that the pod model can play spec (field f): at most maxPods
// replicas, and one container for every ContainerResource metric (the
// first such metric names it).
func (m *podModel) fits(verr *setpointv1.ValidationError, f string, spec engine.Spec, maxPods int) {
	if int(spec.MaxReplicas) > maxPods {
		verr.Add(f+".max_replicas", "must be at most %d with a pod model, got %d", maxPods, spec.MaxReplicas)
	}
	for i, ms := range spec.Metrics {
		if ms.Type != engine.ContainerResourceSource {
			continue
		}
		switch {
		case m.container == simContainer && ms.Container != "":
			m.container = ms.Container
		case ms.Container != m.container:
			verr.Add(fmt.Sprintf("%s.metrics[%d].container_resource.container", f, i), "a pod model's pods have one container, %q; got %q", m.container, ms.Container)
		}
	}
}

// values parses the metric values of one step.
func (m *podModel) values(verr *setpointv1.ValidationError, f string, st *setpointv1.SimulateStep, spec engine.Spec) []*int64 {
	if len(st.GetPods()) > 0 || st.GetResourceMetrics() != nil || len(st.GetObservations()) > 0 {
		verr.Add(f, "pods, resource_metrics and observations are synthesized by the pod model; give metric_values")
	}
	vals := st.GetMetricValues()
	if len(vals) != len(spec.Metrics) {
		verr.Add(f+".metric_values", "must have one value per spec metric (%d), got %d", len(spec.Metrics), len(vals))
		return nil
	}
	out := make([]*int64, len(vals))
	for i, s := range vals {
		if s == "" {
			continue
		}
		q, err := resource.ParseQuantity(s)
		if err != nil || q.Sign() < 0 {
			verr.Add(fmt.Sprintf("%s.metric_values[%d]", f, i), "must be a quantity >= 0 or empty, got %q", s)
			continue
		}
		v := q.MilliValue()
		out[i] = &v
	}
	return out
}

// resize brings the pods to n at time at.
func (m *podModel) resize(n int32, at time.Time) {
	for int32(len(m.started)) < n {
		m.started = append(m.started, at)
	}
	m.started = m.started[:n]
}

// input synthesizes the engine input of one step at scale.
func (m *podModel) input(spec engine.Spec, settings engine.Settings, scale engine.Scale, step *simStep) engine.Input {
	now := step.at
	if m.firstStep.IsZero() {
		m.firstStep = now
	}
	in := engine.Input{Now: now, Spec: spec, Settings: settings, Scale: scale, Observations: make([]engine.Observation, len(spec.Metrics))}
	usage := map[string]int64{}
	for i, ms := range spec.Metrics {
		v := step.values[i]
		if v == nil {
			in.Observations[i].Err = "no value given for this step"
			continue
		}
		switch ms.Type {
		case engine.ResourceSource, engine.ContainerResourceSource:
			usage[ms.Resource] = *v
		case engine.PodsSource:
			for j := range m.started {
				in.Observations[i].Values = append(in.Observations[i].Values, engine.MetricValue{Pod: podName(j), Milli: *v, Timestamp: now, Window: time.Minute})
			}
		case engine.ObjectSource, engine.ExternalSource:
			in.Observations[i].Values = []engine.MetricValue{{Milli: *v, Timestamp: now}}
		}
	}
	requests, usageList := engine.ResourceListOf(m.requests), engine.ResourceListOf(usage)
	// One array per part for all the pods of the step: a step with n pods
	// allocates a handful of times, not 3n (a replay of 1,000 steps made
	// most of a flood's garbage, and so most of its collections).
	n := len(m.started)
	in.Pods = make([]engine.Pod, 0, n)
	containers, ready := make([]engine.Container, n), make([]engine.PodReadiness, n)
	var usages []engine.ContainerUsage
	if len(usage) > 0 {
		in.ResourceMetrics.Pods = make([]engine.PodUsage, 0, n)
		usages = make([]engine.ContainerUsage, n)
	}
	for j, started := range m.started {
		name := podName(j)
		containers[j] = engine.Container{Name: m.container, Requests: requests}
		pod := engine.Pod{
			Name: name, Phase: engine.PodRunning,
			Containers: containers[j : j+1 : j+1],
			Ready:      &ready[j],
		}
		if started.IsZero() {
			pod.StartTime = m.firstStep.Add(-simLongAgo)
			ready[j] = engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: pod.StartTime}
		} else {
			pod.StartTime = started
			readyAt := started.Add(m.readyAfter)
			if now.Before(readyAt) {
				ready[j] = engine.PodReadiness{Status: engine.ConditionFalse, LastTransitionTime: started}
			} else {
				ready[j] = engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: readyAt}
			}
		}
		in.Pods = append(in.Pods, pod)
		if len(usage) > 0 {
			usages[j] = engine.ContainerUsage{Name: m.container, Usage: usageList}
			in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{
				Pod: name, Timestamp: now, Window: simMetricWindow,
				Containers: usages[j : j+1 : j+1],
			})
		}
	}
	return in
}

// podName names the i-th synthesized pod.
func podName(i int) string { return fmt.Sprintf("pod-%d", i) }
