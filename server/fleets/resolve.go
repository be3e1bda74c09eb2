package fleets

import (
	"errors"
	"strings"
	"time"

	"github.com/setpointhq/setpoint/engine"
	"github.com/setpointhq/setpoint/fleet"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
)

// Cluster is the reserved cluster under which fleets are stored.
const Cluster = "@fleet"

// DefaultSyncPeriod is a fleet's sync period when its spec sets none: the
// Kubernetes controller's default.
const DefaultSyncPeriod = 15 * time.Second

// MinSyncPeriod is the shortest sync period a fleet may have.
const MinSyncPeriod = time.Second

// staleSyncPeriods is how many sync periods old a report is when it is
// left out, unless the spec says otherwise.
const staleSyncPeriods = 3

// Key is the store key of a fleet.
func Key(k *setpointv1.FleetKey) target.Key {
	return target.Key{Cluster: Cluster, Namespace: k.GetNamespace(), Name: k.GetName()}
}

// resolved is a fleet's spec made into what package fleet decides with.
type resolved struct {
	// in is the base engine input: the resolved spec and settings, the
	// namespace, the schedules' proposals at the resolution's time.
	in       engine.Input
	ref      target.Ref
	fallback *target.Fallback
	// api is the spec as put, defaults not applied.
	api   *setpointv1.FleetSpec
	fleet fleet.Spec
	// sync is the fleet's sync period: about the time between two
	// decisions (decidesAfter).
	sync time.Duration
}

// resolve validates spec and resolves it at now, through the resolver
// Recommend uses (package convert) for the autoscaler part. Errors are
// *setpointv1.ValidationError naming fields of a PutFleetRequest
// ("spec.members[1].weight").
func resolve(key *setpointv1.FleetKey, spec *setpointv1.FleetSpec, now time.Time) (resolved, error) {
	verr := &setpointv1.ValidationError{}
	a := spec.GetAutoscaler()
	switch {
	case spec == nil:
		verr.Add("spec", "must be set")
	case a == nil:
		verr.Add("spec.autoscaler", "must be set")
	case a.GetForecast() != nil:
		verr.Add("spec.autoscaler.forecast", "fleets do not forecast")
	}
	if err := verr.Err(); err != nil {
		return resolved{}, err
	}
	in, err := convert.Input(&setpointv1.RecommendRequest{
		Target:       &setpointv1.TargetKey{Cluster: Cluster, Namespace: key.GetNamespace(), Name: key.GetName()},
		Spec:         a,
		Settings:     spec.GetSettings(),
		Scale:        &setpointv1.Scale{},
		Observations: make([]*setpointv1.MetricObservation, len(a.GetMetrics())),
	}, now)
	if err != nil {
		return resolved{}, reprefix(err, map[string]string{"spec": "spec.autoscaler", "settings": "spec.settings"}, "spec.autoscaler")
	}
	r := resolved{api: spec, in: in, ref: convert.TargetRef(a.GetScaleTargetRef()), fallback: convert.Fallback(a), sync: DefaultSyncPeriod}
	if d := spec.GetSyncPeriod(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() < MinSyncPeriod {
			verr.Add("spec.sync_period", "must be a duration of at least %v, got %v", MinSyncPeriod, d.AsDuration())
		}
		r.sync = d.AsDuration()
	}
	r.fleet.StaleAfter = staleSyncPeriods * r.sync
	if d := spec.GetStaleAfter(); d != nil {
		if d.CheckValid() != nil || d.AsDuration() <= 0 {
			verr.Add("spec.stale_after", "must be a duration > 0, got %v", d.AsDuration())
		}
		r.fleet.StaleAfter = d.AsDuration()
	}
	for _, m := range spec.GetMembers() {
		fm := fleet.Member{Name: m.GetCluster(), Weight: m.GetWeight(), Min: m.GetMinReplicas()}
		if m.MaxReplicas != nil {
			fm.Max = new(int32)
			*fm.Max = m.GetMaxReplicas()
		}
		r.fleet.Members = append(r.fleet.Members, fm)
	}
	for _, c := range spec.GetCombine() {
		r.fleet.Combine = append(r.fleet.Combine, fleet.Combine(c))
	}
	if err := verr.Err(); err != nil {
		return resolved{}, err
	}
	if err := r.fleet.Validate(&r.in.Spec); err != nil {
		return resolved{}, fleetField(err, "spec.")
	}
	return r, nil
}

// report converts a member's report with the fleet's spec, received at.
// Errors are *setpointv1.ValidationError naming fields under prefix
// ("report.": of a ReportRequest).
func (r *resolved) report(rep *setpointv1.FleetReport, at time.Time, prefix string) (fleet.Report, error) {
	obs := rep.GetObservations()
	if rep.GetCannotScale() != "" && len(obs) == 0 {
		// A member that cannot scale is left out of the pool: it need not
		// have read the fleet's metrics to say so.
		obs = make([]*setpointv1.MetricObservation, len(r.api.GetAutoscaler().GetMetrics()))
		for i := range obs {
			obs[i] = &setpointv1.MetricObservation{}
		}
	}
	in, err := convert.Input(&setpointv1.RecommendRequest{
		Target:          &setpointv1.TargetKey{Cluster: Cluster, Namespace: r.in.Namespace},
		Spec:            r.api.GetAutoscaler(),
		Settings:        r.api.GetSettings(),
		Scale:           rep.GetScale(),
		Pods:            rep.GetPods(),
		ResourceMetrics: rep.GetResourceMetrics(),
		Observations:    obs,
	}, at)
	if err != nil {
		return fleet.Report{}, reprefix(err, nil, strings.TrimSuffix(prefix, "."))
	}
	return fleet.Report{
		Member: rep.GetMember(), At: at,
		Scale: in.Scale, Pods: in.Pods, ResourceMetrics: in.ResourceMetrics, Observations: in.Observations,
		CannotScale: rep.GetCannotScale(),
	}, nil
}

// reprefix moves the field paths of a *setpointv1.ValidationError: a path
// whose first part is a key of parts gets that part replaced, every other
// path is put under other. Other errors are returned as they are.
func reprefix(err error, parts map[string]string, other string) error {
	var ve *setpointv1.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	out := &setpointv1.ValidationError{}
	for _, v := range ve.Violations {
		first := v.Field
		if i := strings.IndexAny(first, ".["); i >= 0 {
			first = first[:i]
		}
		if p, ok := parts[first]; ok {
			v.Field = p + strings.TrimPrefix(v.Field, first)
		} else {
			v.Field = other + "." + v.Field
		}
		out.Violations = append(out.Violations, v)
	}
	return out
}

// fleetFields are package fleet's names of a spec's fields and the API's.
var fleetFields = strings.NewReplacer(".name", ".cluster", ".min", ".min_replicas", ".max", ".max_replicas", "staleAfter", "stale_after")

// fleetField turns an error of package fleet that matches fleet.ErrInvalid
// ("fleet: invalid input: members[1].weight: must be …") into a
// *setpointv1.ValidationError naming the field under prefix
// ("spec.members[1].weight"). Other errors are returned as they are.
func fleetField(err error, prefix string) error {
	if !errors.Is(err, fleet.ErrInvalid) {
		return err
	}
	msg := strings.TrimPrefix(err.Error(), fleet.ErrInvalid.Error()+": ")
	field, reason, ok := strings.Cut(msg, ": ")
	if !ok {
		field, reason = "", msg
	}
	ve := &setpointv1.ValidationError{}
	ve.Add(strings.TrimSuffix(prefix+fleetFields.Replace(field), "."), "%s", reason)
	return ve
}
