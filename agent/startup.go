package agent

import (
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// PodStartup is a workload's start-up and readiness time as measured from
// its pods: from a pod's creation to its Ready condition turning True. It
// is what a forecast's lead time is made of (docs/ahead-of-load.md): pods
// asked for one start-up ahead of the load are ready when it comes.
type PodStartup struct {
	// Time is the 90th percentile (nearest rank) of the measured pods'
	// start-up times; 0 when nothing was measured.
	Time time.Duration
	// Pods is how many pods Time was measured on; 0 when fewer than
	// minStartupPods could be measured.
	Pods int
}

const (
	// startupSample is how many of the most recently created measurable
	// pods a measurement reads: recent pods show the workload's current
	// image, probes and nodes.
	startupSample = 20
	// minStartupPods is the fewest measurable pods a measurement needs.
	minStartupPods = 3
)

// measureStartup measures the start-up time of pods. A pod counts when it
// is not being deleted, its Ready condition is True with a transition at
// or after its creation, and none of its containers restarted (after a
// restart, the Ready transition is the restart's, not the start-up's).
// Of those, the startupSample most recently created are read, and the
// 90th percentile is taken, so that a few slow pods (a cold node, an image
// pull) lengthen the lead time and a single one that flapped does not set
// it. It reads pods and does not keep them.
func measureStartup(pods []*corev1.Pod) PodStartup {
	type sample struct {
		created time.Time
		took    time.Duration
	}
	var samples []sample
	for _, p := range pods {
		if p == nil || p.DeletionTimestamp != nil || restarted(p) {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type != corev1.PodReady || c.Status != corev1.ConditionTrue || c.LastTransitionTime.IsZero() {
				continue
			}
			created := p.CreationTimestamp.Time
			if took := c.LastTransitionTime.Sub(created); !created.IsZero() && took >= 0 {
				samples = append(samples, sample{created, took})
			}
		}
	}
	if len(samples) < minStartupPods {
		return PodStartup{}
	}
	slices.SortFunc(samples, func(a, b sample) int {
		if c := b.created.Compare(a.created); c != 0 {
			return c
		}
		return int(a.took - b.took)
	})
	samples = samples[:min(len(samples), startupSample)]
	took := make([]time.Duration, len(samples))
	for i, s := range samples {
		took[i] = s.took
	}
	slices.Sort(took)
	rank := (9*len(took) + 9) / 10 // ⌈0.9·n⌉
	return PodStartup{Time: took[rank-1], Pods: len(took)}
}

// restarted reports whether any of p's containers, or of its sidecars
// (init containers still running), restarted.
func restarted(p *corev1.Pod) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.RestartCount > 0 {
			return true
		}
	}
	for _, s := range p.Status.InitContainerStatuses {
		if s.RestartCount > 0 && s.State.Terminated == nil {
			return true
		}
	}
	return false
}
