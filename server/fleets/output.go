package fleets

import (
	"fmt"

	"github.com/setpointhq/setpoint/fleet"
	setpointv1 "github.com/setpointhq/setpoint/proto/setpoint/v1"
	"github.com/setpointhq/setpoint/server/convert"
	"github.com/setpointhq/setpoint/target"
	"google.golang.org/protobuf/types/known/durationpb"
)

// storedSpec reads back the fleet's spec as put (target.Record's
// ReceivedSpec); nil when the record is not a fleet's.
func storedSpec(rec *target.Record) (*setpointv1.FleetSpec, error) {
	if rec.ReceivedSpec == "" {
		return nil, nil
	}
	spec := &setpointv1.FleetSpec{}
	if err := spec.UnmarshalVT([]byte(rec.ReceivedSpec)); err != nil {
		return nil, fmt.Errorf("fleets: %s: the spec as put: %w", rec.Key, err)
	}
	return spec, nil
}

// fleetMessage returns everything kept for a fleet in the API's form.
func fleetMessage(rec *target.Record, spec *setpointv1.FleetSpec) (*setpointv1.Fleet, error) {
	st, err := decodeState(rec)
	if err != nil {
		return nil, err
	}
	out := &setpointv1.Fleet{
		Key:      &setpointv1.FleetKey{Namespace: rec.Key.Namespace, Name: rec.Key.Name},
		Spec:     spec,
		Status:   convert.Status(rec.Status),
		History:  convert.History(rec.History),
		Split:    splitMessage(&st),
		LastSeen: timestamp(rec.LastSeen),
	}
	if rec.Last != nil {
		out.LastDecision = convert.Decision(*rec.Last)
	}
	for _, m := range spec.GetMembers() {
		out.Members = append(out.Members, memberStatus(&st, m.GetCluster()))
	}
	return out, nil
}

// memberStatus is what the fleet knows of member.
func memberStatus(st *state, member string) *setpointv1.FleetMemberStatus {
	out := &setpointv1.FleetMemberStatus{Member: member}
	for _, p := range st.pool {
		if p.Name == member {
			out.Pooled, out.Exclusion, out.Message = p.Exclusion == "", string(p.Exclusion), p.Message
		}
	}
	for _, m := range st.members {
		if m.Name == member {
			out.Share, out.Returning = m.Share, m.Returning
		}
	}
	if r := st.report(member); r != nil {
		out.LastReport = timestamp(r.received)
		rep := &setpointv1.FleetReport{}
		if rep.UnmarshalVT(r.report) == nil { // stored after it was decoded once
			out.Replicas, out.Pods, out.CannotScale = rep.GetScale().GetReplicas(), int32(len(rep.GetPods())), rep.GetCannotScale()
		}
	}
	return out
}

// splitMessage is the state's last split in the API's form; nil before
// the first decision.
func splitMessage(st *state) *setpointv1.FleetSplit {
	if st.split == nil {
		return nil
	}
	out := &setpointv1.FleetSplit{Time: timestamp(st.splitAt), Total: st.split.Total, Placed: st.split.Placed, Message: st.split.Message}
	for i := range st.split.Shares {
		out.Shares = append(out.Shares, shareMessage(&st.split.Shares[i]))
	}
	return out
}

// shareMessage is a member's share in the API's form; nil for nil.
func shareMessage(sh *fleet.Share) *setpointv1.FleetShare {
	if sh == nil {
		return nil
	}
	return &setpointv1.FleetShare{
		Member: sh.Member, Replicas: sh.Replicas, Weighted: sh.Weighted, Reason: string(sh.Reason),
		QuotaNum: sh.QuotaNum, QuotaDen: sh.QuotaDen, Remainder: sh.Remainder,
		Exclusion: string(sh.Exclusion), Message: sh.Message,
	}
}

// resolvedSpec is the fleet's spec with every default applied: the
// autoscaler as resolved (its schedules and fallback as put), the
// settings, stale_after and sync_period made explicit.
func resolvedSpec(r *resolved) (*setpointv1.FleetSpec, error) {
	a, err := convert.Spec(r.in.Spec, r.ref)
	if err != nil {
		return nil, err
	}
	a.Fallback, a.Schedules = r.api.GetAutoscaler().GetFallback(), r.api.GetAutoscaler().GetSchedules()
	return &setpointv1.FleetSpec{
		Autoscaler: a,
		Settings:   convert.ControllerSettings(r.in.Settings),
		Members:    r.api.GetMembers(),
		Combine:    r.api.GetCombine(),
		StaleAfter: durationpb.New(r.fleet.StaleAfter),
		SyncPeriod: durationpb.New(r.sync),
	}, nil
}
