// Package scenario reads the HPA conformance corpus (the format is written
// down in testdata/conformance/FORMAT.md) and replays its scenarios through
// a Driver: the engine directly, or a Setpoint server over gRPC.
//
// Scenario files are parsed with Kubernetes' own API types, so quantities,
// times and label selectors mean exactly what they mean to the Kubernetes
// controller. Request turns a step into the RecommendRequest an agent would
// send — through package hpa, the agent's own conversion, with the spec in
// force at that step (a step may edit it) — playing the part of the metrics
// APIs (selecting custom and external metric series, failing fetches listed
// as unavailable); Replay feeds the steps in order to a Driver and compares
// each outcome with the controller's recorded one.
package scenario

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	custommetrics "k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalmetrics "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	resourcemetrics "k8s.io/metrics/pkg/apis/metrics/v1beta1"
)

// File is one scenario file.
type File struct {
	// Scenarios are the file's scenarios, in order.
	Scenarios []Scenario `json:"scenarios"`
}

// Scenario is one autoscaler followed through a series of reconciles.
type Scenario struct {
	// Name is "family/short-description/N", unique within a corpus.
	Name string `json:"name"`
	// Note is informational.
	Note string `json:"note,omitempty"`
	// Controller is the controller's configuration.
	Controller Controller `json:"controller"`
	// HPA is the autoscaler as the API server stores it (defaults applied).
	HPA autoscalingv2.HorizontalPodAutoscaler `json:"hpa"`
	// Steps are the reconciles, in time order.
	Steps []Step `json:"steps"`
}

// Controller is the kube-controller-manager configuration of a scenario.
type Controller struct {
	// Tolerance is the default usage-ratio tolerance, as a fraction.
	Tolerance float64 `json:"tolerance"`
	// CPUInitializationPeriod is --horizontal-pod-autoscaler-cpu-initialization-period.
	CPUInitializationPeriod Duration `json:"cpuInitializationPeriod"`
	// InitialReadinessDelay is --horizontal-pod-autoscaler-initial-readiness-delay.
	InitialReadinessDelay Duration `json:"initialReadinessDelay"`
	// DownscaleStabilizationWindow is --horizontal-pod-autoscaler-downscale-stabilization.
	DownscaleStabilizationWindow Duration `json:"downscaleStabilizationWindow"`
}

// Duration is a time.Duration written as a Go duration string ("5m0s").
type Duration struct{ time.Duration }

// UnmarshalJSON parses a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// Step is one reconcile: what the controller read and what it did.
type Step struct {
	// Time is the controller's "now".
	Time time.Time `json:"time"`
	// Spec, when present, is a user's edit of the HPA made before this
	// step: the full spec (after API defaulting) from this step on, until
	// the next step with a spec.
	Spec *autoscalingv2.HorizontalPodAutoscalerSpec `json:"spec,omitempty"`
	// Scale is the target's Scale subresource as read.
	Scale ScaleRead `json:"scale"`
	// Pods are the pods listed with the scale's selector.
	Pods []corev1.Pod `json:"pods"`
	// PodMetrics is the resource metrics API's answer for the selector.
	PodMetrics []resourcemetrics.PodMetrics `json:"podMetrics,omitempty"`
	// CustomMetrics are the values the custom metrics API holds.
	CustomMetrics []custommetrics.MetricValue `json:"customMetrics,omitempty"`
	// ExternalMetrics are the series the external metrics API holds.
	ExternalMetrics []externalmetrics.ExternalMetricValue `json:"externalMetrics,omitempty"`
	// Unavailable lists metric fetches that fail this step.
	Unavailable []Unavailable `json:"unavailable,omitempty"`
	// Expect is the controller's outcome.
	Expect Expect `json:"expect"`
}

// ScaleRead is the Scale subresource as read at a step.
type ScaleRead struct {
	// Replicas is spec.replicas.
	Replicas int32 `json:"replicas"`
	// StatusReplicas is status.replicas.
	StatusReplicas int32 `json:"statusReplicas"`
	// Selector is status.selector.
	Selector string `json:"selector"`
}

// Unavailable names a metric fetch that fails with an API error.
type Unavailable struct {
	// API is "resource", "custom" or "external".
	API string `json:"api"`
	// Metric names the metric; empty means every metric of the API.
	Metric string `json:"metric,omitempty"`
}

// Expect is the controller's recorded outcome of a step.
type Expect struct {
	// OK is false when the reconcile returned an error.
	OK bool `json:"ok"`
	// Error is the error's text (informational).
	Error string `json:"error,omitempty"`
	// Scale is the replica count written, or nil when nothing was written.
	Scale *int32 `json:"scale"`
	// DesiredReplicas is status.desiredReplicas after the step.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentReplicas is status.currentReplicas after the step.
	CurrentReplicas int32 `json:"currentReplicas"`
	// Conditions are status.conditions after the step.
	Conditions []ExpectCondition `json:"conditions"`
	// CurrentMetrics is status.currentMetrics after the step.
	CurrentMetrics []autoscalingv2.MetricStatus `json:"currentMetrics"`
}

// ExpectCondition is one recorded condition.
type ExpectCondition struct {
	// Type is the condition type.
	Type string `json:"type"`
	// Status is "True", "False" or "Unknown".
	Status string `json:"status"`
	// Reason is the normative reason.
	Reason string `json:"reason"`
	// Message is informational.
	Message string `json:"message,omitempty"`
}

// Loaded is a scenario and where it came from.
type Loaded struct {
	// Path is the file the scenario was read from.
	Path string
	// Scenario is the parsed scenario.
	Scenario Scenario
}

// LoadError is a scenario file that could not be read or parsed.
type LoadError struct {
	// Path is the file.
	Path string
	// Err is why it could not be used.
	Err error
}

// Error implements error.
func (e *LoadError) Error() string { return fmt.Sprintf("scenario: %s: %v", e.Path, e.Err) }

// Unwrap returns the cause.
func (e *LoadError) Unwrap() error { return e.Err }

// Load reads every *.json file under the given files and directories
// (recursively), in lexical path order. Files that cannot be parsed are
// returned as LoadErrors, and the rest still load; err is for a path that
// cannot be walked at all.
func Load(paths ...string) (scenarios []Loaded, bad []*LoadError, err error) {
	var files []string
	for _, p := range paths {
		werr := filepath.WalkDir(p, func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".json") {
				files = append(files, path)
			}
			return nil
		})
		if werr != nil {
			return nil, nil, fmt.Errorf("scenario: %w", werr)
		}
	}
	sort.Strings(files)
	for _, f := range files {
		sc, lerr := LoadFile(f)
		if lerr != nil {
			bad = append(bad, lerr)
			continue
		}
		for _, s := range sc {
			scenarios = append(scenarios, Loaded{Path: f, Scenario: s})
		}
	}
	return scenarios, bad, nil
}

// LoadFile reads one scenario file.
func LoadFile(path string) ([]Scenario, *LoadError) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &LoadError{Path: path, Err: err}
	}
	var f File
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, &LoadError{Path: path, Err: err}
	}
	if len(f.Scenarios) == 0 {
		return nil, &LoadError{Path: path, Err: fmt.Errorf("no scenarios")}
	}
	for i, s := range f.Scenarios {
		if s.Name == "" || len(s.Steps) == 0 {
			return nil, &LoadError{Path: path, Err: fmt.Errorf("scenario %d: a name and at least one step are required", i)}
		}
	}
	return f.Scenarios, nil
}
