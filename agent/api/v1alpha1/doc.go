// Package v1alpha1 holds the Go types of the Autoscaler custom resource
// (setpoint.dev/v1alpha1) and its conversions from and to the dynamic
// client's unstructured form. The CRD manifest in deploy/ is generated from
// these types (go generate), as is zz_generated.deepcopy.go.
//
// An Autoscaler's spec is the autoscaling/v2 HorizontalPodAutoscalerSpec
// plus paused and dryRun; its status mirrors the HPA status plus the last
// decision's explanation and the printable reference and targets. With
// spec.fleet it is a member of a fleet instead: only scaleTargetRef, fleet
// and paused are read, and the status holds the member's share
// (desiredReplicas) and the fleet's total (fleetReplicas).
//
// +kubebuilder:object:generate=true
// +groupName=setpoint.dev
// +versionName=v1alpha1
package v1alpha1
