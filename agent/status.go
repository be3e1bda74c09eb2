package agent

import (
	"fmt"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// setCondition sets a condition of the given type in conds, keeping its
// last transition time when the status does not change, and returns the
// list. A new condition's transition time is now.
func setCondition(conds []autoscalingv2.HorizontalPodAutoscalerCondition, t autoscalingv2.HorizontalPodAutoscalerConditionType, s corev1.ConditionStatus, reason, message string, now metav1.Time) []autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if conds[i].Status != s {
			conds[i].LastTransitionTime = now
		}
		conds[i].Status, conds[i].Reason, conds[i].Message = s, reason, message
		return conds
	}
	return append(conds, autoscalingv2.HorizontalPodAutoscalerCondition{Type: t, Status: s, Reason: reason, Message: message, LastTransitionTime: now})
}

// removeCondition returns conds without the condition of type t.
func removeCondition(conds []autoscalingv2.HorizontalPodAutoscalerCondition, t autoscalingv2.HorizontalPodAutoscalerConditionType) []autoscalingv2.HorizontalPodAutoscalerCondition {
	out := conds[:0]
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// findCondition returns the condition of type t, or nil.
func findCondition(conds []autoscalingv2.HorizontalPodAutoscalerCondition, t autoscalingv2.HorizontalPodAutoscalerConditionType) *autoscalingv2.HorizontalPodAutoscalerCondition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// mergeConditions applies the decision's conditions to the previous list:
// each keeps its previous transition time when its status is unchanged and
// the decision gave none; conditions the decision does not mention (the
// agent's own) are kept.
func mergeConditions(prev, decided []autoscalingv2.HorizontalPodAutoscalerCondition, now metav1.Time) []autoscalingv2.HorizontalPodAutoscalerCondition {
	out := append([]autoscalingv2.HorizontalPodAutoscalerCondition(nil), prev...)
	for _, d := range decided {
		old := findCondition(out, d.Type)
		if !d.LastTransitionTime.IsZero() {
			if old == nil {
				out = append(out, d)
			} else {
				*old = d
			}
			continue
		}
		out = setCondition(out, d.Type, d.Status, d.Reason, d.Message, now)
	}
	return out
}

// maxTargetsShown is how many metrics kubectl get hpa prints before
// "+ N more...".
const maxTargetsShown = 3

// formatTargets renders each metric's current value over its target as
// `kubectl get hpa` prints the Targets column, e.g. "cpu: 45%/50%".
func formatTargets(specs []autoscalingv2.MetricSpec, statuses []autoscalingv2.MetricStatus) string {
	if len(specs) == 0 {
		return "<none>"
	}
	list := []string{}
	for i, spec := range specs {
		if i >= maxTargetsShown {
			list = append(list, fmt.Sprintf("+ %d more...", len(specs)-maxTargetsShown))
			break
		}
		var st *autoscalingv2.MetricStatus
		if i < len(statuses) && statuses[i].Type == spec.Type {
			st = &statuses[i]
		}
		list = append(list, formatTarget(spec, st))
	}
	return strings.Join(list, ", ")
}

func formatTarget(spec autoscalingv2.MetricSpec, st *autoscalingv2.MetricStatus) string {
	const unknown = "<unknown>"
	q := func(v *resource.Quantity) string {
		if v == nil {
			return unknown
		}
		return v.String()
	}
	pct := func(v *int32) string {
		if v == nil {
			return unknown
		}
		return fmt.Sprintf("%d%%", *v)
	}
	// current/target for a MetricTarget and the matching MetricValueStatus.
	pair := func(target autoscalingv2.MetricTarget, cur func() *autoscalingv2.MetricValueStatus) string {
		var c *autoscalingv2.MetricValueStatus
		if st != nil {
			c = cur()
		}
		switch {
		case target.AverageUtilization != nil:
			current := unknown
			if c != nil {
				current = pct(c.AverageUtilization)
			}
			return current + "/" + pct(target.AverageUtilization)
		case target.AverageValue != nil:
			current := unknown
			if c != nil {
				current = q(c.AverageValue)
			}
			return current + "/" + q(target.AverageValue)
		default:
			current := unknown
			if c != nil {
				current = q(c.Value)
			}
			return current + "/" + q(target.Value)
		}
	}
	switch spec.Type {
	case autoscalingv2.ResourceMetricSourceType:
		if spec.Resource == nil {
			break
		}
		return string(spec.Resource.Name) + ": " + pair(spec.Resource.Target, func() *autoscalingv2.MetricValueStatus {
			if st.Resource == nil {
				return nil
			}
			return &st.Resource.Current
		})
	case autoscalingv2.ContainerResourceMetricSourceType:
		if spec.ContainerResource == nil {
			break
		}
		return string(spec.ContainerResource.Name) + ": " + pair(spec.ContainerResource.Target, func() *autoscalingv2.MetricValueStatus {
			if st.ContainerResource == nil {
				return nil
			}
			return &st.ContainerResource.Current
		})
	case autoscalingv2.PodsMetricSourceType:
		if spec.Pods == nil {
			break
		}
		return pair(spec.Pods.Target, func() *autoscalingv2.MetricValueStatus {
			if st.Pods == nil {
				return nil
			}
			return &st.Pods.Current
		})
	case autoscalingv2.ObjectMetricSourceType:
		if spec.Object == nil {
			break
		}
		s := pair(spec.Object.Target, func() *autoscalingv2.MetricValueStatus {
			if st.Object == nil {
				return nil
			}
			return &st.Object.Current
		})
		if spec.Object.Target.AverageValue != nil {
			s += " (avg)"
		}
		return s
	case autoscalingv2.ExternalMetricSourceType:
		if spec.External == nil {
			break
		}
		s := pair(spec.External.Target, func() *autoscalingv2.MetricValueStatus {
			if st.External == nil {
				return nil
			}
			return &st.External.Current
		})
		if spec.External.Target.AverageValue != nil {
			s += " (avg)"
		}
		return s
	}
	return unknown + " (" + string(spec.Type) + ")"
}

// reference renders the scale target as kubectl prints it: Kind/name.
func reference(ref autoscalingv2.CrossVersionObjectReference) string {
	return ref.Kind + "/" + ref.Name
}
