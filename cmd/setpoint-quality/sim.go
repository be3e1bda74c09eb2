package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/forecast"
	"github.com/setpointhq/setpoint/schedule"
	"github.com/setpointhq/setpoint/target"
)

// The workload: pods request 1 core and serve at most 1 core (the limit);
// the autoscaler targets 60% cpu utilization.
const (
	podCores          = 1.0
	targetUtilization = 60 // percent
	minReplicas       = 2
	maxReplicas       = 80
)

// Setup is one autoscaler configuration the loop runs.
type Setup struct {
	// Name identifies the setup in the report.
	Name string
	// UpTolerance is the scale-up tolerance (a fraction); the scale-down
	// tolerance stays 0.1.
	UpTolerance float64
	// Forecast turns a forecast of the cpu metric on.
	Forecast bool
	// Schedule turns the trace's schedule windows on.
	Schedule bool
	// Fallback, when set, is the target's fallback.
	Fallback *target.Fallback
}

// Result is what one run measured over the trace's measured days.
type Result struct {
	Trace, Setup string
	Startup      time.Duration
	// UnderInBand and UnderBeyond are the pod-minutes the ready pods fell
	// short of the demand at the target: with utilization within the
	// tolerance band (60–66%), and beyond it.
	UnderInBand, UnderBeyond float64
	// OverloadMinutes are the minutes the demand exceeded what the ready
	// pods can serve.
	OverloadMinutes float64
	// PodHours are the pods' hours, started or not.
	PodHours float64
	// Rescales counts the scale writes.
	Rescales int
	// WindowStartUnder is the under-provisioned pod-minutes in the two
	// hours after each schedule window's start (schedule setups).
	WindowStartUnder float64
	// ForecastOffered counts the decisions a forecast made a proposal to,
	// ForecastSteps those its proposal won.
	ForecastOffered, ForecastSteps int
	// ForecastPeriod is the period of the forecast's model at the end.
	ForecastPeriod time.Duration
}

// pod is one simulated pod.
type pod struct {
	name    string
	created time.Time
	readyAt time.Time
}

// behavior is the API server's default behavior with the given scale-up
// tolerance.
func behavior(upTol float64) *engine.Behavior {
	return &engine.Behavior{
		ScaleUp: engine.Rules{SelectPolicy: engine.SelectMax, Tolerance: upTol, Policies: []engine.Policy{
			{Type: engine.PodsPolicy, Value: 4, PeriodSeconds: 15},
			{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15},
		}},
		ScaleDown: engine.Rules{StabilizationWindowSeconds: 300, SelectPolicy: engine.SelectMax, Tolerance: 0.1, Policies: []engine.Policy{
			{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15},
		}},
	}
}

// run replays tr through the same target transitions the server runs
// (target.Decide, target.Observe) with pods that become ready startup
// after they are created, and measures the measured days.
func run(tr Trace, s Setup, startup time.Duration) (Result, error) {
	res := Result{Trace: tr.Name, Setup: s.Name, Startup: startup}
	spec := engine.Spec{
		MinReplicas: minReplicas, MaxReplicas: maxReplicas,
		Metrics: []engine.MetricSpec{{Type: engine.ResourceSource, Resource: "cpu",
			Target: engine.Target{Type: engine.UtilizationTarget, Utilization: targetUtilization}}},
		Behavior: behavior(s.UpTolerance),
	}
	settings := engine.Settings{Tolerance: 0.1, CPUInitializationPeriod: 5 * time.Minute,
		InitialReadinessDelay: 30 * time.Second, DownscaleStabilizationWindow: 5 * time.Minute}
	var sched *schedule.Schedule
	if s.Schedule {
		var err error
		if sched, err = schedule.Compile(tr.Windows); err != nil {
			return res, err
		}
	}
	var (
		rec      target.Record
		hist     forecast.History
		model    forecast.Model
		fittedTo time.Time
		pods     []pod
		nextID   int
	)
	fcfg := forecast.Config{Lead: startup + syncPeriod}
	addPods := func(n int, now time.Time) {
		for range n {
			pods = append(pods, pod{name: "web-" + strconv.Itoa(nextID), created: now, readyAt: now.Add(startup)})
			nextID++
		}
	}
	initial := tr.Initial
	if initial == 0 {
		initial = tr.Demand[0]
	}
	addPods(max(minReplicas, int(math.Ceil(initial/podCores*100/targetUtilization))), epoch.Add(-time.Hour))
	for i := range pods {
		pods[i].readyAt = epoch.Add(-time.Hour)
	}
	measureFrom := tr.Warmup * day
	in := engine.Input{Spec: spec, Settings: settings, Observations: []engine.Observation{{}}}
	ref := target.Ref{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}
	for i, demand := range tr.Demand {
		now := epoch.Add(time.Duration(i) * syncPeriod)
		ready := 0
		for _, p := range pods {
			if !now.Before(p.readyAt) {
				ready++
			}
		}
		// The input the agent would send: the pods, and the usage of the
		// ready ones (each serves its share of the demand, up to a core).
		in.Now = now
		in.Scale = engine.Scale{Replicas: int32(len(pods)), StatusReplicas: int32(len(pods)), Selector: "app=web"}
		in.Pods = in.Pods[:0]
		in.ResourceMetrics = engine.ResourceMetrics{Pods: in.ResourceMetrics.Pods[:0]}
		perPod := 0.0
		if ready > 0 {
			perPod = math.Min(demand/float64(ready), podCores)
		}
		for _, p := range pods {
			rd := &engine.PodReadiness{Status: engine.ConditionFalse, LastTransitionTime: p.created}
			if !now.Before(p.readyAt) {
				rd = &engine.PodReadiness{Status: engine.ConditionTrue, LastTransitionTime: p.readyAt}
				in.ResourceMetrics.Pods = append(in.ResourceMetrics.Pods, engine.PodUsage{Pod: p.name, Timestamp: now.Add(-syncPeriod / 2), Window: 30 * time.Second,
					Containers: []engine.ContainerUsage{{Name: "app", Usage: engine.ResourceList{{Name: "cpu", Milli: int64(perPod * 1000)}}}}})
			}
			in.Pods = append(in.Pods, engine.Pod{Name: p.name, Phase: engine.PodRunning, StartTime: p.created, Ready: rd,
				Containers: []engine.Container{{Name: "app", Requests: engine.ResourceList{{Name: "cpu", Milli: int64(podCores * 1000)}}}}})
		}
		off := time.Duration(i) * syncPeriod
		for _, o := range tr.Outages {
			if off >= o.from && off < o.to {
				in.ResourceMetrics = engine.ResourceMetrics{Err: "the metrics API is unavailable"}
			}
		}
		in.Proposals = in.Proposals[:0]
		if sched != nil {
			in.Proposals = append(in.Proposals, sched.Proposals(now)...)
		}
		if s.Forecast {
			if end := hist.End(); !end.Equal(fittedTo) {
				model, fittedTo = forecast.Fit(&hist, fcfg), end
			}
			if f, ok := model.Predict(now); ok {
				in.Proposals = append(in.Proposals, f.Proposal("cpu"))
				if i >= measureFrom {
					res.ForecastOffered++
				}
			}
		}
		id := strconv.Itoa(i)
		if err := target.Decide(&rec, target.Input{Ref: ref, Engine: in, Fallback: s.Fallback}, id, now); err != nil {
			return res, fmt.Errorf("%s/%s at %s: %w", tr.Name, s.Name, now, err)
		}
		d := rec.Last.Decision
		if len(d.Explanation.Metrics) > 0 {
			forecast.Sample(&hist, d.Explanation.Metrics[0], int32(len(pods)), now)
		}
		if i >= measureFrom {
			dt := syncPeriod.Minutes()
			need := demand / podCores * 100 / targetUtilization
			band := need / 1.1
			res.UnderBeyond += math.Max(0, band-float64(ready)) * dt
			res.UnderInBand += (math.Max(0, need-float64(ready)) - math.Max(0, band-float64(ready))) * dt
			if demand > float64(ready)*podCores+1e-9 {
				res.OverloadMinutes += dt
			}
			res.PodHours += float64(len(pods)) * syncPeriod.Hours()
			if sched != nil {
				for _, a := range sched.Active(now) {
					if now.Sub(a.Since) < 2*time.Hour {
						res.WindowStartUnder += math.Max(0, need-float64(ready)) * dt
					}
				}
			}
			for _, st := range d.Explanation.Steps {
				if st.Kind == engine.StepProposal && st.Reason == "ForecastAhead" {
					res.ForecastSteps++
				}
			}
		}
		if d.Rescale {
			from, to := len(pods), int(d.DesiredReplicas)
			if to > from {
				addPods(to-from, now)
			} else {
				pods = shrink(pods, from-to, now)
			}
			if err := target.Observe(&rec, target.Observation{Kind: target.EventApplied, DecisionID: id, From: int32(from), To: int32(to)}, now); err != nil {
				return res, err
			}
			if len(rec.Events) > 32 { // a store trims the oldest events
				rec.Events = append(rec.Events[:0], rec.Events[len(rec.Events)-16:]...)
			}
			if i >= measureFrom {
				res.Rescales++
			}
		}
	}
	res.ForecastPeriod = model.Period
	return res, nil
}

// shrink removes n pods as a ReplicaSet does: unready ones first, then the
// newest.
func shrink(pods []pod, n int, now time.Time) []pod {
	for ; n > 0; n-- {
		victim := len(pods) - 1
		for j := len(pods) - 1; j >= 0; j-- {
			if now.Before(pods[j].readyAt) {
				victim = j
				break
			}
		}
		pods = append(pods[:victim], pods[victim+1:]...)
	}
	return pods
}
