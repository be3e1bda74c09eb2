package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

const (
	// wavePeriod is the period of the load every target follows.
	wavePeriod = 60 * time.Second
	// cpuRequestMilli is the app container's cpu request, in millicores;
	// its sidecar requests sidecarRequestMilli and uses sidecarUsageMilli.
	cpuRequestMilli, sidecarRequestMilli, sidecarUsageMilli = 500, 100, 20
	// queueTarget is the External metric's average-value target, per pod.
	queueTarget = 30
)

// target is one autoscaler and the request template sent for it. A caller
// owns it: request rewrites the template in place.
type target struct {
	phase float64 // fraction of wavePeriod the target's load is shifted by
	start time.Time
	req   *setpointv1.RecommendRequest
}

// keyOf returns the key of target j: cluster j mod clusters.
func keyOf(j, clusters int) *setpointv1.TargetKey {
	return &setpointv1.TargetKey{Cluster: fmt.Sprintf("cluster-%d", j%clusters), Namespace: fmt.Sprintf("team-%d", j%7), Name: fmt.Sprintf("app-%07d", j)}
}

// newTarget returns target j of cfg: cluster j mod cfg.Clusters, cfg.Pods
// pods started an hour before start, cfg.Metrics metrics (cpu, then
// External); every fourth target has one pod still starting (not ready).
func newTarget(j int, cfg Config, start time.Time) *target {
	key := keyOf(j, cfg.Clusters)
	name := key.Name
	ptr := func(v int32) *int32 { return &v }
	req := &setpointv1.RecommendRequest{
		Target: key,
		Spec: &setpointv1.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: &setpointv1.CrossVersionObjectReference{ApiVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr(2),
			MaxReplicas:    int32(max(4*cfg.Pods, 10)),
			Metrics: []*setpointv1.MetricSpec{
				{Type: "Resource", Resource: &setpointv1.ResourceMetricSource{Name: "cpu",
					Target: &setpointv1.MetricTarget{Type: "Utilization", AverageUtilization: ptr(60)}}},
			},
			Behavior: &setpointv1.HorizontalPodAutoscalerBehavior{
				ScaleUp: &setpointv1.ScalingRules{StabilizationWindowSeconds: ptr(0), SelectPolicy: "Max", Policies: []*setpointv1.ScalingPolicy{
					{Type: "Percent", Value: 100, PeriodSeconds: 15}, {Type: "Pods", Value: 4, PeriodSeconds: 15}}},
				ScaleDown: &setpointv1.ScalingRules{StabilizationWindowSeconds: ptr(120), SelectPolicy: "Min", Policies: []*setpointv1.ScalingPolicy{
					{Type: "Percent", Value: 20, PeriodSeconds: 60}, {Type: "Pods", Value: 2, PeriodSeconds: 60}}},
			},
		},
		Scale:           &setpointv1.Scale{Replicas: int32(cfg.Pods), StatusReplicas: int32(cfg.Pods), Selector: "app=" + name},
		ResourceMetrics: &setpointv1.ResourceMetrics{},
		Observations:    []*setpointv1.MetricObservation{{}},
	}
	for m := 1; m < cfg.Metrics; m++ {
		req.Spec.Metrics = append(req.Spec.Metrics, &setpointv1.MetricSpec{Type: "External", External: &setpointv1.ExternalMetricSource{
			Metric: &setpointv1.MetricIdentifier{Name: fmt.Sprintf("queue_messages_ready_%d", m),
				Selector: &setpointv1.LabelSelector{MatchLabels: map[string]string{"queue": name}}},
			Target: &setpointv1.MetricTarget{Type: "AverageValue", AverageValue: fmt.Sprint(queueTarget)}}})
		req.Observations = append(req.Observations, &setpointv1.MetricObservation{Values: []*setpointv1.MetricValue{{}}})
	}
	started := timestamppb.New(start.Add(-time.Hour))
	for i := range cfg.Pods {
		pod := fmt.Sprintf("%s-7d4b9-%05d", name, i)
		ready := &setpointv1.PodReadyCondition{Status: "True", LastTransitionTime: timestamppb.New(start.Add(-time.Hour + 20*time.Second))}
		startTime := started
		if j%4 == 0 && i == cfg.Pods-1 {
			startTime = timestamppb.New(start.Add(-10 * time.Second))
			ready = &setpointv1.PodReadyCondition{Status: "False", LastTransitionTime: startTime}
		}
		req.Pods = append(req.Pods, &setpointv1.Pod{
			Name: pod, Phase: "Running", StartTime: startTime, Ready: ready,
			Containers: []*setpointv1.Container{
				{Name: "app", Requests: map[string]string{"cpu": fmt.Sprintf("%dm", cpuRequestMilli), "memory": "512Mi"}},
				{Name: "istio-proxy", Requests: map[string]string{"cpu": fmt.Sprintf("%dm", sidecarRequestMilli), "memory": "128Mi"}},
			},
		})
		req.ResourceMetrics.Items = append(req.ResourceMetrics.Items, &setpointv1.PodMetrics{
			Pod: pod, Window: durationpb.New(30 * time.Second),
			Containers: []*setpointv1.ContainerMetrics{
				{Name: "app", Usage: map[string]string{}},
				{Name: "istio-proxy", Usage: map[string]string{"cpu": fmt.Sprintf("%dm", sidecarUsageMilli), "memory": "60Mi"}},
			},
		})
	}
	return &target{phase: float64(j%97) / 97, start: start, req: req}
}

// load is the target's load at now relative to its targets: 1 is on
// target, within 0.5..1.5 over a wave.
func (t *target) load(now time.Time) float64 {
	x := now.Sub(t.start).Seconds()/wavePeriod.Seconds() + t.phase
	return 1 + 0.5*math.Sin(2*math.Pi*x)
}

// request returns the target's request as of now: pod metrics scraped 15 s
// before now with usage around the wave's value (±5% per pod), and the
// external metrics' values, observed 10 s before now, at the wave's value
// with a phase of their own. The result is the target's template: valid until
// the next call.
func (t *target) request(now time.Time, rng *rand.Rand) *setpointv1.RecommendRequest {
	cpu := t.load(now)
	scraped := timestamppb.New(now.Add(-15 * time.Second))
	for _, m := range t.req.ResourceMetrics.Items {
		m.Timestamp = scraped
		// The pod's utilization (both containers) is 60% of its requests
		// when cpu is 1.
		usage := int(cpu*(0.95+0.1*rng.Float64())*0.6*(cpuRequestMilli+sidecarRequestMilli)) - sidecarUsageMilli
		m.Containers[0].Usage["cpu"] = fmt.Sprintf("%dm", usage)
		m.Containers[0].Usage["memory"] = fmt.Sprintf("%dMi", 200+usage/4)
	}
	observed := timestamppb.New(now.Add(-10 * time.Second))
	for i, o := range t.req.Observations[1:] {
		queue := t.load(now.Add(wavePeriod/4+time.Duration(i)*time.Second)) * queueTarget * float64(len(t.req.Pods))
		v := o.Values[0]
		v.Value = fmt.Sprint(int(queue))
		v.Timestamp = observed
	}
	return t.req
}
