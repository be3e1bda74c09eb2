package storetest

import (
	"reflect"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/target"
)

// FullRecord has every field of Record, at every depth, set to a non-zero
// value (store/boltstore's TestFullRecordIsFull checks it), so a round
// trip proves the codec carries every field: FullRecordV4's, and any field
// added since (fillZero).
func FullRecord(key target.Key) target.Record {
	rec := FullRecordV4(key)
	// Slices are not filled by fillZero: the fields added as slices since
	// schema version 4. A history is opaque bytes, not UTF-8.
	rec.Forecasts = []target.MetricHistory{
		{Metric: "cpu resource utilization (percentage of request)", History: "\x01\x00\xff\xfe history"},
		{Metric: "requests_per_second", History: string(make([]byte, 64))},
	}
	rec.Fleet = "\x0a\x03\xff\x00 fleet state" // opaque bytes, not UTF-8
	fillZero(reflect.ValueOf(&rec).Elem())
	return rec
}

// FullRecordV4 is the full record as store/boltstore/testdata/compat-v4.db,
// written by the hand-written codec (schema version 4), holds it: every
// field the types had then, and only those.
func FullRecordV4(key target.Key) target.Record {
	util := int32(85)
	selector := &engine.LabelSelector{
		MatchLabels:      map[string]string{"app": "web", "tier": "front"},
		MatchExpressions: []engine.LabelSelectorRequirement{{Key: "zone", Operator: "In", Values: []string{"a", "b"}}},
	}
	metric := engine.MetricIdentifier{Name: "requests_per_second", Selector: selector}
	object := engine.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "Ingress", Name: "main"}
	status := engine.Status{
		CurrentReplicas: 3,
		DesiredReplicas: 5,
		LastScaleTime:   At(-60),
		CurrentMetrics: []engine.MetricStatus{{
			Type:               engine.ContainerResourceSource,
			Resource:           "cpu",
			Container:          "app",
			Metric:             metric,
			DescribedObject:    object,
			Value:              &engine.Quantity{Milli: 1500, Format: engine.DecimalSI},
			AverageValue:       &engine.Quantity{Milli: 512 << 20, Format: engine.BinarySI},
			AverageUtilization: &util,
		}},
		Conditions: []engine.Condition{{
			Type: engine.AbleToScale, Status: engine.ConditionTrue, Reason: "ScaleUpLimit",
			Message: "the desired replica count is increasing faster than the maximum scale rate", LastTransitionTime: At(-30),
		}},
	}
	history := engine.History{
		Recommendations: []engine.Recommendation{{Replicas: 4, At: At(-15)}, {Replicas: 5, At: At(0)}},
		ScaleUpEvents:   []engine.ScaleEvent{{Change: 2, At: At(-60), Outdated: true}},
		ScaleDownEvents: []engine.ScaleEvent{{Change: 1, At: At(-600), Outdated: true}},
	}
	rules := func(window int32, tol float64) engine.Rules {
		return engine.Rules{
			StabilizationWindowSeconds: window,
			SelectPolicy:               engine.SelectMin,
			Policies:                   []engine.Policy{{Type: engine.PercentPolicy, Value: 100, PeriodSeconds: 15}},
			Tolerance:                  tol,
		}
	}
	rec := target.Record{
		Key: key,
		Ref: target.Ref{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		Spec: engine.Spec{
			MinReplicas: 2,
			MaxReplicas: 10,
			Metrics: []engine.MetricSpec{{
				Type:            engine.ObjectSource,
				Resource:        "memory",
				Container:       "sidecar",
				Metric:          metric,
				DescribedObject: object,
				Target:          engine.Target{Type: engine.AverageValueTarget, Milli: 2000, Utilization: 70},
			}},
			Behavior: &engine.Behavior{ScaleUp: rules(30, 0.05), ScaleDown: rules(300, 0.2)},
		},
		Settings: engine.Settings{
			Tolerance:                    0.1,
			CPUInitializationPeriod:      5 * time.Minute,
			InitialReadinessDelay:        30 * time.Second,
			DownscaleStabilizationWindow: 5 * time.Minute,
		},
		Status:  status,
		History: history,
		Last: &target.LastDecision{
			ID:     "d-42",
			At:     At(0),
			Before: engine.Status{CurrentReplicas: 3, DesiredReplicas: 3, LastScaleTime: At(-120), CurrentMetrics: status.CurrentMetrics, Conditions: status.Conditions},
			From:   3,
			Decision: engine.Decision{
				DesiredReplicas: 5,
				Rescale:         true,
				Error:           "invalid metrics (1 invalid out of 2)",
				Status:          status,
				Explanation: engine.Explanation{
					CurrentReplicas: 3,
					Metrics: []engine.MetricExplanation{{
						Name: "cpu resource utilization (percentage of request)", Outcome: engine.OutcomeRebalanced,
						Proposal: 6, Err: "missing request for cpu", Current: 120, Target: 70, Ratio: 1.71, RebalancedRatio: 1.4,
						ReadyPods: 3, UnreadyPods: 1, MissingPods: 2, IgnoredPods: 1,
					}},
					Winner:   1,
					Proposal: 6,
					Steps:    []engine.Step{{Kind: engine.StepLimited, From: 6, To: 5, Reason: "ScaleUpLimit", Message: "limited by policy"}},
				},
				History: history,
			},
		},
		Events: []target.Event{{
			Kind: target.EventFailed, From: 3, To: 5, At: At(1), DecisionID: "d-42", Message: "forbidden",
		}},
		LastSeen: At(1),
	}
	return rec
}

// fillZero sets every zero field under v that the literal above does not
// set (a field added to the record's types since) to a value of its own:
// a new field is in the round trips without an edit here, and fails them
// until the codec carries it. Slices and maps are left as they are.
func fillZero(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fillZero(v.Elem())
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			if v.IsZero() {
				v.Set(reflect.ValueOf(At(7)))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fillZero(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			fillZero(v.Index(i))
		}
	case reflect.String:
		if v.String() == "" {
			v.SetString("filled")
		}
	case reflect.Int, reflect.Int32, reflect.Int64:
		if v.Int() == 0 {
			v.SetInt(7)
		}
	case reflect.Uint, reflect.Uint32, reflect.Uint64:
		if v.Uint() == 0 {
			v.SetUint(7)
		}
	case reflect.Float64:
		if v.Float() == 0 {
			v.SetFloat(0.7)
		}
	case reflect.Bool:
		v.SetBool(true)
	}
}
